package client

import (
	"context"
	"fmt"
	"strings"
	"sync"
)

// ExplainTLS returns a function that adds ErrServesTLS to a plain
// connection's failure when the master at addr serves TLS (probed once,
// with ServesTLS, at the first failure; other errors are returned as they
// are). brim run gives it to the runner for its gRPC connection. The
// function is safe for concurrent use.
//
// addr may be a --master list: the first master is probed.
func ExplainTLS(addr string) func(context.Context, error) error {
	var (
		once sync.Once
		tls  bool
	)
	return func(ctx context.Context, err error) error {
		once.Do(func() { tls = ServesTLS(ctx, strings.Split(addr, ",")[0]) })
		if tls {
			return fmt.Errorf("%w (%w)", err, ErrServesTLS)
		}
		return err
	}
}
