package discovery

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Config is where the masters campaign and how to reach that etcd.
type Config struct {
	// Endpoints are etcd's client addresses, HOST:PORT (ParseURL).
	Endpoints []string
	// Prefix is the key prefix of the master cluster, e.g. "/brim".
	Prefix string
	// TLS, when set, speaks TLS to etcd (client certificate, CA).
	TLS *tls.Config
	// Username and Password authenticate to etcd when it has auth on.
	Username, Password string
	// Timeout bounds connecting and the reads; 0: 5 s.
	Timeout time.Duration
}

// DefaultTimeout is Config.Timeout's default.
const DefaultTimeout = 5 * time.Second

// ErrNoMasters: no master campaigns under the prefix (none runs, or the
// prefix is not theirs).
var ErrNoMasters = errors.New("no master campaigns there")

// Discover lists the advertised addresses of the masters campaigning
// under cfg.Prefix: those whose session looks alive first, the leader
// (or the next to lead) first among them, then those whose session
// looks dead, all in the order they will lead. It is what `--master
// etcd://HOST:2379/PREFIX` turns into for agents, frameworks and
// operators, who then follow the leader as with a list; agents and
// frameworks read it again whenever every master they list has failed.
//
// A dead master's key lives until its lease runs out, a TTL after its
// last refresh, and the first of them is still the election's leader
// for etcd: listed first, it was tried first, and an agent came 11.3 s
// after a new leader at a new address. A session's lease is refreshed
// every third of its TTL (and the leader's every quarter), so one with
// less than half its TTL left has missed refreshes: its master is
// likely gone, and is listed last (not left out: it may be slow).
//
// It reads what one member holds (a serializable read) and gives the
// leases' checks leaseCheckTimeout in all: without etcd's quorum, or
// with its raft leader just dead, a linearizable read and a lease's TTL
// wait until their timeout (the dial's, then the request's, 5 s each),
// and an `etcd://` agent that asked while the quorum was lost reached
// the leader elected after its return 8.58 s late (issue 30). The
// masters' addresses change seldom; a list a moment stale costs one
// more round, a blocked read a whole one.
func Discover(ctx context.Context, cfg Config) ([]string, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("discover masters: no etcd endpoints")
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	prefix := strings.TrimRight(cfg.Prefix, "/")
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: EndpointURLs(cfg.Endpoints, cfg.TLS != nil), DialTimeout: timeout, TLS: cfg.TLS,
		Username: cfg.Username, Password: cfg.Password, Logger: zap.NewNop(), Context: ctx,
	})
	if err != nil {
		return nil, fmt.Errorf("discover masters: etcd %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	defer func() { _ = cli.Close() }()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := cli.Get(rctx, ElectionPrefix(prefix), clientv3.WithPrefix(), clientv3.WithSerializable(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("discover masters under %s at %s: no answer: %w", prefix, strings.Join(cfg.Endpoints, ","), err)
	}
	lctx, lcancel := context.WithTimeout(ctx, leaseCheckTimeout)
	defer lcancel()
	var live, dead []string
	seen := map[string]bool{}
	for _, kv := range resp.Kvs {
		a := string(kv.Value)
		if a == "" || seen[a] {
			continue
		}
		seen[a] = true
		if sessionLooksAlive(lctx, cli, clientv3.LeaseID(kv.Lease)) {
			live = append(live, a)
		} else {
			dead = append(dead, a)
		}
	}
	out := append(live, dead...)
	if len(out) == 0 {
		return nil, fmt.Errorf("discover masters under %s: %w", prefix, ErrNoMasters)
	}
	return out, nil
}

// leaseCheckTimeout bounds the lease checks of one Discover: etcd
// answers them within milliseconds while it has a raft leader.
const leaseCheckTimeout = 500 * time.Millisecond

// sessionLooksAlive reports whether the session lease of an election
// key has at least half its TTL left; a key without a lease, or one
// whose lease cannot be read, counts as alive (no reason to doubt it).
func sessionLooksAlive(ctx context.Context, cli *clientv3.Client, lease clientv3.LeaseID) bool {
	if lease == 0 {
		return true
	}
	if ctx.Err() != nil {
		return true // an earlier check ran out the time: no answer now
	}
	r, err := cli.TimeToLive(ctx, lease)
	if err != nil {
		return true
	}
	// etcd truncates what is left to whole seconds: it is at most r.TTL+1.
	return r.TTL >= 0 && 2*(r.TTL+1) > r.GrantedTTL
}
