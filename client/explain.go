package client

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/brimnode/brim/internal/masteraddr"
)

// ExplainTLS returns a function that adds ErrServesTLS to a plain
// connection's failure when the master at addr serves TLS (probed once,
// with ServesTLS bounded by explainProbe, at the first failure that may
// be one; other errors are returned as they are). A failure that is an
// answer — another master was elected and the one in use left
// (masteraddr.LeaderMovedError), a standby named the leader — is no TLS
// mismatch, and is never held up by a probe: the runner calls this on
// its way to the next master, and a probe of a frozen master (its kernel
// accepts, nothing answers) held frameworks there for the probe's 5 s
// after the watch had found the new leader (make chaos, master-stop).
// brim run gives it to the runner for its gRPC connection. The function
// is safe for concurrent use.
//
// addr may be a --master list: the first master is probed.
func ExplainTLS(addr string) func(context.Context, error) error {
	var (
		once sync.Once
		tls  bool
	)
	return func(ctx context.Context, err error) error {
		if _, answered := masteraddr.Leader(err); answered { // a standby's answer, or a LeaderMovedError
			return err
		}
		once.Do(func() {
			pctx, cancel := context.WithTimeout(ctx, explainProbe)
			defer cancel()
			tls = ServesTLS(pctx, strings.Split(addr, ",")[0])
		})
		if tls {
			return fmt.Errorf("%w (%w)", err, ErrServesTLS)
		}
		return err
	}
}

// explainProbe bounds ExplainTLS's probe: a TLS handshake on loopback or
// a LAN takes milliseconds.
const explainProbe = time.Second
