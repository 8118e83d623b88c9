package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/record"
)

// A standby keeps a copy of the registry while it campaigns: it reads
// the registry once, then follows it with a watch. Elected, it reads in
// the fenced transaction only the count of the registry's keys, and
// asks etcd for the watch's progress: once the watch has delivered
// every change up to the transaction's revision, the copy is the
// registry the transaction saw (every later write is this leader's,
// and it has made none). A copy whose watch failed or did not catch up
// in time (maxCatchUp), or whose count differs, is not trusted: the
// registry is read whole. (Reading the keys modified since the copy's revision in
// the transaction instead made etcd read all 50,000 records to filter
// them: 0.2 s of the load, under the storm.)
//
// Reading 50,000 agents' records after the election took 0.54 – 0.62 s
// of a failover (etcd's range, its transfer and decoding), which the
// agents waiting on the new leader waited too. The copy keeps the
// agents' records decoded as they come, too: decoding them took 0.16 s
// of CPU at the election, when the held agents' streams compete for it
// (the load then took 0.5 – 1.4 s instead of 0.3 s).

// mirror is a standby's copy of the registry: the records under the
// registry prefix, with every change up to revision rev. Its goroutine
// (follow) owns it until stop returns.
type mirror struct {
	c      *Client
	cancel context.CancelFunc
	ended  chan struct{} // closed when follow returns

	mu     sync.Mutex
	kvs    map[string][]byte                // full key → value
	agents map[string]master.PersistedAgent // agent ID → its record in kvs decoded, for those that decode
	// rev: the copy holds every change up to it (the read's revision,
	// then the watch's progress notifications); 0: no copy (not read
	// yet, or the watch failed).
	rev      int64
	progress chan struct{} // closed and replaced when rev changes (catchUp)
}

// wakeLocked wakes catchUp.
func (m *mirror) wakeLocked() {
	close(m.progress)
	m.progress = make(chan struct{})
}

// registryCopy is a taken copy (mirror.take).
type registryCopy struct {
	kvs    map[string][]byte
	agents map[string]master.PersistedAgent
	rev    int64
}

// decodeAgent keeps the agent record of full key k decoded in agents, or
// none when it does not decode (the load decodes it again, and fails as
// a whole read would); other keys are left out.
func (m *mirror) decodeAgent(agents map[string]master.PersistedAgent, k string, v []byte) {
	id, ok := m.c.agentID(k)
	if !ok {
		return
	}
	delete(agents, id)
	if a, err := record.DecodeAgent(v); err == nil {
		agents[id] = a
	}
}

// agentID is the ID of the agent whose record is under full key k; ok
// false for other records.
func (c *Client) agentID(k string) (id string, ok bool) {
	return strings.CutPrefix(k, c.registryPrefix()+famAgents)
}

// startMirror starts copying the registry; stop (or take) ends it.
func (c *Client) startMirror(ctx context.Context) *mirror {
	ctx, cancel := context.WithCancel(ctx)
	m := &mirror{c: c, cancel: cancel, ended: make(chan struct{}), progress: make(chan struct{})}
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
	agents := make(map[string]master.PersistedAgent, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		kvs[string(kv.Key)] = kv.Value
		m.decodeAgent(agents, string(kv.Key), kv.Value)
	}
	m.mu.Lock()
	m.kvs, m.agents, m.rev = kvs, agents, resp.Header.Revision
	m.wakeLocked()
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
			m.kvs, m.agents, m.rev = nil, nil, 0
			m.wakeLocked()
			m.mu.Unlock()
			return
		}
		m.mu.Lock()
		for _, ev := range wr.Events {
			k := string(ev.Kv.Key)
			if ev.Type == clientv3.EventTypeDelete {
				delete(m.kvs, k)
				if id, ok := m.c.agentID(k); ok {
					delete(m.agents, id)
				}
			} else {
				m.kvs[k] = ev.Kv.Value
				m.decodeAgent(m.agents, k, ev.Kv.Value)
			}
		}
		// Only a progress notification says every change up to its
		// revision has come (a response may carry part of a revision).
		if wr.IsProgressNotify() && wr.Header.Revision > m.rev {
			m.rev = wr.Header.Revision
			m.wakeLocked()
		}
		m.mu.Unlock()
	}
	// The channel closed: ctx ended (stop) or the client closed.
}

// stop ends the copying and waits for it.
func (m *mirror) stop() {
	m.cancel()
	<-m.ended
}

// take stops the copying and returns the copy (rev 0: none).
func (m *mirror) take() registryCopy {
	m.stop()
	m.mu.Lock()
	defer m.mu.Unlock()
	c := registryCopy{kvs: m.kvs, agents: m.agents, rev: m.rev}
	m.kvs, m.agents, m.rev = nil, nil, 0
	return c
}

// errCopyOutOfDate: the standby's copy is not the registry.
var errCopyOutOfDate = errors.New("the standby's copy is not the registry")

// maxCatchUp bounds the wait for the copy's watch at the election (or
// the request timeout, if shorter): past it the registry is read whole
// (0.5 s at 50,000 agents) rather than the failover kept waiting.
const maxCatchUp = 2 * time.Second

// catchUp waits until the watch has delivered every change up to
// revision rev, or ctx ends. It asks for the watch's progress again
// while it waits: the member serving the watch may be behind the one
// that answered the transaction.
func (m *mirror) catchUp(ctx context.Context, rev int64) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		m.mu.Lock()
		copied, progress := m.rev, m.progress
		m.mu.Unlock()
		switch {
		case copied == 0:
			return fmt.Errorf("%w: no copy (not read, or its watch failed)", errCopyOutOfDate)
		case copied >= rev:
			return nil
		}
		// The watch's stream is the one of its context's metadata.
		if err := m.c.cli.RequestProgress(clientv3.WithRequireLeader(ctx)); err != nil {
			return fmt.Errorf("%w: ask for the watch's progress: %w", errCopyOutOfDate, err)
		}
		select {
		case <-progress:
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("%w: its watch did not reach revision %d (at %d): %w", errCopyOutOfDate, rev, copied, ctx.Err())
		}
	}
}

// loadFrom loads the registry from the copy m in a fenced transaction,
// and stops m.
func (t *Term) loadFrom(m *mirror) (*master.Persisted, registryCopy, error) {
	defer m.stop()
	prefix := t.c.registryPrefix()
	resp, err := t.txn(clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithCountOnly()))
	if err != nil {
		return nil, registryCopy{}, fmt.Errorf("load master registry: %w", err)
	}
	count := resp.Responses[0].GetResponseRange().Count
	ctx, cancel := context.WithTimeout(context.Background(), min(t.c.timeout, maxCatchUp))
	defer cancel()
	if err := m.catchUp(ctx, resp.Header.Revision); err != nil {
		return nil, registryCopy{}, err
	}
	c := m.take()
	if int64(len(c.kvs)) != count {
		return nil, c, fmt.Errorf("%w: %d records in the copy, %d in the registry", errCopyOutOfDate, len(c.kvs), count)
	}
	p := record.NewPersisted()
	if c.agents != nil {
		p.Agents = c.agents // the copy is the term's now
	}
	for k, v := range c.kvs {
		if id, ok := t.c.agentID(k); ok {
			if _, decoded := p.Agents[id]; decoded {
				continue
			}
		}
		if err := decode(p, strings.TrimPrefix(k, prefix), v); err != nil {
			return nil, c, fmt.Errorf("load master registry: key %s: %w", k, err)
		}
	}
	return p, c, nil
}
