package etcdstore

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/brimnode/brim/demand"
	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/resources"
)

// Defaults of Config.
const (
	DefaultSessionTTL     = 10 * time.Second
	DefaultDialTimeout    = 5 * time.Second
	DefaultRequestTimeout = 5 * time.Second
	// MaxWeightsPerWrite is the most weights one PutWeights writes: they
	// go in one transaction, and etcd refuses one of more than 128
	// operations by default (--max-txn-ops); one is the fence's.
	MaxWeightsPerWrite = 120
)

// Config is where the registry lives and how to reach it.
type Config struct {
	// Endpoints are etcd's client addresses, HOST:PORT (ParseURL).
	Endpoints []string
	// Prefix is the key prefix of this master cluster, e.g. "/brim".
	Prefix string
	// TLS, when set, speaks TLS to etcd (client certificate, CA).
	TLS *tls.Config
	// Username and Password authenticate to etcd when it has auth on.
	Username, Password string
	// SessionTTL is the lease of the election session: a leader whose
	// process dies or who is cut from etcd loses its leadership after
	// it, and another is elected. Whole seconds, at least 1 s; 0: 10 s.
	SessionTTL time.Duration
	// DialTimeout and RequestTimeout bound connecting and each request.
	DialTimeout, RequestTimeout time.Duration
	// Log receives the store's logs; nil discards them.
	Log *slog.Logger
}

// Client is a master's connection to etcd: its elector and, once it
// leads, its fenced store. Close releases it (resigning a leadership).
type Client struct {
	cli     *clientv3.Client
	prefix  string
	ttl     int
	timeout time.Duration
	log     *slog.Logger
}

var (
	_ master.Elector      = (*Client)(nil)
	_ master.SessionTTLer = (*Client)(nil)
	_ master.LeaderEnder  = (*Client)(nil)
)

// Open connects to etcd (checking that it answers within DialTimeout).
func Open(ctx context.Context, cfg Config) (*Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcd store: no endpoints")
	}
	if cfg.Prefix == "" || cfg.Prefix == "/" || !strings.HasPrefix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("etcd store: prefix %q: want an absolute key prefix such as /brim", cfg.Prefix)
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.SessionTTL < time.Second || cfg.SessionTTL%time.Second != 0 {
		return nil, fmt.Errorf("etcd store: session TTL %v: want whole seconds, at least 1s", cfg.SessionTTL)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpointURLs(cfg.Endpoints, cfg.TLS != nil),
		DialTimeout: cfg.DialTimeout,
		TLS:         cfg.TLS,
		Username:    cfg.Username,
		Password:    cfg.Password,
		Logger:      zap.NewNop(),
		// Find a dead endpoint within seconds, not minutes.
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Context:              ctx,
	})
	if err != nil {
		return nil, fmt.Errorf("etcd store %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	c := &Client{cli: cli, prefix: strings.TrimRight(cfg.Prefix, "/"), ttl: int(cfg.SessionTTL / time.Second),
		timeout: cfg.RequestTimeout, log: log.With("component", "etcdstore")}
	pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if _, err := cli.Get(pctx, c.electionPrefix(), clientv3.WithCountOnly()); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("etcd store %s: no answer: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	return c, nil
}

// Close closes the connection to etcd. A leadership still held ends when
// its lease expires (Term.Resign ends it at once).
func (c *Client) Close() error { return c.cli.Close() }

// SessionTTL is the lease of this client's election sessions
// (master.SessionTTLer).
func (c *Client) SessionTTL() time.Duration { return time.Duration(c.ttl) * time.Second }

func (c *Client) electionPrefix() string { return c.prefix + "/election/" }
func (c *Client) registryPrefix() string { return c.prefix + "/registry/" }

// Campaign waits until this master leads, advertising addr (where agents,
// frameworks and operators reach it), or ctx ends. A session that
// expires while waiting (a standby cut from etcd) is replaced. While it
// waits it keeps a copy of the registry for the term's Load (mirror.go).
func (c *Client) Campaign(ctx context.Context, addr string) (master.Term, error) {
	copied := c.startMirror(ctx)
	t, err := c.campaignUntilElected(ctx, addr, copied)
	if err != nil {
		copied.stop()
		return nil, err
	}
	return t, nil
}

func (c *Client) campaignUntilElected(ctx context.Context, addr string, copied *mirror) (*Term, error) {
	for {
		s, err := concurrency.NewSession(c.cli, concurrency.WithTTL(c.ttl), concurrency.WithContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			c.log.Warn("etcd session", "err", err)
			if err := sleep(ctx, time.Second); err != nil {
				return nil, err
			}
			continue
		}
		t, err := c.campaign(ctx, s, addr, copied)
		if err == nil {
			return t, nil
		}
		_ = s.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		c.log.Warn("campaign ended without leadership; campaigning again", "err", err)
		if err := sleep(ctx, time.Second); err != nil {
			return nil, err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// campaign campaigns on s until elected, s expires or ctx ends, and
// checks the leadership it won: its key must still be there.
func (c *Client) campaign(ctx context.Context, s *concurrency.Session, addr string, copied *mirror) (*Term, error) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.Done():
			cancel()
		case <-cctx.Done():
		}
	}()
	e := concurrency.NewElection(s, c.electionPrefix())
	if err := e.Campaign(cctx, addr); err != nil {
		if s.Ctx().Err() != nil || isDone(s.Done()) {
			return nil, fmt.Errorf("session expired while campaigning: %w", err)
		}
		return nil, err
	}
	t := &Term{c: c, s: s, e: e, key: e.Key(), rev: e.Rev(), addr: addr, done: make(chan struct{}), stop: make(chan struct{}), copied: copied}
	rctx, rcancel := context.WithTimeout(ctx, c.timeout)
	defer rcancel()
	resp, err := c.cli.Get(rctx, t.key)
	if err != nil {
		return nil, fmt.Errorf("check leadership: %w", err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != t.rev {
		return nil, fmt.Errorf("check leadership: election key %s is gone: %w", t.key, master.ErrNotLeader)
	}
	c.log.Info("elected leader", "key", t.key, "revision", t.rev, "advertise", addr)
	go t.watch(time.Now()) // owned by t: ends with the term or Resign
	return t, nil
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Observe sends the leader's advertised address ("" while none is
// elected) at once and at every change, until ctx ends; then it closes
// the channel. A broken watch is taken up again.
func (c *Client) Observe(ctx context.Context) <-chan string {
	ch := make(chan string, 1)
	go func() { // owned by ctx: ends with it
		defer close(ch)
		last := "\x00"
		send := func(v string) bool {
			if v == last {
				return true
			}
			select {
			case ch <- v:
				last = v
				return true
			case <-ctx.Done():
				return false
			}
		}
		for ctx.Err() == nil {
			leader, rev, err := c.leader(ctx)
			if err != nil {
				if sleep(ctx, 500*time.Millisecond) != nil {
					return
				}
				continue
			}
			if !send(leader) {
				return
			}
			wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
			w := c.cli.Watch(wctx, c.electionPrefix(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
			for resp := range w {
				if resp.Err() != nil {
					break
				}
				if l, _, err := c.leader(ctx); err == nil {
					if !send(l) {
						cancel()
						return
					}
				}
			}
			cancel()
		}
	}()
	return ch
}

// leader reads the current leader: the election key of the lowest create
// revision, as concurrency.Election does.
func (c *Client) leader(ctx context.Context) (string, int64, error) {
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.cli.Get(rctx, c.electionPrefix(), clientv3.WithFirstCreate()...)
	if err != nil {
		return "", 0, err
	}
	if len(resp.Kvs) == 0 {
		return "", resp.Header.Revision, nil
	}
	return string(resp.Kvs[0].Value), resp.Header.Revision, nil
}

// EndLeader revokes the session lease of the leader advertised at addr
// (master.LeaderEnder): etcd deletes its election key, the next standby
// in line is elected, and the leader, were it running, sees its key
// deleted and steps down (Term.watch) while every write it tries is
// refused by the fence from now on. It reports false when addr does not
// lead (any more) or its lease is already gone.
func (c *Client) EndLeader(ctx context.Context, addr string) (bool, error) {
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.cli.Get(rctx, c.electionPrefix(), clientv3.WithFirstCreate()...)
	if err != nil {
		return false, fmt.Errorf("read the leader: %w", err)
	}
	if len(resp.Kvs) == 0 || string(resp.Kvs[0].Value) != addr {
		return false, nil
	}
	kv := resp.Kvs[0]
	if kv.Lease == 0 { // not written by a session: not ours to end
		return false, fmt.Errorf("election key %s has no lease", kv.Key)
	}
	if _, err := c.cli.Revoke(rctx, clientv3.LeaseID(kv.Lease)); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return false, nil
		}
		return false, fmt.Errorf("revoke the session lease %x of the leader %s: %w", kv.Lease, addr, err)
	}
	return true, nil
}

// Term is one leadership: the store it may write (fenced by its election
// key) and the end of the session it holds it with.
type Term struct {
	c    *Client
	s    *concurrency.Session
	e    *concurrency.Election
	key  string
	rev  int64
	addr string

	done     chan struct{} // closed by watch when the term is over
	stop     chan struct{} // closed by Resign
	stopOnce sync.Once

	agents agentWrites // PutAgent's queue

	copyMu sync.Mutex
	copied *mirror // the standby's copy of the registry, until Load or the term's end
}

// agentWrites queues the agent records that concurrent PutAgent calls
// write: one goroutine, started while the queue is not empty, writes
// them maxTxnOps to a transaction. At 50,000 agents registering at once,
// one transaction each queued 50,000 raft entries behind which the
// leader's lease refreshes waited past the term's limit: both masters of
// the failover benchmark stepped down during the first registration.
type agentWrites struct {
	mu      sync.Mutex
	pending []agentWrite
	writing bool // the writing goroutine runs
}

type agentWrite struct {
	op   clientv3.Op
	done chan error // 1-buffered
}

// maxTxnOps is etcd's default limit of operations in one transaction
// (--max-txn-ops).
const maxTxnOps = 128

// watch closes done when the session ends — or earlier, when this
// master cannot be sure it still leads. The session's own end comes
// when the client's keepalive deadline passes, which lags etcd's
// expiry of the lease (measured: 0.6 s after a standby was elected with
// a 2 s TTL): two leaders for a moment. So watch refreshes the lease
// itself every TTL/4 and ends the term once TTL·3/4 passed since the
// last refresh that succeeded was sent: etcd keeps the lease at least
// TTL after that send, so this master steps down before any other can
// be elected.
//
// It also ends the term the moment etcd deletes the election key (a
// standby revoked the session's lease: EndLeader), not at the next
// refresh.
func (t *Term) watch(lastOK time.Time) {
	defer close(t.done)
	defer t.takeCopy() // not loaded: dropped
	keyGone := make(chan struct{})
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	go t.watchKey(wctx, keyGone) // owned here: ends with wctx
	ttl := time.Duration(t.c.ttl) * time.Second
	every, limit := ttl/4, ttl*3/4
	tick := time.NewTicker(every / 2)
	defer tick.Stop()
	type result struct {
		sent time.Time
		err  error
	}
	results := make(chan result, 1)
	inflight := false
	lastSent := time.Time{}
	for {
		select {
		case <-t.stop:
			return
		case <-t.s.Done():
			t.c.log.Warn("etcd session ended: leadership lost")
			return
		case <-keyGone:
			t.c.log.Warn("the election key was deleted (the session's lease revoked): stepping down", "key", t.key)
			return
		case r := <-results:
			inflight = false
			if errors.Is(r.err, rpctypes.ErrLeaseNotFound) {
				// Revoked (a standby found this master's address
				// refusing connections: EndLeader) or expired.
				t.c.log.Warn("the session's lease is gone: stepping down")
				return
			}
			if r.err == nil && r.sent.After(lastOK) {
				lastOK = r.sent
			}
		case now := <-tick.C:
			if now.Sub(lastOK) > limit {
				t.c.log.Warn("no lease refresh acknowledged in time: stepping down", "since", now.Sub(lastOK).Round(time.Millisecond), "ttl", ttl)
				return
			}
			if !inflight && now.Sub(lastSent) >= every {
				inflight, lastSent = true, now
				go func() { // bounded by its timeout; reports once
					ctx, cancel := context.WithTimeout(t.s.Ctx(), every)
					defer cancel()
					_, err := t.c.cli.KeepAliveOnce(ctx, t.s.Lease())
					results <- result{sent: now, err: err}
				}()
			}
		}
	}
}

// watchKey closes gone when etcd deletes the term's election key; it
// ends with ctx, or quietly when the watch cannot go on (the lease
// refreshes still end the term then).
func (t *Term) watchKey(ctx context.Context, gone chan<- struct{}) {
	for resp := range t.c.cli.Watch(ctx, t.key, clientv3.WithRev(t.rev+1), clientv3.WithFilterPut()) {
		if resp.Err() != nil {
			return
		}
		if len(resp.Events) > 0 { // deletes only (WithFilterPut)
			close(gone)
			return
		}
	}
}

var (
	_ master.Term  = (*Term)(nil)
	_ master.Store = (*Term)(nil)
)

// Store is the registry, every write fenced by this leadership.
func (t *Term) Store() master.Store { return t }

// Done is closed when the leadership is lost (or may be: see watch),
// and after Resign.
func (t *Term) Done() <-chan struct{} { return t.done }

// Resign gives the leadership up at once (a clean stop), ending the
// session.
func (t *Term) Resign(ctx context.Context) error {
	t.stopOnce.Do(func() { close(t.stop) })
	err := t.e.Resign(ctx)
	return errors.Join(err, t.s.Close())
}

// Key and Revision are the election key and its create revision, the
// fence of every write.
func (t *Term) Key() string     { return t.key }
func (t *Term) Revision() int64 { return t.rev }

// fence is the condition of every transaction: the election key is still
// ours.
func (t *Term) fence() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(t.key), "=", t.rev)
}

// txn runs ops if this master still leads; ErrNotLeader if not.
func (t *Term) txn(ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), t.c.timeout)
	defer cancel()
	resp, err := t.c.cli.Txn(ctx).If(t.fence()).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("etcd store: %w", err)
	}
	if !resp.Succeeded {
		return nil, fmt.Errorf("etcd store: write refused, election key %s@%d is gone: %w", t.key, t.rev, master.ErrNotLeader)
	}
	return resp, nil
}

// Key families under PREFIX/registry/.
const (
	famAgents       = "agents/"
	famFrameworks   = "frameworks/"
	famReservations = "reservations/"
	famQuota        = "quota/"
	famWeights      = "weights/"
	famDemands      = "demands/"
)

func (t *Term) key2(family, id string) string { return t.c.registryPrefix() + family + id }

// put writes (v nil: deletes) one record.
func (t *Term) put(family, id string, v any) error {
	if id == "" {
		return fmt.Errorf("etcd store: empty %skey: %w", family, master.ErrInvalid)
	}
	if v == nil {
		_, err := t.txn(clientv3.OpDelete(t.key2(family, id)))
		return err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = t.txn(clientv3.OpPut(t.key2(family, id), string(data)))
	return err
}

// PutAgent records an agent ID, its hostname and principal. Concurrent
// calls share transactions (agentWrites). Safe for concurrent use.
func (t *Term) PutAgent(id string, a master.PersistedAgent) error {
	if id == "" {
		return fmt.Errorf("etcd store: empty %skey: %w", famAgents, master.ErrInvalid)
	}
	data, err := json.Marshal(a)
	if err != nil {
		return err
	}
	w := agentWrite{op: clientv3.OpPut(t.key2(famAgents, id), string(data)), done: make(chan error, 1)}
	q := &t.agents
	q.mu.Lock()
	q.pending = append(q.pending, w)
	start := !q.writing
	q.writing = true
	q.mu.Unlock()
	if start {
		go t.writeAgents() // ends when the queue is empty; each caller waits for its write
	}
	return <-w.done
}

// writeAgents writes the queued agent records, maxTxnOps at a time,
// until the queue is empty.
func (t *Term) writeAgents() {
	q := &t.agents
	for {
		q.mu.Lock()
		n := min(len(q.pending), maxTxnOps)
		if n == 0 {
			q.writing = false
			q.mu.Unlock()
			return
		}
		batch := q.pending[:n:n]
		q.pending = q.pending[n:]
		if len(q.pending) == 0 {
			q.pending = nil // let the backing array go
		}
		q.mu.Unlock()
		ops := make([]clientv3.Op, len(batch))
		for i, w := range batch {
			ops[i] = w.op
		}
		_, err := t.txn(ops...)
		for _, w := range batch {
			w.done <- err
		}
	}
}

// PutFramework records a framework ID, its roles and principal.
func (t *Term) PutFramework(id string, f master.PersistedFramework) error {
	return t.put(famFrameworks, id, f)
}

// DeleteFramework forgets a framework.
func (t *Term) DeleteFramework(id string) error { return t.put(famFrameworks, id, nil) }

// PutReservations replaces an agent's dynamic reservations.
func (t *Term) PutReservations(agentID string, res resources.Resources) error {
	if res.IsEmpty() {
		return t.put(famReservations, agentID, nil)
	}
	return t.put(famReservations, agentID, res.String())
}

type quotaRec struct {
	Guarantee string `json:"guarantee,omitempty"`
	Limit     string `json:"limit,omitempty"`
}

// PutQuota records (or with an empty Quota removes) a role's quota.
func (t *Term) PutQuota(role string, q allocator.Quota) error {
	if q.Guarantee.IsEmpty() && q.Limit.IsEmpty() {
		return t.put(famQuota, role, nil)
	}
	return t.put(famQuota, role, quotaRec{Guarantee: q.Guarantee.String(), Limit: q.Limit.String()})
}

// PutDemand records a time-aware demand (docs/demands.md) as JSON.
func (t *Term) PutDemand(d *demand.Demand) error { return t.put(famDemands, d.ID, d) }

// PutWeights records roles' weights in one transaction (all or none; at
// most MaxWeightsPerWrite).
func (t *Term) PutWeights(weights map[string]float64) error {
	if len(weights) > MaxWeightsPerWrite {
		return fmt.Errorf("etcd store: %d weights in one write, at most %d: %w", len(weights), MaxWeightsPerWrite, master.ErrInvalid)
	}
	ops := make([]clientv3.Op, 0, len(weights))
	for role, w := range weights {
		if role == "" {
			return fmt.Errorf("etcd store: empty role: %w", master.ErrInvalid)
		}
		data, err := json.Marshal(w)
		if err != nil {
			return err
		}
		ops = append(ops, clientv3.OpPut(t.key2(famWeights, role), string(data)))
	}
	if len(ops) == 0 {
		return nil
	}
	_, err := t.txn(ops...)
	return err
}

// takeCopy stops the standby's copy of the registry (if not taken
// already) and drops it.
func (t *Term) takeCopy() {
	if m := t.takeMirror(); m != nil {
		m.stop()
	}
}

// takeMirror takes the standby's copy of the registry from the term; nil
// if taken already.
func (t *Term) takeMirror() *mirror {
	t.copyMu.Lock()
	defer t.copyMu.Unlock()
	m := t.copied
	t.copied = nil
	return m
}

// Load reads the registry in the same transaction as the fence: what a
// leader loads is what it leads with. The first Load of a term starts
// from the copy the master kept while a standby (mirror.go); any other
// reads the whole registry.
func (t *Term) Load() (*master.Persisted, error) {
	if m := t.takeMirror(); m != nil {
		start := time.Now()
		p, c, err := t.loadFrom(m)
		if err == nil {
			t.c.log.Info("registry loaded from the standby's copy", "records", len(c.kvs), "revision", c.rev,
				"took", time.Since(start).Round(time.Millisecond))
			return p, nil
		}
		if !errors.Is(err, errCopyOutOfDate) {
			return nil, err
		}
		t.c.log.Info("standby's copy of the registry out of date: reading it whole", "err", err)
	}
	resp, err := t.txn(clientv3.OpGet(t.c.registryPrefix(), clientv3.WithPrefix()))
	if err != nil {
		return nil, fmt.Errorf("load master registry: %w", err)
	}
	p := newPersisted()
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().Kvs {
			k := strings.TrimPrefix(string(kv.Key), t.c.registryPrefix())
			if err := decode(p, k, kv.Value); err != nil {
				return nil, fmt.Errorf("load master registry: key %s: %w", kv.Key, err)
			}
		}
	}
	return p, nil
}

func newPersisted() *master.Persisted {
	return &master.Persisted{Agents: map[string]master.PersistedAgent{}, Frameworks: map[string]master.PersistedFramework{},
		Reservations: map[string]resources.Resources{}, Quota: map[string]allocator.Quota{}, Weights: map[string]float64{}}
}

// decode reads one registry record into p; an unknown family is an error
// (a newer master's keys, which this one would drop silently otherwise).
func decode(p *master.Persisted, k string, v []byte) error {
	family, id, ok := strings.Cut(k, "/")
	if !ok || id == "" {
		return errors.New("not a registry key")
	}
	switch family + "/" {
	case famAgents:
		var a master.PersistedAgent
		if err := json.Unmarshal(v, &a); err != nil {
			return err
		}
		p.Agents[id] = a
	case famFrameworks:
		var f master.PersistedFramework
		if err := json.Unmarshal(v, &f); err != nil {
			return err
		}
		p.Frameworks[id] = f
	case famReservations:
		var text string
		if err := json.Unmarshal(v, &text); err != nil {
			return err
		}
		r, err := resources.Parse(text)
		if err != nil {
			return err
		}
		p.Reservations[id] = r
	case famQuota:
		var q quotaRec
		if err := json.Unmarshal(v, &q); err != nil {
			return err
		}
		g, err := resources.Parse(q.Guarantee)
		if err != nil {
			return err
		}
		l, err := resources.Parse(q.Limit)
		if err != nil {
			return err
		}
		p.Quota[id] = allocator.Quota{Guarantee: g, Limit: l}
	case famWeights:
		var w float64
		if err := json.Unmarshal(v, &w); err != nil {
			return err
		}
		p.Weights[id] = w
	case famDemands:
		d := &demand.Demand{}
		if err := json.Unmarshal(v, d); err != nil {
			return err
		}
		p.Demands = append(p.Demands, d)
	default:
		return fmt.Errorf("unknown record family %q", family)
	}
	return nil
}
