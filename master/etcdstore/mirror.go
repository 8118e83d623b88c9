package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/brimnode/brim/master"
)

// A standby keeps a copy of the registry while it campaigns: it reads
// the registry once, then follows it with a watch. Elected, it loads
// only what changed since its copy, in the fenced transaction that
// would otherwise read the whole registry: the count of the registry's
// keys and the keys modified after the copy's revision. The copy with
// those changes is the registry, unless a key was deleted that the copy
// still holds (the counts differ): then the registry is read whole.
//
// Reading 50,000 agents' records after the election took 0.54 – 0.62 s
// of a failover (etcd's range, its transfer and decoding), which the
// agents waiting on the new leader waited too.

// mirror is a standby's copy of the registry: the records under the
// registry prefix at revision rev. Its goroutine (follow) owns it until
// stop returns.
type mirror struct {
	c      *Client
	cancel context.CancelFunc
	ended  chan struct{} // closed when follow returns

	mu  sync.Mutex
	kvs map[string][]byte // full key → value
	rev int64             // 0: no copy (not read yet, or the watch failed)
}

// startMirror starts copying the registry; stop (or take) ends it.
func (c *Client) startMirror(ctx context.Context) *mirror {
	ctx, cancel := context.WithCancel(ctx)
	m := &mirror{c: c, cancel: cancel, ended: make(chan struct{})}
	go m.follow(ctx) // owned by m: ends with stop
	return m
}

// follow reads the registry, then applies its changes until ctx ends or
// the watch fails (the copy is dropped: a full read replaces it).
func (m *mirror) follow(ctx context.Context) {
	defer close(m.ended)
	prefix := m.c.registryPrefix()
	rctx, cancel := context.WithTimeout(ctx, m.c.timeout)
	resp, err := m.c.cli.Get(rctx, prefix, clientv3.WithPrefix())
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			m.c.log.Info("standby's copy of the registry: not read; an election reads it whole", "err", err)
		}
		return
	}
	kvs := make(map[string][]byte, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		kvs[string(kv.Key)] = kv.Value
	}
	m.mu.Lock()
	m.kvs, m.rev = kvs, resp.Header.Revision
	m.mu.Unlock()
	m.c.log.Debug("standby's copy of the registry: read", "records", len(kvs), "revision", resp.Header.Revision)
	// RequireLeader: a watch on a member cut from its cluster would wait
	// for nothing rather than fail.
	w := m.c.cli.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	for wr := range w {
		if err := wr.Err(); err != nil || wr.Canceled {
			if ctx.Err() == nil {
				m.c.log.Info("standby's copy of the registry: watch ended; an election reads it whole", "err", err)
			}
			m.mu.Lock()
			m.kvs, m.rev = nil, 0
			m.mu.Unlock()
			return
		}
		if len(wr.Events) == 0 {
			continue
		}
		m.mu.Lock()
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypeDelete {
				delete(m.kvs, string(ev.Kv.Key))
			} else {
				m.kvs[string(ev.Kv.Key)] = ev.Kv.Value
			}
		}
		// A response holds every event of its revisions.
		m.rev = wr.Events[len(wr.Events)-1].Kv.ModRevision
		m.mu.Unlock()
	}
	// The channel closed: ctx ended (stop) or the client closed.
}

// stop ends the copying and waits for it.
func (m *mirror) stop() {
	m.cancel()
	<-m.ended
}

// take stops the copying and returns the copy and its revision (0:
// none).
func (m *mirror) take() (map[string][]byte, int64) {
	m.stop()
	m.mu.Lock()
	defer m.mu.Unlock()
	kvs, rev := m.kvs, m.rev
	m.kvs, m.rev = nil, 0
	return kvs, rev
}

// errCopyOutOfDate: the standby's copy holds a key deleted since.
var errCopyOutOfDate = errors.New("the standby's copy holds records deleted since")

// loadSince loads the registry from kvs, a copy at revision rev, and
// what changed since — in one fenced transaction. kvs is updated in
// place.
func (t *Term) loadSince(kvs map[string][]byte, rev int64) (*master.Persisted, int, error) {
	prefix := t.c.registryPrefix()
	resp, err := t.txn(
		clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithCountOnly()),
		// From rev itself, not rev+1: should a watch response ever have
		// carried part of a revision, its other keys are read again.
		clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithMinModRev(rev)),
	)
	if err != nil {
		return nil, 0, fmt.Errorf("load master registry: %w", err)
	}
	count := resp.Responses[0].GetResponseRange().Count
	changed := resp.Responses[1].GetResponseRange().Kvs
	for _, kv := range changed {
		kvs[string(kv.Key)] = kv.Value
	}
	// Every key of the registry is in kvs now (unchanged since rev, or
	// changed); the same count means nothing else is.
	if int64(len(kvs)) != count {
		return nil, 0, fmt.Errorf("%w: %d records in the copy with its changes, %d in the registry", errCopyOutOfDate, len(kvs), count)
	}
	p := newPersisted()
	for k, v := range kvs {
		if err := decode(p, strings.TrimPrefix(k, prefix), v); err != nil {
			return nil, 0, fmt.Errorf("load master registry: key %s: %w", k, err)
		}
	}
	return p, len(changed), nil
}
