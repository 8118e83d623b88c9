package etcdstore

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

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
func Discover(ctx context.Context, cfg Config) ([]string, error) {
	c, err := Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.cli.Get(rctx, c.electionPrefix(), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("discover masters under %s: %w", c.prefix, err)
	}
	var live, dead []string
	seen := map[string]bool{}
	for _, kv := range resp.Kvs {
		a := string(kv.Value)
		if a == "" || seen[a] {
			continue
		}
		seen[a] = true
		if c.sessionLooksAlive(rctx, clientv3.LeaseID(kv.Lease)) {
			live = append(live, a)
		} else {
			dead = append(dead, a)
		}
	}
	out := append(live, dead...)
	if len(out) == 0 {
		return nil, fmt.Errorf("discover masters under %s: %w", c.prefix, ErrNoMasters)
	}
	return out, nil
}

// sessionLooksAlive reports whether the session lease of an election
// key has at least half its TTL left; a key without a lease, or one
// whose lease cannot be read, counts as alive (no reason to doubt it).
func (c *Client) sessionLooksAlive(ctx context.Context, lease clientv3.LeaseID) bool {
	if lease == 0 {
		return true
	}
	r, err := c.cli.TimeToLive(ctx, lease)
	if err != nil {
		return true
	}
	// etcd truncates what is left to whole seconds: it is at most r.TTL+1.
	return r.TTL >= 0 && 2*(r.TTL+1) > r.GrantedTTL
}
