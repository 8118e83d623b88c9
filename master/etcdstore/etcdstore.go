package etcdstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/brimnode/brim/demand"
	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/master/discovery"
	"github.com/brimnode/brim/master/record"
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
	// Endpoints are etcd's client addresses, HOST:PORT (discovery.ParseURL).
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

	dialTimeout time.Duration
	endpoints   []string

	// bg counts what outlives a campaign attempt: a campaign abandoned
	// with its session (concurrency's Campaign resigns it with the
	// client's own context, which only etcd's answer or Close ends) and
	// the revocation of an ended session's lease. Close waits for them.
	bg sync.WaitGroup
}

var (
	_ master.Elector      = (*Client)(nil)
	_ master.SessionTTLer = (*Client)(nil)
	_ master.LeaderEnder  = (*Client)(nil)
)

// Open connects to etcd (checking that it answers within DialTimeout).
func Open(ctx context.Context, cfg Config) (*Client, error) {
	c, err := dial(ctx, cfg)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, c.dialTimeout)
	defer cancel()
	if _, err := c.cli.Get(pctx, c.electionPrefix(), clientv3.WithCountOnly()); err != nil {
		_ = c.cli.Close()
		return nil, fmt.Errorf("etcd store %s: no answer: %w", strings.Join(c.endpoints, ","), err)
	}
	return c, nil
}

// dial makes a Client of cfg without asking etcd anything.
func dial(ctx context.Context, cfg Config) (*Client, error) {
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
		Endpoints:   discovery.EndpointURLs(cfg.Endpoints, cfg.TLS != nil),
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
	return &Client{cli: cli, prefix: strings.TrimRight(cfg.Prefix, "/"), ttl: int(cfg.SessionTTL / time.Second),
		timeout: cfg.RequestTimeout, dialTimeout: cfg.DialTimeout, endpoints: cfg.Endpoints,
		log: log.With("component", "etcdstore")}, nil
}

// Close closes the connection to etcd. A leadership still held ends when
// its lease expires (Term.Resign ends it at once).
func (c *Client) Close() error {
	err := c.cli.Close()
	c.bg.Wait() // their calls fail now that the client is closed
	return err
}

// SessionTTL is the lease of this client's election sessions
// (master.SessionTTLer).
func (c *Client) SessionTTL() time.Duration { return time.Duration(c.ttl) * time.Second }

func (c *Client) electionPrefix() string { return discovery.ElectionPrefix(c.prefix) }
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

// Bounds of a standby's retries of its etcd session: each attempt to
// grant the session's lease gets the TTL's quarter (at least
// minSessionAttempt, at most the request timeout), and failed attempts
// are spaced from minSessionRetry doubling to the TTL's quarter, at most
// maxSessionRetry. A standby whose session ended while etcd had no
// quorum is ready to campaign within about a second of its return: a
// grant sent while etcd had no leader waited for etcd's own request
// timeout (7 s with its default election timeout), then one more
// second, so the next leader could come ≈ 8 s after the quorum.
const (
	minSessionAttempt = 500 * time.Millisecond
	minSessionRetry   = 100 * time.Millisecond
	maxSessionRetry   = time.Second
)

// sessionAttempt bounds one grant of a session's lease.
func (c *Client) sessionAttempt() time.Duration {
	return min(max(c.SessionTTL()/4, minSessionAttempt), c.timeout)
}

// sessionRetry is the longest pause between two failed campaign
// attempts.
func (c *Client) sessionRetry() time.Duration {
	return max(min(c.SessionTTL()/4, maxSessionRetry), minSessionRetry)
}

func (c *Client) campaignUntilElected(ctx context.Context, addr string, copied *mirror) (*Term, error) {
	wait := minSessionRetry
	retry := func(what string, err error) error {
		c.log.Warn(what, "err", err, "retry_in", wait)
		if err := sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, c.sessionRetry())
		return nil
	}
	for {
		s, err := c.newSession(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err := retry("etcd session", err); err != nil {
				return nil, err
			}
			continue
		}
		t, err := c.campaign(ctx, s, addr, copied)
		if err == nil {
			return t, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err := retry("campaign ended without leadership; campaigning again", err); err != nil {
			return nil, err
		}
	}
}

// session is an etcd session and when its lease's keepalive was last
// answered. The etcd client ends a session whose keepalive has gone
// unanswered for its TTL, even if etcd kept the lease (a new raft leader
// extends every lease): a standby campaigning through an outage of
// about the TTL could win just after the quorum came back and lose its
// session a moment later (TestQuorumLossNextLeader, 1 run in 3).
type session struct {
	*concurrency.Session
	answered atomic.Int64 // unix nanoseconds
}

// unanswered is how long the session's keepalive has gone unanswered.
func (s *session) unanswered() time.Duration {
	return time.Since(time.Unix(0, s.answered.Load()))
}

// newSession grants a lease of the session TTL within sessionAttempt and
// keeps it alive until ctx ends (or the session is closed).
func (c *Client) newSession(ctx context.Context) (*session, error) {
	gctx, cancel := context.WithTimeout(ctx, c.sessionAttempt())
	defer cancel()
	g, err := c.cli.Grant(gctx, int64(c.ttl))
	if err != nil {
		return nil, fmt.Errorf("grant the session's lease: %w", err)
	}
	ss := &session{}
	ss.answered.Store(time.Now().UnixNano())
	s, err := concurrency.NewSession(c.cli, concurrency.WithLease(g.ID), concurrency.WithTTL(c.ttl), concurrency.WithContext(ctx))
	if err != nil {
		c.closeSession(s)
		return nil, err
	}
	ss.Session = s
	// A second listener of the lease's keepalive (the client sends one
	// keepalive per lease and answers every listener): it ends when the
	// session does.
	if kch, err := c.cli.KeepAlive(s.Ctx(), g.ID); err == nil {
		go func() {
			for range kch {
				ss.answered.Store(time.Now().UnixNano())
			}
		}()
	}
	return ss, nil
}

// closeSession ends s in the background: its lease is revoked (its
// campaign key goes with it) once etcd answers, within the TTL.
func (c *Client) closeSession(s *concurrency.Session) {
	if s == nil {
		return
	}
	c.bg.Add(1)
	go func() { defer c.bg.Done(); _ = s.Close() }() // owned by c: bounded by the TTL (Session.Close)
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
// checks the leadership it won: its key must still be there. While it
// waits it ends the keys that still advertise addr from an earlier
// session of this master (endStaleKeys).
//
// An attempt that ends without leadership gives s up at once: its
// campaign, which concurrency.Election resigns with the client's own
// context (it waits for etcd, however long it has no quorum), and the
// revocation of its lease go on in the background (c.bg). Waiting for
// them kept a standby from campaigning again until etcd's quorum was
// back.
func (c *Client) campaign(ctx context.Context, ss *session, addr string, copied *mirror) (*Term, error) {
	s := ss.Session
	cctx, cancel := context.WithCancel(ctx)
	e := concurrency.NewElection(s, c.electionPrefix())
	won := make(chan error, 1)
	c.bg.Add(1)
	go func() { // owned by c (Close waits); reports once
		defer c.bg.Done()
		won <- e.Campaign(cctx, addr)
	}()
	stale := make(chan struct{})
	go func() { defer close(stale); c.endStaleKeys(cctx, addr, s.Lease()) }() // owned here: ends with cctx
	giveUp := func(err error) (*Term, error) {
		cancel()
		<-stale
		c.bg.Add(1)
		go func() { // owned by c: ends when the campaign does
			defer c.bg.Done()
			if <-won == nil { // elected after all, too late: leave
				rctx, rcancel := context.WithTimeout(context.Background(), c.timeout)
				_ = e.Resign(rctx)
				rcancel()
			}
			_ = s.Close()
		}()
		return nil, err
	}
	select {
	case err := <-won:
		if err != nil {
			won <- err // for giveUp's goroutine
			if isDone(s.Done()) {
				err = fmt.Errorf("session expired while campaigning: %w", err)
			}
			return giveUp(err)
		}
		if age := ss.unanswered(); age > c.SessionTTL()/2 {
			won <- nil // giveUp's goroutine resigns
			return giveUp(fmt.Errorf("elected on a session whose keepalive went unanswered for %v (etcd's client may end it any moment): campaigning again on a new one",
				age.Round(time.Millisecond)))
		}
	case <-s.Done():
		return giveUp(errors.New("session expired while campaigning"))
	case <-ctx.Done():
		return giveUp(ctx.Err())
	}
	cancel()
	<-stale
	t := &Term{c: c, s: s, e: e, key: e.Key(), rev: e.Rev(), addr: addr, done: make(chan struct{}), stop: make(chan struct{}), copied: copied}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	rctx, rcancel := context.WithTimeout(ctx, c.timeout)
	defer rcancel()
	resp, err := c.cli.Get(rctx, t.key)
	if err != nil {
		t.cancel()
		return giveUpTerm(c, t, fmt.Errorf("check leadership: %w", err))
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != t.rev {
		t.cancel()
		return giveUpTerm(c, t, fmt.Errorf("check leadership: election key %s is gone: %w", t.key, master.ErrNotLeader))
	}
	c.log.Info("elected leader", "key", t.key, "revision", t.rev, "advertise", addr)
	elected := time.Now()
	t.lastOK.Store(&elected)
	go t.watch(elected) // owned by t: ends with the term or Resign
	return t, nil
}

// giveUpTerm ends a leadership won but not confirmed: resigned and its
// session closed in the background.
func giveUpTerm(c *Client, t *Term, err error) (*Term, error) {
	c.bg.Add(1)
	go func() { // owned by c: bounded by the request timeout and the TTL
		defer c.bg.Done()
		rctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		_ = t.e.Resign(rctx)
		cancel()
		_ = t.s.Close()
	}()
	return nil, err
}

// endStaleKeys ends, until ctx ends, the election keys that advertise
// addr under a lease other than this session's (lease): an earlier
// session of this master — a campaign it gave up, or its previous
// process, which lost its leadership (etcd without quorum, a cut) and
// was started again by its supervisor. Nothing keeps such a key alive,
// yet etcd keeps it until its lease runs out — renewed whole when etcd
// elects a leader of its own, so a TTL after etcd's quorum came back —
// and while it is first in line nobody can be elected: the next leader
// came a TTL and more after the quorum's return. Only this master may
// advertise addr, so a key of addr that is not its own is stale. Checked
// at once and every TTL/4.
func (c *Client) endStaleKeys(ctx context.Context, addr string, lease clientv3.LeaseID) {
	every := max(c.SessionTTL()/4, minSessionRetry)
	for {
		rctx, cancel := context.WithTimeout(ctx, c.sessionAttempt())
		resp, err := c.cli.Get(rctx, c.electionPrefix(), clientv3.WithPrefix())
		if err == nil {
			for _, kv := range resp.Kvs {
				if string(kv.Value) != addr || clientv3.LeaseID(kv.Lease) == lease || kv.Lease == 0 {
					continue
				}
				if _, err := c.cli.Revoke(rctx, clientv3.LeaseID(kv.Lease)); err == nil {
					c.log.Warn("an election key of this master's address from an earlier session: ended it", "key", string(kv.Key),
						"lease", fmt.Sprintf("%x", kv.Lease))
				} else if !errors.Is(err, rpctypes.ErrLeaseNotFound) && ctx.Err() == nil {
					c.log.Info("end an earlier session's election key", "key", string(kv.Key), "err", err)
				}
			}
		}
		cancel()
		if sleep(ctx, every) != nil {
			return
		}
	}
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
// the channel. It watches the election's keys and reads the leader
// again after every change, and every observeResync whatever happens:
// a read that failed after a change (etcd just back from a lost quorum)
// left a standby naming no leader while one had led for seconds, until
// the next change — none might come. A broken watch is taken up again.
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
			c.watchLeader(ctx, rev, send)
		}
	}()
	return ch
}

// observeResync is how often Observe reads the leader even when its
// watch reports nothing.
const observeResync = 2 * time.Second

// watchLeader watches the election's keys from rev on and sends the
// leader after every change and every observeResync, until the watch
// breaks, a read fails or ctx ends (send reports false).
func (c *Client) watchLeader(ctx context.Context, rev int64, send func(string) bool) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	w := c.cli.Watch(wctx, c.electionPrefix(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	resync := time.NewTicker(observeResync)
	defer resync.Stop()
	for {
		select {
		case resp, ok := <-w:
			if !ok || resp.Err() != nil {
				return
			}
		case <-resync.C:
		case <-ctx.Done():
			return
		}
		l, _, err := c.leader(ctx)
		if err != nil {
			return // read again from the start
		}
		if !send(l) {
			return
		}
	}
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

	// lastOK is when the last lease refresh that etcd acknowledged was
	// sent (watch); Held measures from it.
	lastOK   atomic.Pointer[time.Time]
	done     chan struct{} // closed by watch when the term is over
	stop     chan struct{} // closed by Resign
	stopOnce sync.Once
	// ctx ends with the term (watch, Resign): every store call in flight
	// ends with it, refused (txn), so that a write waiting on an etcd that
	// no longer answers never outlasts the term it was made in.
	ctx    context.Context
	cancel context.CancelFunc

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
	defer t.cancel()   // before done: what the term's end wakes finds its calls ended
	defer t.takeCopy() // not loaded: dropped
	keyGone := make(chan struct{})
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	go t.watchKey(wctx, keyGone) // owned here: ends with wctx
	ttl := time.Duration(t.c.ttl) * time.Second
	limit := t.limit()
	refresh := refreshes{every: ttl / 4}
	tick := time.NewTicker(refresh.every / 4)
	defer tick.Stop()
	// expire fires limit after lastOK, to the moment: checked on the
	// ticks only, the term outlived it by up to a tick, taken from the
	// margin before etcd expires the lease.
	expire := time.NewTimer(time.Until(lastOK.Add(limit)))
	defer expire.Stop()
	type result struct {
		sent time.Time
		err  error
	}
	results := make(chan result, maxRefreshes) // the senders in flight never block
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
			refresh.inflight--
			if r.err != nil {
				t.c.log.Debug("lease refresh failed", "sent", time.Since(r.sent).Round(time.Millisecond), "err", r.err)
			}
			if errors.Is(r.err, rpctypes.ErrLeaseNotFound) {
				// Revoked (a standby found this master's address
				// refusing connections: EndLeader) or expired.
				t.c.log.Warn("the session's lease is gone: stepping down")
				return
			}
			if r.err == nil && r.sent.After(lastOK) {
				lastOK = r.sent
				t.lastOK.Store(&r.sent)
				expire.Reset(time.Until(lastOK.Add(limit)))
			}
		case <-expire.C:
			t.c.log.Warn("no lease refresh acknowledged in time: stepping down", "since", time.Since(lastOK).Round(time.Millisecond), "ttl", ttl)
			return
		case now := <-tick.C:
			if refresh.due(now, lastOK) {
				refresh.inflight++
				refresh.lastSent = now
				go func() { // bounded by its timeout; reports once
					ctx, cancel := context.WithTimeout(t.s.Ctx(), refresh.every)
					defer cancel()
					_, err := t.c.cli.KeepAliveOnce(ctx, t.s.Lease())
					results <- result{sent: now, err: err}
				}()
			}
		}
	}
}

// maxRefreshes bounds the lease refreshes in flight (refreshes).
const maxRefreshes = 3

// refreshes paces a term's lease refreshes: one every `every` (TTL/4)
// while they are acknowledged in time; once one is overdue (a quarter of
// `every` late), one on every tick (every/4) with up to maxRefreshes in
// flight, each through the next member (the client's round robin). A
// refresh sent to a member whose raft leader just died waits until the
// members elect another (0.5–1.5 s), and one sent to a member that died
// until its timeout; a single refresh in flight at a time, every second,
// let one member's death use up most of the TTL·3/4 a term may go
// without an acknowledgement: the leader stepped down (chaos
// etcd-member-kill). Now the first refresh sent after etcd can answer
// again is acknowledged, and the term measures from its send.
type refreshes struct {
	every    time.Duration
	inflight int
	lastSent time.Time
}

// due reports whether a refresh is to be sent at now, the last
// acknowledged one having been sent at lastOK.
func (r *refreshes) due(now, lastOK time.Time) bool {
	switch {
	case r.inflight >= maxRefreshes:
		return false
	case now.Sub(r.lastSent) >= r.every:
		return true
	default:
		return now.Sub(lastOK) > r.every+r.every/4
	}
}

// limit is how long after the send of its last acknowledged lease
// refresh the term ends (watch): TTL·3/4.
func (t *Term) limit() time.Duration { return time.Duration(t.c.ttl) * time.Second * 3 / 4 }

// Held reports whether the leadership holds by the term's own clock
// (master.Tenure): false once the term is over, and from the moment
// the limit passed since the last acknowledged lease refresh was sent —
// a leader thawed after a SIGSTOP longer than that finds it false at
// once, before watch's timer ends the term, and acts on nothing it
// decided while frozen. Safe for concurrent use.
func (t *Term) Held() bool {
	if isDone(t.done) {
		return false
	}
	last := t.lastOK.Load()
	return last != nil && time.Since(*last) < t.limit()
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
	_ master.Term   = (*Term)(nil)
	_ master.Store  = (*Term)(nil)
	_ master.Tenure = (*Term)(nil)
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
	t.cancel()
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

// txn runs ops if this master still leads; ErrNotLeader if not — also
// when the term ends while the call waits for etcd (then the write may
// or may not have been made: etcd may apply it before the lease that
// fences it expires, never after).
//
// Each attempt gets sessionAttempt (the TTL's quarter), and one that
// fails for want of a member (Unavailable: its connection broke, it has
// no raft leader) or runs out of its time is made again, through the
// next member, until the request timeout: a write sent as its member
// died failed at once (the client retries no mutation once sent), and
// one forwarded to a raft leader that died waited out the whole request
// timeout (5 s; the proposal is lost with the leader) while the master
// waited behind it and blamed its agents for the silence (issue 30,
// chaos etcd-member-kill). Every write here puts whole records under the
// fence, so making it twice writes the same thing.
func (t *Term) txn(ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	ctx, cancel := context.WithTimeout(t.ctx, t.c.timeout)
	defer cancel()
	var resp *clientv3.TxnResponse
	err := t.c.retry(ctx, func(ctx context.Context) error {
		var err error
		resp, err = t.c.cli.Txn(ctx).If(t.fence()).Then(ops...).Commit()
		return err
	})
	if err != nil {
		if t.ctx.Err() != nil {
			return nil, fmt.Errorf("etcd store: the term ended while the write waited for etcd: %w", master.ErrNotLeader)
		}
		return nil, fmt.Errorf("etcd store: %w", err)
	}
	if !resp.Succeeded {
		return nil, fmt.Errorf("etcd store: write refused, election key %s@%d is gone: %w", t.key, t.rev, master.ErrNotLeader)
	}
	return resp, nil
}

// Pauses between the attempts of retry: from minAttemptGap doubling to
// maxAttemptGap.
const (
	minAttemptGap = 20 * time.Millisecond
	maxAttemptGap = 200 * time.Millisecond
)

// retry calls do with attempts of sessionAttempt each until one
// succeeds, fails otherwise than for want of a member (retryable), or
// ctx ends; it returns the last attempt's error.
func (c *Client) retry(ctx context.Context, do func(context.Context) error) error {
	gap := minAttemptGap
	for {
		actx, cancel := context.WithTimeout(ctx, c.sessionAttempt())
		err := do(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !retryable(err) {
			return err
		}
		c.log.Debug("etcd request: trying again", "err", err, "in", gap)
		if sleep(ctx, gap) != nil {
			return err
		}
		gap = min(2*gap, maxAttemptGap)
	}
}

// retryable reports whether err is an attempt that found no member able
// to answer in time: Unavailable (a broken connection, no raft leader,
// a request etcd timed out) or the attempt's own deadline.
func retryable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ee rpctypes.EtcdError // etcd's own errors: no gRPC status
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// Record families (master/record) under PREFIX/registry/.
const (
	famAgents       = record.Agents + "/"
	famFrameworks   = record.Frameworks + "/"
	famReservations = record.Reservations + "/"
	famQuota        = record.Quota + "/"
	famWeights      = record.Weights + "/"
	famDemands      = record.Demands + "/"
)

func (t *Term) key2(family, id string) string { return t.c.registryPrefix() + family + id }

// put writes (ok false: deletes) one record.
func (t *Term) put(family, id string, v []byte, ok bool) error {
	if id == "" {
		return fmt.Errorf("etcd store: empty %skey: %w", family, master.ErrInvalid)
	}
	if !ok {
		_, err := t.txn(clientv3.OpDelete(t.key2(family, id)))
		return err
	}
	_, err := t.txn(clientv3.OpPut(t.key2(family, id), string(v)))
	return err
}

// PutAgent records an agent ID, its hostname and principal. Concurrent
// calls share transactions (agentWrites). Safe for concurrent use.
func (t *Term) PutAgent(id string, a master.PersistedAgent) error {
	if id == "" {
		return fmt.Errorf("etcd store: empty %skey: %w", famAgents, master.ErrInvalid)
	}
	data, err := record.EncodeAgent(a)
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
	v, err := record.EncodeFramework(f)
	if err != nil {
		return err
	}
	return t.put(famFrameworks, id, v, true)
}

// DeleteFramework forgets a framework.
func (t *Term) DeleteFramework(id string) error { return t.put(famFrameworks, id, nil, false) }

// PutReservations replaces an agent's dynamic reservations.
func (t *Term) PutReservations(agentID string, res resources.Resources) error {
	v, ok, err := record.EncodeReservations(res)
	if err != nil {
		return err
	}
	return t.put(famReservations, agentID, v, ok)
}

// PutQuota records (or with an empty Quota removes) a role's quota.
func (t *Term) PutQuota(role string, q allocator.Quota) error {
	v, ok, err := record.EncodeQuota(q)
	if err != nil {
		return err
	}
	return t.put(famQuota, role, v, ok)
}

// PutDemand records a time-aware demand (docs/demands.md).
func (t *Term) PutDemand(d *demand.Demand) error {
	v, err := record.EncodeDemand(d)
	if err != nil {
		return err
	}
	return t.put(famDemands, d.ID, v, true)
}

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
		data, err := record.EncodeWeight(w)
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
	p := record.NewPersisted()
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

// decode reads one registry record (k is FAMILY/ID under the registry
// prefix) into p; an unknown family is an error (a newer master's keys,
// which this one would drop silently otherwise).
func decode(p *master.Persisted, k string, v []byte) error {
	family, id, ok := strings.Cut(k, "/")
	if !ok || id == "" {
		return errors.New("not a registry key")
	}
	return record.Decode(p, family, id, v)
}
