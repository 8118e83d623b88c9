package master

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/brimnode/brim/internal/buildinfo"
	"github.com/brimnode/brim/internal/masteraddr"
	"github.com/brimnode/brim/internal/sdnotify"
	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
)

// Elector elects one leader among the masters of a cluster (etcdstore's
// Client on etcd). Campaign blocks until this master leads, advertising
// addr, or ctx ends; Observe sends the leader's address ("" while none is
// elected) at once and at every change until ctx ends, then closes.
type Elector interface {
	Campaign(ctx context.Context, addr string) (Term, error)
	Observe(ctx context.Context) <-chan string
}

// LeaderEnder is an optional ability of an Elector: EndLeader ends the
// session of the leader advertised at addr at once — its key goes, the
// next standby is elected, and the leader, if it still runs, finds its
// lease gone and steps down — and reports false, doing nothing, when
// addr no longer leads. A standby calls it for a leader whose process
// is gone (see endDeadLeaders).
type LeaderEnder interface {
	EndLeader(ctx context.Context, addr string) (bool, error)
}

// Term is one leadership. Its Store writes only while it lasts (a fenced
// store: a deposed leader's writes fail with ErrNotLeader); Done is
// closed the moment it is lost (the session's lease expired); Resign
// gives it up at once.
type Term interface {
	Store() Store
	Done() <-chan struct{}
	Resign(ctx context.Context) error
}

// ErrLostLeadership ends a highly available master whose leadership
// ended under it (its etcd session expired: a partition, a long pause).
// It wraps ErrNotLeader. The process exits non-zero and its supervisor
// starts it again, as a standby (Mesos's masters do the same).
var ErrLostLeadership = fmt.Errorf("lost the leadership: the etcd session ended: %w", ErrNotLeader)

// startHA is Start for a master with an Elector: it serves at once as a
// standby — /health answers 503 naming the leader, the operator API
// redirects there (307), gRPC calls get masteraddr.NotLeader — and
// campaigns. Once elected it loads the registry through the term's
// fenced store into a new Master and serves it; when the term ends it
// stops serving at once and Wait returns ErrLostLeadership.
func startHA(ctx context.Context, cfg Config, log *slog.Logger) (_ *Running, err error) {
	if cfg.StateDir != "" {
		return nil, errors.New("a state dir (bbolt store) and an etcd store exclude each other")
	}
	var auth Authorizer
	var reloadable *ReloadableAuth
	if cfg.Credentials != "" {
		a, err := NewReloadableAuth(cfg.Credentials, cfg.ACLs)
		if err != nil {
			return nil, err
		}
		auth, reloadable = a, a
	}
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	advertise, err := advertiseAddr(cfg.Advertise, l.Addr())
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	scheme := "http"
	if cfg.TLS != nil {
		l = tls.NewListener(l, cfg.TLS)
		scheme = "https"
	}
	gt := &gate{self: advertise, scheme: scheme, changed: make(chan struct{}), deadHold: deadLeaderHold(cfg.Elector)}
	gs := grpc.NewServer(masterlink.ServerOptions()...)
	pb.RegisterAgentLinkServer(gs, gatedAgentLink{g: gt})
	pb.RegisterSchedulerServer(gs, gatedScheduler{g: gt})
	pb.RegisterMastersServer(gs, gatedMasters{g: gt})
	srv := &Server{GRPC: gs, HTTP: gt}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Serve(gctx, l) })
	g.Go(func() error {
		for leader := range cfg.Elector.Observe(gctx) {
			gt.setLeader(leader)
		}
		return nil
	})
	if e, ok := cfg.Elector.(LeaderEnder); ok && !cfg.WaitOutDeadLeader {
		gt.suspects = make(chan string, 1)
		g.Go(func() error { gt.endDeadLeaders(gctx, e, log); return nil })
	}
	n := sdnotify.New(log)
	if cfg.Reload != nil {
		g.Go(func() error { reloadOn(gctx, cfg.Reload, reloadable, cfg, log, n); return nil })
	}
	iv, err := sdnotify.WatchdogInterval()
	if err != nil {
		log.Warn("systemd watchdog off", "err", err)
	} else if iv > 0 {
		// A standby's main loop is its gate (every request passes it); a
		// leader's are also its allocation cycles (lead).
		g.Go(func() error { n.RunWatchdog(gctx, iv); return nil })
		g.Go(func() error { gt.watchdog(gctx, n, iv); return nil })
	}
	g.Go(func() error { return lead(gctx, cfg, auth, advertise, gt, n, iv, log) })
	if err := n.Ready("standby on " + l.Addr().String()); err != nil {
		log.Warn("notify systemd", "err", err)
	}
	log.Info("master serving as a standby; campaigning", "listen", l.Addr().String(), "advertise", advertise, "tls", cfg.TLS != nil)
	return &Running{Addr: l.Addr(), g: g, gate: gt, Advertise: advertise}, nil
}

// lead campaigns, then runs a Master for the term it won until the term
// or ctx ends. With a watchdog interval (iv > 0) the term's allocation
// cycles feed systemd's watchdog too.
func lead(ctx context.Context, cfg Config, auth Authorizer, advertise string, gt *gate, n *sdnotify.Notifier, iv time.Duration, log *slog.Logger) error {
	t, err := cfg.Elector.Campaign(ctx, advertise)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("campaign for the leadership: %w", err)
	}
	elected := time.Now()
	resign := func() {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := t.Resign(rctx); err != nil {
			log.Warn("resign the leadership", "err", err)
		}
	}
	opts := cfg.Options
	opts.Store = t.Store()
	if h, ok := t.(Tenure); ok {
		opts.Tenure = h
	}
	m, err := New(opts)
	if err != nil {
		resign()
		return fmt.Errorf("lead: %w", err)
	}
	h := m.HTTPHandler(auth)
	m.SetReady(true)
	tctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(tctx) }() // owned here: waited for below
	watched := make(chan struct{})
	go func() { // owned here: waited for below
		defer close(watched)
		if iv > 0 {
			m.watchdog(tctx, n, iv)
		}
	}()
	m.mu.Lock()
	awaited := len(m.awaited) // Run and registrations change it
	m.mu.Unlock()
	gt.lead(m, h)
	log.Info("elected leader: serving", "advertise", advertise, "load_took", time.Since(elected).Round(time.Millisecond),
		"agents_awaited", awaited)
	if err := n.Ready("leader on " + advertise); err != nil {
		log.Warn("notify systemd", "err", err)
	}
	stop := func() {
		gt.depose()
		cancel()
		if err := <-done; err != nil {
			log.Warn("master loop", "err", err)
		}
		<-watched
	}
	select {
	case <-t.Done():
		stop()
		log.Error("lost the leadership: stopped serving", "err", ErrLostLeadership)
		return ErrLostLeadership
	case <-ctx.Done():
		stop()
		resign()
		return nil
	case err := <-done:
		gt.depose()
		cancel()
		<-watched
		resign()
		return err
	}
}

// advertiseAddr is where other masters send clients to reach this one:
// the given address, or the listener's when it names a host.
func advertiseAddr(advertise string, l net.Addr) (string, error) {
	if advertise != "" {
		if _, port, err := net.SplitHostPort(advertise); err != nil || port == "" {
			return "", fmt.Errorf("--advertise %q: want HOST:PORT", advertise)
		}
		return advertise, nil
	}
	ta, ok := l.(*net.TCPAddr)
	if !ok || ta.IP.IsUnspecified() {
		return "", fmt.Errorf("--listen %s names no host that others can reach: give --advertise HOST:PORT", l)
	}
	return ta.String(), nil
}

// Leading is the master this process leads with, nil while it is a
// standby (or always for a master without an Elector: see Master).
func (r *Running) Leading() *Master {
	if r.gate == nil {
		return r.Master
	}
	m, _ := r.gate.current()
	return m
}

// gate is what a highly available master serves: the Master of its term
// while it leads, else the standby's answers naming the leader.
type gate struct {
	self, scheme string

	mu      sync.RWMutex
	m       *Master
	h       http.Handler
	leader  string        // the elected leader's address; never self while standby
	changed chan struct{} // closed and replaced to wake the held streams

	deadHold time.Duration // see await
	probe    leaderProbe   // see await
	suspects chan string   // leaders whose address refused the probe; nil: none ended (endDeadLeaders)
}

// leaderProbeTimeout bounds a standby's probe of the leader a client
// says it could not reach (probeOnce); leaderProbeFresh is how long its
// answer holds.
const (
	leaderProbeTimeout = 500 * time.Millisecond
	leaderProbeFresh   = time.Second
)

// leaderProbe tells whether the leader's address answers (probeOnce):
// one attempt at a time, its answer kept leaderProbeFresh for the
// thousands of streams a failover brings.
type leaderProbe struct {
	mu       sync.Mutex
	addr     string
	at       time.Time
	ok       bool
	refused  bool          // the attempt was refused: nothing listens there
	inflight chan struct{} // closed when the attempt under way ends; nil none
}

// reachable reports whether addr answered within leaderProbeTimeout,
// lately (ok), or refused the connection (refused: no process listens
// there); neither also when ctx ends first.
func (p *leaderProbe) reachable(ctx context.Context, addr string) (ok, refused bool) {
	for {
		p.mu.Lock()
		if p.addr == addr && p.inflight == nil && time.Since(p.at) < leaderProbeFresh {
			ok, refused := p.ok, p.refused
			p.mu.Unlock()
			return ok, refused
		}
		if wait := p.inflight; wait != nil {
			p.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return false, false
			}
		}
		done := make(chan struct{})
		p.inflight = done
		p.mu.Unlock()
		err := probeOnce(addr)
		p.mu.Lock()
		p.addr, p.at, p.ok, p.refused, p.inflight = addr, time.Now(), err == nil, errors.Is(err, syscall.ECONNREFUSED), nil
		ok, refused := p.ok, p.refused
		p.mu.Unlock()
		close(done)
		return ok, refused
	}
}

// errNoAnswer: a probed master accepted the connection but said nothing.
var errNoAnswer = errors.New("the connection was accepted but the master does not answer")

// probeOnce connects to addr and asks for its /health, within
// leaderProbeTimeout: nil once the master answers anything — a response,
// or a TLS master closing the connection on a request in clear text. A
// connection accepted is not enough: the kernel completes the
// handshakes of a stopped (SIGSTOP) or wedged process, whose clients the
// standby then sent back to it, to wait on a link that never answers.
func probeOnce(addr string) error {
	c, err := net.DialTimeout("tcp", addr, leaderProbeTimeout)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	if err := c.SetDeadline(time.Now().Add(leaderProbeTimeout)); err != nil {
		return err
	}
	if _, err := io.WriteString(c, "GET /health HTTP/1.0\r\n\r\n"); err != nil {
		return nil // reset: the process answered (and is going)
	}
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return errNoAnswer
		}
	}
	return nil
}

// SessionTTLer is an optional ability of an Elector: the lease of its
// election sessions, after which a dead leader's key is gone.
type SessionTTLer interface {
	SessionTTL() time.Duration
}

// defaultDeadHold is the gate's dead-leader hold for an Elector that
// does not tell its session TTL: etcdstore's default TTL and a half.
const defaultDeadHold = 15 * time.Second

// deadLeaderHold is how long a standby keeps naming no leader to a
// client that could not reach the leader it names: the session TTL and
// a half (etcd expires a lease up to about half a second late).
func deadLeaderHold(e Elector) time.Duration {
	if t, ok := e.(SessionTTLer); ok && t.SessionTTL() > 0 {
		return t.SessionTTL() * 3 / 2
	}
	return defaultDeadHold
}

// watchdog beats the "gate" loop while the gate's lock can be taken (a
// wedged gate stops every request), so that systemd's watchdog pings
// stop when it wedges.
func (g *gate) watchdog(ctx context.Context, n *sdnotify.Notifier, interval time.Duration) {
	loop := n.Loop("gate", 2*interval)
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		g.mu.Lock()
		g.mu.Unlock() //nolint:staticcheck // an empty critical section: the beat proves the lock is free
		loop.Beat()
	}
}

// changeLocked wakes the streams held while no leader was known.
func (g *gate) changeLocked() {
	if g.changed != nil {
		close(g.changed)
	}
	g.changed = make(chan struct{})
}

// setLeader records the leader etcd names. The held streams are woken
// only when there is another master to name: held, they wait for one or
// for this master's election (lead), and a change to no leader or to
// this master would only send them back to wait — 50,000 held streams
// woken took half a second of CPU, at the moment this master's own
// election (the expiry of a dead leader's key names it) had to load the
// registry.
func (g *gate) setLeader(addr string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	before := g.otherLocked()
	g.leader = addr
	if other := g.otherLocked(); other != "" && other != before {
		g.changeLocked()
	}
}

func (g *gate) lead(m *Master, h http.Handler) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.m, g.h = m, h
	g.changeLocked()
}

func (g *gate) depose() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.m, g.h = nil, nil
	g.changeLocked()
}

// MaxStandbyHold bounds how long a standby holds an agent's or a
// framework's stream while no leader is known.
const MaxStandbyHold = 30 * time.Second

// await is current for the streams of agents and frameworks: while no
// leader is known (an election under way) a standby holds the stream —
// up to MaxStandbyHold or until the client gives up — and answers the
// moment it learns the leader, or serves it if it is elected itself. A
// failover's followers then come at once, rather than when their
// backoff, grown while nobody led, runs out.
//
// A client that could not reach the leader this standby names says so
// (masteraddr.WithUnreachable): etcd keeps a dead leader's key until its
// lease expires, and sending the client back to it would only make it
// bounce between the dead leader and the standbys until then. Unless the
// standby reaches that leader itself (it answers within
// leaderProbeTimeout, probeOnce: the client's link broke, not the leader
// — it is named at once), such a stream is held like one with no leader
// known —
// but only for deadHold
// (the session TTL and a half): a leader still named then refreshes its
// lease, so it is alive (a master restarted at the same address is
// elected again within milliseconds), and the client is sent to it.
// Held without that bound, an agent waited out its 30 s registration
// timeout at a standby while the leader it had failed to reach a moment
// before was back.
func (g *gate) await(ctx context.Context) (*Master, error) {
	limit := time.NewTimer(MaxStandbyHold)
	defer limit.Stop()
	dead := masteraddr.UnreachableFrom(ctx)
	var alive <-chan time.Time // runs while dead is the leader named
	for {
		g.mu.RLock()
		m, leader, changed := g.m, g.otherLocked(), g.changed
		g.mu.RUnlock()
		if m != nil {
			return m, nil
		}
		if leader != "" && leader == dead && g.unreachable(ctx, leader) {
			if alive == nil {
				t := time.NewTimer(g.deadHold)
				defer t.Stop()
				alive = t.C
			}
			leader = ""
		}
		if leader != "" || changed == nil {
			return nil, masteraddr.NotLeader(leader)
		}
		select {
		case <-changed:
		case <-alive:
			dead, alive = "", nil // named all along: not dead
		case <-ctx.Done():
			return nil, masteraddr.NotLeader("")
		case <-limit.C:
			return nil, masteraddr.NotLeader("")
		}
	}
}

// unreachable probes the leader a client could not reach; one whose
// address refused the probe is suspected dead (endDeadLeaders).
func (g *gate) unreachable(ctx context.Context, leader string) bool {
	ok, refused := g.probe.reachable(ctx, leader)
	if refused && g.suspects != nil {
		select {
		case g.suspects <- leader:
		default: // one is being checked: it comes again with the next stream
		}
	}
	return !ok
}

// Checks of a suspected dead leader before a standby ends its session:
// every one of deadLeaderChecks connection attempts, deadLeaderCheckGap
// apart, must be refused.
const (
	deadLeaderChecks   = 3
	deadLeaderCheckGap = 150 * time.Millisecond
)

// endDeadLeaders ends the session of a leader whose process is gone, so
// that the next master leads at once instead of a session TTL after the
// dead one's last lease refresh. A client that could not reach the
// leader said so (await); the standby's own probe found the address
// refusing connections — the host is up and nothing listens on the port
// (a killed or crashed master: the kernel answers for it) — and so did
// deadLeaderChecks more, spread over deadLeaderCheckGap each. Then, if
// etcd still names that leader, its session ends (LeaderEnder). A leader
// that cannot be reached at all (its host down, a partition: no
// answer, not a refusal) is left to its TTL, as is every leader when
// Config.WaitOutDeadLeader is set. Should a leader that runs ever be
// refused (a firewall rejecting the standbys with a reset), it loses
// its lease, steps down at its next refresh (etcdstore), and its fenced
// store has refused its writes from the revoke on: the cost is a
// failover, not two leaders writing.
func (g *gate) endDeadLeaders(ctx context.Context, e LeaderEnder, log *slog.Logger) {
	for {
		var addr string
		select {
		case <-ctx.Done():
			return
		case addr = <-g.suspects:
		}
		if !refusedEvery(ctx, addr) {
			continue
		}
		// Named no more (changed while checking, or ended already: its
		// key is gone): nothing to end. EndLeader checks again in etcd.
		g.mu.RLock()
		named := g.otherLocked()
		g.mu.RUnlock()
		if named != addr {
			continue
		}
		ectx, cancel := context.WithTimeout(ctx, leaderEndTimeout)
		done, err := e.EndLeader(ectx, addr)
		cancel()
		if err != nil && ctx.Err() == nil {
			log.Warn("end the session of a dead leader", "leader", addr, "err", err)
		}
		if !done {
			continue
		}
		log.Warn("the leader's address refuses connections: ended its session rather than wait out its TTL", "leader", addr,
			"checks", deadLeaderChecks+1)
	}
}

// leaderEndTimeout bounds one EndLeader call.
const leaderEndTimeout = 5 * time.Second

// refusedEvery reports whether each of deadLeaderChecks connection
// attempts to addr, deadLeaderCheckGap apart, was refused.
func refusedEvery(ctx context.Context, addr string) bool {
	for range deadLeaderChecks {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(deadLeaderCheckGap):
		}
		if err := probeOnce(addr); !errors.Is(err, syscall.ECONNREFUSED) {
			return false
		}
	}
	return true
}

// other is the leader to name while not serving: never this master (its
// own expired key may linger in etcd for a moment).
func (g *gate) otherLocked() string {
	if g.leader == g.self {
		return ""
	}
	return g.leader
}

// current is the leading Master, or the standby's gRPC answer.
func (g *gate) current() (*Master, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.m == nil {
		return nil, masteraddr.NotLeader(g.otherLocked())
	}
	return g.m, nil
}

// ServeHTTP serves the leader's API, or as a standby: /health and
// /metrics 503 naming the leader, /version, and a 307 to the leader for
// anything else (503 while none is elected).
func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.RLock()
	h, leader := g.h, g.otherLocked()
	g.mu.RUnlock()
	if h != nil {
		h.ServeHTTP(w, r)
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/health":
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "standby", "leader": leader})
	case r.Method == http.MethodGet && r.URL.Path == "/version":
		writeJSON(w, http.StatusOK, buildinfo.Get())
	case r.URL.Path == "/metrics":
		// A scraper wants this master's figures, not the leader's: a
		// standby has none.
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "standby", "leader": leader})
	case leader == "":
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "this master is a standby and no leader is elected yet; try again", "leader": ""})
	default:
		w.Header().Set("Location", g.scheme+"://"+leader+r.URL.RequestURI())
		writeJSON(w, http.StatusTemporaryRedirect, map[string]string{"error": "this master is a standby; the leader is at " + leader, "leader": leader})
	}
}

// watchLeader answers who leads (this master, self, while it serves):
// at once unless hold, else once the leader differs from known, after
// masteraddr.WatchHold, or when ctx ends. A standby names no other master
// than etcd's leader (otherLocked), and wakes its held calls only for
// another master to name or its own election (setLeader, lead): a
// watcher learns of a new leader, not of the moment none is known.
func (g *gate) watchLeader(ctx context.Context, known string, hold bool) *pb.LeaderInfo {
	limit := time.NewTimer(masteraddr.WatchHold)
	defer limit.Stop()
	for {
		g.mu.RLock()
		info := &pb.LeaderInfo{Leader: g.otherLocked()}
		if g.m != nil {
			info = &pb.LeaderInfo{Leader: g.self, Self: true}
		}
		changed := g.changed
		g.mu.RUnlock()
		if !hold || info.Leader != known {
			return info
		}
		select {
		case <-changed:
		case <-limit.C:
			return info
		case <-ctx.Done():
			return info
		}
	}
}

// gatedMasters serves the Masters service: who leads, from this
// master's view.
type gatedMasters struct {
	pb.UnimplementedMastersServer
	g *gate
}

func (s gatedMasters) WatchLeader(ctx context.Context, req *pb.WatchLeaderRequest) (*pb.LeaderInfo, error) {
	return s.g.watchLeader(ctx, req.GetKnown(), req.GetHold()), nil
}

// gatedAgentLink and gatedScheduler serve the gRPC services of the
// leading Master, or answer masteraddr.NotLeader.
type gatedAgentLink struct {
	pb.UnimplementedAgentLinkServer
	g *gate
}

func (s gatedAgentLink) Connect(stream pb.AgentLink_ConnectServer) error {
	m, err := s.g.await(stream.Context())
	if err != nil {
		return err
	}
	return agentLink{m: m}.Connect(stream)
}

type gatedScheduler struct {
	pb.UnimplementedSchedulerServer
	g *gate
}

func (s gatedScheduler) api() (schedulerAPI, error) {
	m, err := s.g.current()
	return schedulerAPI{m: m}, err
}

func (s gatedScheduler) Subscribe(req *pb.SubscribeRequest, stream pb.Scheduler_SubscribeServer) error {
	m, err := s.g.await(stream.Context())
	if err != nil {
		return err
	}
	return schedulerAPI{m: m}.Subscribe(req, stream)
}

// unary serves one unary call on the leading Master.
func unary[Req any](s gatedScheduler, ctx context.Context, req Req, fn func(schedulerAPI, context.Context, Req) (*pb.Empty, error)) (*pb.Empty, error) {
	a, err := s.api()
	if err != nil {
		return nil, err
	}
	return fn(a, ctx, req)
}

func (s gatedScheduler) Accept(ctx context.Context, req *pb.AcceptRequest) (*pb.Empty, error) {
	return unary(s, ctx, req, schedulerAPI.Accept)
}

func (s gatedScheduler) Decline(ctx context.Context, req *pb.DeclineRequest) (*pb.Empty, error) {
	return unary(s, ctx, req, schedulerAPI.Decline)
}

func (s gatedScheduler) Revive(ctx context.Context, req *pb.ReviveRequest) (*pb.Empty, error) {
	return unary(s, ctx, req, schedulerAPI.Revive)
}

func (s gatedScheduler) Suppress(ctx context.Context, req *pb.SuppressRequest) (*pb.Empty, error) {
	return unary(s, ctx, req, schedulerAPI.Suppress)
}

func (s gatedScheduler) Kill(ctx context.Context, req *pb.KillRequest) (*pb.Empty, error) {
	return unary(s, ctx, req, schedulerAPI.Kill)
}

func (s gatedScheduler) Acknowledge(ctx context.Context, req *pb.AcknowledgeRequest) (*pb.Empty, error) {
	return unary(s, ctx, req, schedulerAPI.Acknowledge)
}

func (s gatedScheduler) Reconcile(ctx context.Context, req *pb.ReconcileRequest) (*pb.Empty, error) {
	return unary(s, ctx, req, schedulerAPI.Reconcile)
}

func (s gatedScheduler) UpdateTask(ctx context.Context, req *pb.UpdateTaskRequest) (*pb.Empty, error) {
	return unary(s, ctx, req, schedulerAPI.UpdateTask)
}
