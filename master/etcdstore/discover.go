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
// under cfg.Prefix, the leader first then in the order they will lead:
// what `--master etcd://HOST:2379/PREFIX` turns into for agents,
// frameworks and operators, who then follow the leader as with a list.
// The list is read once: masters added later are found through the
// standbys' answers only if one of the listed is still there.
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
	var out []string
	seen := map[string]bool{}
	for _, kv := range resp.Kvs {
		if a := string(kv.Value); a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("discover masters under %s: %w", c.prefix, ErrNoMasters)
	}
	return out, nil
}
