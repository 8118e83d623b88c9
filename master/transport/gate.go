package transport

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/brimnode/brim/internal/buildinfo"
	"github.com/brimnode/brim/internal/masteraddr"
	"github.com/brimnode/brim/master"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
)

// Gate is what a highly available master serves: the API of its term's
// Master while it leads, else the standby's answers naming the leader —
// over HTTP (ServeHTTP) and gRPC (RegisterGRPC). Its assembly
// (master/server) tells it who leads (SetLeader), and when this master
// leads (Lead) and stops leading (Depose). Safe for concurrent use.
type Gate struct {
	self, scheme string

	mu      sync.RWMutex
	api     *API // the leading master's; nil while a standby
	h       http.Handler
	leader  string        // the elected leader's address; never self while standby
	changed chan struct{} // closed and replaced to wake the held streams

	deadHold time.Duration // see await
	probe    leaderProbe   // see await
	suspects chan string   // leaders whose address refused the probe; nil: none ended (EndDeadLeaders)
}

// GateOptions configure a Gate.
type GateOptions struct {
	// Self is this master's advertised address, Scheme the operator API's
	// ("http", or "https" under TLS) for the redirects to the leader.
	Self, Scheme string
	// DeadHold is how long a standby keeps naming no leader to a client
	// that could not reach the leader it names (await): the session TTL
	// and a half.
	DeadHold time.Duration
	// EndDeadLeaders makes the standby probe a leader a client could not
	// reach and, when its address refuses connections, end its session
	// (EndDeadLeaders must then run).
	EndDeadLeaders bool
}

// NewGate returns a standby's gate: no leader known yet.
func NewGate(o GateOptions) *Gate {
	g := &Gate{self: o.Self, scheme: o.Scheme, changed: make(chan struct{}), deadHold: o.DeadHold}
	if o.EndDeadLeaders {
		g.suspects = make(chan string, 1)
	}
	return g
}

// RegisterGRPC registers the gated AgentLink, Scheduler and Masters
// services: the leading master's, or masteraddr.NotLeader.
func (g *Gate) RegisterGRPC(s *grpc.Server) {
	pb.RegisterAgentLinkServer(s, gatedAgentLink{g: g})
	pb.RegisterSchedulerServer(s, gatedScheduler{g: g})
	pb.RegisterMastersServer(s, gatedMasters{g: g})
}

// Alive takes and releases the gate's lock: every request passes it, so
// a watchdog that calls Alive stops when the gate wedges.
func (g *Gate) Alive() {
	g.mu.Lock()
	g.mu.Unlock() //nolint:staticcheck // an empty critical section: the call proves the lock is free
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

// changeLocked wakes the streams held while no leader was known.
func (g *Gate) changeLocked() {
	if g.changed != nil {
		close(g.changed)
	}
	g.changed = make(chan struct{})
}

// SetLeader records the leader etcd names. The held streams are woken
// only when there is another master to name: held, they wait for one or
// for this master's election (Lead), and a change to no leader or to
// this master would only send them back to wait — 50,000 held streams
// woken took half a second of CPU, at the moment this master's own
// election (the expiry of a dead leader's key names it) had to load the
// registry.
func (g *Gate) SetLeader(addr string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	before := g.otherLocked()
	g.leader = addr
	if other := g.otherLocked(); other != "" && other != before {
		g.changeLocked()
	}
}

// Lead serves a: this master leads.
func (g *Gate) Lead(a *API) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.api, g.h = a, a.Handler()
	g.changeLocked()
}

// Depose stops serving the leader's API: this master no longer leads.
func (g *Gate) Depose() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.api, g.h = nil, nil
	g.changeLocked()
}

// Leading is the master this gate serves, nil while a standby.
func (g *Gate) Leading() *master.Master {
	a, _ := g.current()
	if a == nil {
		return nil
	}
	return a.m
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
func (g *Gate) await(ctx context.Context) (*API, error) {
	limit := time.NewTimer(MaxStandbyHold)
	defer limit.Stop()
	dead := masteraddr.UnreachableFrom(ctx)
	var alive <-chan time.Time // runs while dead is the leader named
	for {
		g.mu.RLock()
		a, leader, changed := g.api, g.otherLocked(), g.changed
		g.mu.RUnlock()
		if a != nil {
			return a, nil
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
// address refused the probe is suspected dead (EndDeadLeaders).
func (g *Gate) unreachable(ctx context.Context, leader string) bool {
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

// EndDeadLeaders ends the session of a leader whose process is gone, so
// that the next master leads at once instead of a session TTL after the
// dead one's last lease refresh. A client that could not reach the
// leader said so (await); the standby's own probe found the address
// refusing connections — the host is up and nothing listens on the port
// (a killed or crashed master: the kernel answers for it) — and so did
// deadLeaderChecks more, spread over deadLeaderCheckGap each. Then, if
// etcd still names that leader, its session ends (LeaderEnder). A leader
// that cannot be reached at all (its host down, a partition: no
// answer, not a refusal) is left to its TTL, as is every leader when
// server.Config.WaitOutDeadLeader is set. Should a leader that runs ever be
// refused (a firewall rejecting the standbys with a reset), it loses
// its lease, steps down at its next refresh (etcdstore), and its fenced
// store has refused its writes from the revoke on: the cost is a
// failover, not two leaders writing.
func (g *Gate) EndDeadLeaders(ctx context.Context, e master.LeaderEnder, log *slog.Logger) {
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
func (g *Gate) otherLocked() string {
	if g.leader == g.self {
		return ""
	}
	return g.leader
}

// current is the leading master's API, or the standby's gRPC answer.
func (g *Gate) current() (*API, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.api == nil {
		return nil, masteraddr.NotLeader(g.otherLocked())
	}
	return g.api, nil
}

// ServeHTTP serves the leader's API, or as a standby: /health and
// /metrics 503 naming the leader, /version, and a 307 to the leader for
// anything else (503 while none is elected).
func (g *Gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
// another master to name or its own election (SetLeader, Lead): a
// watcher learns of a new leader, not of the moment none is known.
func (g *Gate) watchLeader(ctx context.Context, known string, hold bool) *pb.LeaderInfo {
	limit := time.NewTimer(masteraddr.WatchHold)
	defer limit.Stop()
	for {
		g.mu.RLock()
		info := &pb.LeaderInfo{Leader: g.otherLocked()}
		if g.api != nil {
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
	g *Gate
}

func (s gatedMasters) WatchLeader(ctx context.Context, req *pb.WatchLeaderRequest) (*pb.LeaderInfo, error) {
	return s.g.watchLeader(ctx, req.GetKnown(), req.GetHold()), nil
}

// gatedAgentLink and gatedScheduler serve the gRPC services of the
// leading Master, or answer masteraddr.NotLeader.
type gatedAgentLink struct {
	pb.UnimplementedAgentLinkServer
	g *Gate
}

func (s gatedAgentLink) Connect(stream pb.AgentLink_ConnectServer) error {
	a, err := s.g.await(stream.Context())
	if err != nil {
		return err
	}
	return agentLink{a: a}.Connect(stream)
}

func (s gatedAgentLink) ExecSession(stream pb.AgentLink_ExecSessionServer) error {
	a, err := s.g.current()
	if err != nil {
		return err
	}
	return agentLink{a: a}.ExecSession(stream)
}

type gatedScheduler struct {
	pb.UnimplementedSchedulerServer
	g *Gate
}

func (s gatedScheduler) api() (schedulerAPI, error) {
	a, err := s.g.current()
	return schedulerAPI{a: a}, err
}

func (s gatedScheduler) Subscribe(req *pb.SubscribeRequest, stream pb.Scheduler_SubscribeServer) error {
	a, err := s.g.await(stream.Context())
	if err != nil {
		return err
	}
	return schedulerAPI{a: a}.Subscribe(req, stream)
}

func (s gatedScheduler) ExecTask(stream pb.Scheduler_ExecTaskServer) error {
	a, err := s.api()
	if err != nil {
		return err
	}
	return a.ExecTask(stream)
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

func (s gatedScheduler) SubmitDemand(ctx context.Context, req *pb.SubmitDemandRequest) (*pb.Empty, error) {
	return unary(s, ctx, req, schedulerAPI.SubmitDemand)
}

func (s gatedScheduler) CancelDemand(ctx context.Context, req *pb.CancelDemandRequest) (*pb.Empty, error) {
	return unary(s, ctx, req, schedulerAPI.CancelDemand)
}
