package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	_ "net/http/pprof" // BRIM_FAILOVER_PPROF
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/brimnode/brim/internal/masteraddr"
	"github.com/brimnode/brim/master"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/scheduler"
)

// BenchmarkFailover: N simulated agents (the agent side of masterlink:
// register, heartbeats, no tasks; many per gRPC connection, as
// masterbench does) and one framework follow two masters on a 3-member
// in-process etcd. The leader is killed (its etcd path cut and its port
// closed, as after kill -9), and the benchmark reports, from the kill:
// the new leader (s-to-leader), its first offer to the framework
// (s-to-offer), all agents re-registered with it (s-to-reregistered),
// and the storm's CPU (cpu-s of this process, masters, etcd and agents
// together, during the re-registration). Baseline in the same run: the
// first registration of the same agents with the first leader
// (s-registration); reregistered/registration is their ratio.
//
//	go test -run '^$' -bench '^BenchmarkFailover$' -benchtime 1x ./master/etcdstore/
//
// BRIM_FAILOVER_AGENTS="1000 10000 50000" chooses the points (default
// 1000 and 10000); BRIM_FAILOVER_PPROF=127.0.0.1:6060 serves pprof;
// BRIM_FAILOVER_RAMP=5000 starts the agents at 5,000 a second for their
// first registration (default: all at once; the failover's storm is
// never ramped).
func BenchmarkFailover(b *testing.B) {
	points := []int{1000, 10000}
	if v := os.Getenv("BRIM_FAILOVER_AGENTS"); v != "" {
		points = nil
		for _, f := range strings.Fields(v) {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				b.Fatalf("BRIM_FAILOVER_AGENTS: %q is not a positive number", f)
			}
			points = append(points, n)
		}
	}
	if addr := os.Getenv("BRIM_FAILOVER_PPROF"); addr != "" {
		// Profiles of the storm while it runs: /debug/pprof/ on addr.
		go func() { _ = http.ListenAndServe(addr, nil) }()
	}
	for _, n := range points {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) {
			for range b.N {
				failoverOnce(b, n)
			}
		})
	}
}

const (
	benchTTL       = 3 * time.Second
	benchHeartbeat = 5 * time.Second
	benchPerConn   = 500
)

func failoverOnce(b *testing.B, n int) {
	var killed atomic.Bool
	c := startEtcdWith(b, 3, 100, 1000) // etcd's defaults: no leader churn under the storm
	// The masters' warnings (a lost term above all) and their elections
	// go to stderr, timed: the failover's timeline.
	opts := master.Options{HeartbeatInterval: benchHeartbeat, MaxMissedHeartbeats: 5,
		Log: slog.New(leaderLog{slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})})}
	first := startHAMasterWith(b, c, benchTTL, "127.0.0.1:0", opts)
	for first.r.Leading() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	standby := startHAMasterWith(b, c, benchTTL, "127.0.0.1:0", opts)
	list := []string{first.addr(), standby.addr()}
	over := make(chan struct{})
	var reporters sync.WaitGroup
	defer reporters.Wait()
	defer close(over)
	for _, h := range []*haMaster{first, standby} {
		reporters.Add(1)
		go func() { // reports a master that stops on its own (lost leadership)
			defer reporters.Done()
			select {
			case <-h.stopped:
				if !killed.Load() { // now, not with the benchmark's log at its end
					fmt.Fprintf(os.Stderr, "%s master %s stopped before the kill: %v\n", time.Now().Format(time.TimeOnly), h.addr(), h.err)
				}
			case <-over:
			}
		}()
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	pool := newConnPool(b, list, n)
	defer pool.close()
	registrations := make(chan time.Time, 4*n)
	start := time.Now()
	ramp := 0 // agents started a second for the first registration; 0: all at once
	if v := os.Getenv("BRIM_FAILOVER_RAMP"); v != "" {
		var err error
		if ramp, err = strconv.Atoi(v); err != nil || ramp < 0 {
			b.Fatalf("BRIM_FAILOVER_RAMP: %q is not a number of agents a second", v)
		}
	}
	var agents []*benchAgent
	for i := range n {
		if ramp > 0 && i > 0 && i%1000 == 0 {
			time.Sleep(time.Second * 1000 / time.Duration(ramp))
		}
		a := &benchAgent{id: fmt.Sprintf("sim-%06d", i), idx: i, masters: masteraddr.NewSet(list)}
		agents = append(agents, a)
		wg.Add(1)
		go func() { defer wg.Done(); a.run(ctx, pool, registrations) }()
	}
	waitRegistrations(b, registrations, n, 5*time.Minute, agents, 1)
	registration := time.Since(start)

	var offerAt atomic.Int64
	var killedAt atomic.Int64
	d, err := scheduler.New(scheduler.Options{Master: strings.Join(list, ","), Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = d.Close() }()
	subscribed := make(chan struct{}, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = d.Run(ctx, scheduler.Callbacks{
			Subscribed: func(context.Context, string) {
				select {
				case subscribed <- struct{}{}:
				default:
				}
			},
			Offers: func(ctx context.Context, offers []*pb.Offer) {
				// The first offer of the new leader (the old one may
				// still send one as it dies).
				if killedAt.Load() != 0 && standby.r.Leading() != nil {
					offerAt.CompareAndSwap(0, time.Now().UnixNano())
				}
				ids := make([]string, 0, len(offers))
				for _, o := range offers {
					ids = append(ids, o.Id)
				}
				_ = d.Decline(ctx, ids, 1)
			},
		})
	}()
	select {
	case <-subscribed:
	case <-time.After(2 * time.Minute):
		b.Fatalf("the framework did not subscribe within 2 minutes of %d agents registering", n)
	}

	term0 := c.members[0].Server.Term()
	cpu0 := cpuTime()
	kill := time.Now()
	fmt.Fprintf(os.Stderr, "%s killing the leader %s\n", kill.Format(time.TimeOnly+".000"), first.addr())
	killed.Store(true)
	killedAt.Store(kill.UnixNano())
	first.etcd.Cut()
	first.cancel() // its port closes: every stream breaks, as after kill -9
	var toLeader time.Duration
	for standby.r.Leading() == nil {
		if time.Since(kill) > 10*benchTTL {
			b.Fatalf("no new leader within %v", 10*benchTTL)
		}
		time.Sleep(5 * time.Millisecond)
	}
	toLeader = time.Since(kill)
	again := waitRegistrations(b, registrations, n, 5*time.Minute, agents, 2)
	toAll := time.Since(kill)
	q := func(f float64) float64 {
		return again[min(len(again)-1, int(f*float64(len(again))))].Sub(kill).Seconds()
	}
	b.Logf("re-registrations after the kill: first %.2fs, 10%% %.2fs, 50%% %.2fs, 90%% %.2fs, last %.2fs", q(0), q(0.1), q(0.5), q(0.9), q(1))
	cpu := cpuTime() - cpu0
	for offerAt.Load() == 0 && time.Since(kill) < toAll+30*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	toOffer := time.Duration(offerAt.Load() - kill.UnixNano())
	if offerAt.Load() == 0 {
		toOffer = -1
	}
	if term := c.members[0].Server.Term(); term != term0 {
		b.Logf("etcd changed its leader during the failover (raft term %d → %d): that renews every lease, the dead master's too", term0, term)
	}
	b.ReportMetric(toLeader.Seconds(), "s-to-leader")
	b.ReportMetric(toOffer.Seconds(), "s-to-offer")
	b.ReportMetric(toAll.Seconds(), "s-to-reregistered")
	b.ReportMetric(registration.Seconds(), "s-registration")
	b.ReportMetric(toAll.Seconds()/registration.Seconds(), "reregistered/registration")
	b.ReportMetric(cpu.Seconds(), "cpu-s")
	b.Logf("agents=%d TTL=%v: new leader %.2fs after the kill (goal <= TTL+1s: %v), first offer %.2fs, all re-registered %.2fs "+
		"(first registration %.2fs: %.2fx), CPU %.1fs over the re-registration (%.0f%% of one core)",
		n, benchTTL, toLeader.Seconds(), toLeader <= benchTTL+time.Second, toOffer.Seconds(), toAll.Seconds(),
		registration.Seconds(), toAll.Seconds()/registration.Seconds(), cpu.Seconds(), 100*cpu.Seconds()/toAll.Seconds())
}

// waitRegistrations waits for n registrations and returns their times.
// waitRegistrations waits for n registrations; if they do not come
// within the time, it fails naming how the sessions of the agents
// registered fewer than want times last ended.
func waitRegistrations(b *testing.B, ch <-chan time.Time, n int, within time.Duration, agents []*benchAgent, want int32) []time.Time {
	b.Helper()
	deadline := time.After(within)
	var at []time.Time
	for i := range n {
		select {
		case t := <-ch:
			at = append(at, t)
		case <-deadline:
			b.Fatalf("only %d of %d agents registered within %v; %s", i, n, within, missing(agents, want))
		}
	}
	return at
}

// missing sums up how the sessions of the agents registered fewer than
// want times last ended, by master and error.
func missing(agents []*benchAgent, want int32) string {
	count := map[sessionEnded]int{}
	for _, a := range agents {
		if a.regs.Load() >= want {
			continue
		}
		e := sessionEnded{err: "no session ended yet (waiting in its first)"}
		if l := a.last.Load(); l != nil {
			e = *l
		}
		count[e]++
	}
	var out []string
	for e, k := range count {
		out = append(out, fmt.Sprintf("%d last ended at %q with %s", k, e.master, e.err))
	}
	return "agents missing: " + strings.Join(out, "; ")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// connPool shares gRPC connections among simulated agents: agent i uses
// connection i/benchPerConn to a given master. The masters' connections
// are made up front (gRPC connects lazily) and read without a lock: with
// Go 1.26 the waiters on one mutex form a chain that every stack shrink
// of a waiter walks (runtime.adjustsudogs), and 50,000 agents waiting on
// the pool's mutex made each garbage collection quadratic — 90 % of the
// CPU, until both masters lost their etcd sessions.
type connPool struct {
	fixed map[string][]*grpc.ClientConn // read-only after newConnPool
	mu    sync.Mutex
	conns map[string]map[int]*grpc.ClientConn // other targets
}

func newConnPool(b *testing.B, targets []string, n int) *connPool {
	p := &connPool{fixed: map[string][]*grpc.ClientConn{}, conns: map[string]map[int]*grpc.ClientConn{}}
	for _, t := range targets {
		for range (n + benchPerConn - 1) / benchPerConn {
			cc, err := grpc.NewClient(t, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			p.fixed[t] = append(p.fixed[t], cc)
		}
	}
	return p
}

func (p *connPool) api(target string, idx int) (pb.AgentLinkClient, error) {
	if ccs := p.fixed[target]; idx/benchPerConn < len(ccs) {
		return pb.NewAgentLinkClient(ccs[idx/benchPerConn]), nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.conns[target]
	if m == nil {
		m = map[int]*grpc.ClientConn{}
		p.conns[target] = m
	}
	cc := m[idx/benchPerConn]
	if cc == nil {
		var err error
		cc, err = grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		m[idx/benchPerConn] = cc
	}
	return pb.NewAgentLinkClient(cc), nil
}

func (p *connPool) close() {
	for _, ccs := range p.fixed {
		for _, cc := range ccs {
			_ = cc.Close()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.conns {
		for _, cc := range m {
			_ = cc.Close()
		}
	}
}

// benchAgent is a simulated agent that follows the leader as
// masterlink.Client does: a standby's NOT_LEADER sends it to the leader
// named after a short delay, anything else to the next listed master
// with a jittered backoff (0.5 s doubling to 5 s, 20 % down at random).
type benchAgent struct {
	id      string
	idx     int
	masters *masteraddr.Set
	regs    atomic.Int32                 // registrations so far
	last    atomic.Pointer[sessionEnded] // how the last session ended
}

// sessionEnded is how a simulated agent's session ended: the master it
// talked to and the error.
type sessionEnded struct{ master, err string }

// benchRegisterTimeout bounds the wait for Registered, as the agent's
// own (masterlink's 30 s): a simulated agent without it waited forever
// on a stream the master never answered.
const benchRegisterTimeout = 30 * time.Second

func (a *benchAgent) run(ctx context.Context, pool *connPool, registered chan<- time.Time) {
	const minWait, maxWait = 500 * time.Millisecond, 5 * time.Second
	attempt := 0
	for ctx.Err() == nil {
		target := a.masters.Current()
		ok, err := a.session(masteraddr.WithUnreachable(ctx, a.masters.Unreachable()), pool, registered)
		if ctx.Err() != nil {
			return
		}
		a.last.Store(&sessionEnded{master: target, err: fmt.Sprint(err)})
		if ok {
			attempt = 0
			a.masters.Reached()
		}
		wait := min(minWait<<min(attempt, 8), maxWait)
		if leader, isStandby := masteraddr.Leader(err); isStandby && leader != "" {
			a.masters.Follow(leader)
			wait, attempt = minWait, -1
		} else {
			a.masters.Failed()
		}
		wait -= time.Duration(rand.Float64() * 0.2 * float64(wait))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		attempt++
	}
}

var errBenchRegisterTimeout = fmt.Errorf("no Registered within %v", benchRegisterTimeout)

// benchSessionErr names the register timeout when it ended the stream.
func benchSessionErr(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, errBenchRegisterTimeout) {
		return cause
	}
	return err
}

// session registers and sends heartbeats until the stream breaks.
func (a *benchAgent) session(ctx context.Context, pool *connPool, registered chan<- time.Time) (bool, error) {
	api, err := pool.api(a.masters.Current(), a.idx)
	if err != nil {
		return false, err
	}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(benchRegisterTimeout, func() { cancel(errBenchRegisterTimeout) })
	defer timer.Stop()
	stream, err := api.Connect(sctx)
	if err != nil {
		return false, benchSessionErr(sctx, err)
	}
	var mu sync.Mutex
	send := func(m *pb.AgentMessage) error { mu.Lock(); defer mu.Unlock(); return stream.Send(m) }
	if err := send(&pb.AgentMessage{Msg: &pb.AgentMessage_Register{Register: &pb.Register{AgentId: a.id, Hostname: a.id,
		Resources: "cpus:16;mem:65536"}}}); err != nil {
		return false, err
	}
	m, err := stream.Recv()
	if err != nil {
		return false, benchSessionErr(sctx, err)
	}
	if m.GetRegistered() == nil {
		return false, errors.New("no Registered")
	}
	timer.Stop()
	a.regs.Add(1)
	registered <- time.Now()
	done := make(chan struct{})
	defer close(done)
	go func() { // ends with the session
		t := time.NewTicker(benchHeartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if send(&pb.AgentMessage{Msg: &pb.AgentMessage_Heartbeat{Heartbeat: &pb.Heartbeat{}}}) != nil {
					return
				}
			}
		}
	}()
	for {
		if _, err := stream.Recv(); err != nil {
			return true, err
		}
	}
}

// leaderLog passes on warnings and errors, and the records about the
// leadership: not the master's record per agent.
type leaderLog struct{ slog.Handler }

func (l leaderLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn || strings.Contains(r.Message, "leader") {
		return l.Handler.Handle(ctx, r)
	}
	return nil
}

func (l leaderLog) WithAttrs(as []slog.Attr) slog.Handler { return leaderLog{l.Handler.WithAttrs(as)} }
func (l leaderLog) WithGroup(g string) slog.Handler       { return leaderLog{l.Handler.WithGroup(g)} }
