package etcdstore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/brimnode/brim/internal/masteraddr"
	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/etcdstore"
	"github.com/brimnode/brim/master/server"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
)

// The failover benchmark runs each party in a process of its own, as a
// cluster would on its own machines: every etcd member, every master and
// the simulated agents (one process for all of them). The processes are
// this test binary again, told their role by the environment:
// BRIM_FAILOVER_ROLE names it, BRIM_FAILOVER_ARGS holds its roleArgs as
// JSON. A role speaks to the benchmark in lines on stdout (below) and
// ends when its stdin closes, or with the benchmark (Pdeathsig).
const (
	roleEnv = "BRIM_FAILOVER_ROLE"
	argsEnv = "BRIM_FAILOVER_ARGS"
)

// roleArgs are a role's parameters.
type roleArgs struct {
	// etcd member
	Name, Dir, Token, Initial string
	ClientPort, PeerPort      int
	// master
	Endpoints []string
	Prefix    string // of the registry and the election in etcd
	TTL       time.Duration
	Heartbeat time.Duration
	// WaitOut: never end a dead leader's session (master.Config.WaitOutDeadLeader)
	WaitOut bool
	// agents
	Masters []string
	Agents  int
	Ramp    int // agents started a second; 0: all at once
}

// TestMain runs a failover role instead of the tests when asked to.
func TestMain(m *testing.M) {
	role := os.Getenv(roleEnv)
	if role == "" {
		os.Exit(m.Run())
	}
	var a roleArgs
	if err := json.Unmarshal([]byte(os.Getenv(argsEnv)), &a); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", argsEnv, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	out := &lineWriter{w: bufio.NewWriter(os.Stdout)}
	cmds := make(chan string, 16)
	go func() { // owned by the process: ends with stdin
		s := bufio.NewScanner(os.Stdin)
		for s.Scan() {
			cmds <- s.Text()
		}
		cancel() // the benchmark is gone or done with this role
	}()
	var err error
	switch role {
	case "etcd":
		err = runEtcdMember(ctx, a, out)
	case "master":
		err = runMaster(ctx, a, out, cmds)
	case "agents":
		err = runAgents(ctx, a, out, cmds)
	default:
		err = fmt.Errorf("%s: unknown role %q", roleEnv, role)
	}
	out.flush()
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", role, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// lineWriter writes whole lines to the benchmark from many goroutines,
// buffered: the agents' process reports tens of thousands of
// registrations a second. flush runs every 20 ms in runAgents.
type lineWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (l *lineWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format+"\n", args...)
}

func (l *lineWriter) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.w.Flush()
}

// runEtcdMember runs one member with etcd's default raft timing (100 ms
// ticks, 1 s election), fsync off; "ready" once it serves.
func runEtcdMember(ctx context.Context, a roleArgs, out *lineWriter) error {
	mk := func(p int) url.URL { return url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", p)} }
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = a.Name, a.Dir
	cfg.ListenClientUrls = []url.URL{mk(a.ClientPort)}
	cfg.AdvertiseClientUrls = cfg.ListenClientUrls
	cfg.ListenPeerUrls = []url.URL{mk(a.PeerPort)}
	cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
	cfg.InitialCluster, cfg.InitialClusterToken = a.Initial, a.Token
	cfg.UnsafeNoFsync = true
	cfg.TickMs, cfg.ElectionMs = 100, 1000
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{"stderr"}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return err
	case <-ctx.Done():
		return nil
	}
	out.printf("ready")
	out.flush()
	select {
	case err := <-e.Err():
		return err
	case <-ctx.Done():
		return nil
	}
}

// runMaster runs a highly available master on the etcd endpoints:
// "addr HOST:PORT" once it listens, "leading UNIXNANO" when it is
// elected (its own clock: the benchmark's too), "allback UNIXNANO" when
// the last agent of the registry it was elected with re-registered, "stopped ERR" if it
// ends on its own. Warnings and its elections go to stderr. Commands on
// stdin: "profile FILE" starts a CPU profile into FILE, "profile-end"
// ends it and answers "profiled".
func runMaster(ctx context.Context, a roleArgs, out *lineWriter, cmds <-chan string) error {
	if os.Getenv("BRIM_FAILOVER_MUTEXPROFILE") != "" {
		runtime.SetMutexProfileFraction(10)
	}
	log := slog.New(leaderLog{slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})})
	e, err := etcdstore.Open(ctx, etcdstore.Config{Endpoints: a.Endpoints, Prefix: a.Prefix, SessionTTL: a.TTL,
		DialTimeout: 2 * time.Second, RequestTimeout: 2 * time.Second, Log: log})
	if err != nil {
		return err
	}
	defer func() { _ = e.Close() }()
	r, err := server.Start(ctx, server.Config{
		Options:           master.Options{HeartbeatInterval: a.Heartbeat, MaxMissedHeartbeats: 5, Log: log},
		Listen:            "127.0.0.1:0",
		Elector:           e,
		WaitOutDeadLeader: a.WaitOut,
	})
	if err != nil {
		return err
	}
	out.printf("addr %s", r.Addr)
	out.flush()
	go func() { // owned by the process: reports the election, then ends
		for ctx.Err() == nil && r.Leading() == nil {
			time.Sleep(2 * time.Millisecond)
		}
		if ctx.Err() == nil {
			out.printf("leading %d", time.Now().UnixNano())
			out.flush()
		}
		// When the last agent of the registry it was elected with is back
		// (not reported if it was elected with none).
		for ctx.Err() == nil {
			if m := r.Leading(); m != nil {
				if at := m.AllAgentsBack(); !at.IsZero() {
					out.printf("allback %d", at.UnixNano())
					out.flush()
					return
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	go func() { // owned by the process: ends with stdin
		p := profiler{out: out}
		for c := range cmds {
			if c == "cycles" {
				if m := r.Leading(); m != nil {
					n, _, _, p50, p99 := m.CycleStats()
					out.printf("cycles %d %d %d", n, p50, p99)
				} else {
					out.printf("cycles 0 0 0")
				}
				out.flush()
				continue
			}
			p.command(c)
		}
	}()
	err = r.Wait()
	if ctx.Err() == nil {
		out.printf("stopped %v", err)
	}
	return nil
}

// profiler serves the profile commands: "profile FILE" starts a CPU
// profile into FILE, "profile-end" ends it and answers "profiled";
// "heap FILE" writes a heap profile after a garbage collection;
// "sched-mark" notes the Go scheduler's latencies so far, "sched-report"
// answers "sched P50 P99 MAX RUNS STACKS GOROUTINES" (seconds; the count
// of goroutine runs sampled) for the runs since the mark, and the bytes
// of goroutine stacks and the goroutines now: how long runnable goroutines
// waited for a CPU — the lease refresher among them.
type profiler struct {
	out   *lineWriter
	f     *os.File
	sched *metrics.Float64Histogram // at the mark
	trace *os.File                  // BRIM_FAILOVER_TRACE: an execution trace with the CPU profile
}

const schedLatencies = "/sched/latencies:seconds"

func schedHistogram() *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: schedLatencies}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return s[0].Value.Float64Histogram()
}

// schedSince sums up the runs in now's histogram and not in mark's.
func schedSince(mark, now *metrics.Float64Histogram) string {
	counts := slices.Clone(now.Counts)
	var total uint64
	for i := range counts {
		if mark != nil && i < len(mark.Counts) {
			counts[i] -= mark.Counts[i]
		}
		total += counts[i]
	}
	quantile := func(q float64) float64 {
		want := uint64(math.Ceil(q * float64(total)))
		var seen uint64
		for i, c := range counts {
			if seen += c; c > 0 && seen >= want {
				return now.Buckets[i+1] // the bucket's upper bound
			}
		}
		return 0
	}
	mem := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}, {Name: "/sched/goroutines:goroutines"}}
	metrics.Read(mem)
	return fmt.Sprintf("sched %g %g %g %d %d %d", quantile(0.5), quantile(0.99), quantile(1), total, mem[0].Value.Uint64(), mem[1].Value.Uint64())
}

// command runs c if it is a profile command and says whether it was.
func (p *profiler) command(c string) bool {
	if name, ok := strings.CutPrefix(c, "profile "); ok && p.f == nil {
		f, err := os.Create(name)
		if err == nil {
			if err = pprof.StartCPUProfile(f); err != nil {
				_ = f.Close()
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "profile: %v\n", err)
			return true
		}
		p.f = f
		if name := os.Getenv("BRIM_FAILOVER_TRACE"); name != "" && p.trace == nil && !strings.HasSuffix(f.Name(), ".agents") {
			if tf, err := os.Create(name); err == nil {
				if err := trace.Start(tf); err != nil {
					_ = tf.Close()
				} else {
					p.trace = tf
				}
			}
		}
		return true
	}
	if name, ok := strings.CutPrefix(c, "heap "); ok {
		f, err := os.Create(name)
		if err == nil {
			runtime.GC()
			err = errors.Join(pprof.Lookup("heap").WriteTo(f, 0), f.Close())
		}
		if err == nil && os.Getenv("BRIM_FAILOVER_MUTEXPROFILE") != "" {
			if f, err = os.Create(name + ".mutex"); err == nil {
				err = errors.Join(pprof.Lookup("mutex").WriteTo(f, 0), f.Close())
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "heap profile: %v\n", err)
		}
		return true
	}
	switch c {
	case "sched-mark":
		p.sched = schedHistogram()
		return true
	case "sched-report":
		if now := schedHistogram(); now != nil {
			p.out.printf("%s", schedSince(p.sched, now))
		} else {
			p.out.printf("sched 0 0 0 0 0 0")
		}
		p.out.flush()
		return true
	}
	if c == "profile-end" && p.f != nil {
		pprof.StopCPUProfile()
		_ = p.f.Close()
		p.f = nil
		if p.trace != nil {
			trace.Stop()
			_ = p.trace.Close()
			p.trace = nil
		}
		p.out.printf("profiled")
		p.out.flush()
		return true
	}
	return false
}

// runAgents runs a.Agents simulated agents following a.Masters: "reg
// IDX UNIXNANO" for every registration. A command "missing K" on stdin
// answers "missing SUMMARY": how the sessions of the agents registered
// fewer than K times last ended; the profiler's commands too.
func runAgents(ctx context.Context, a roleArgs, out *lineWriter, cmds <-chan string) error {
	// The simulation's own cost, not the cluster's: each garbage
	// collection scans the stacks of every simulated agent's goroutines
	// (a quarter of this process's CPU over a 10,000-agent storm).
	debug.SetGCPercent(400)
	pool, err := newConnPool(a.Masters, a.Agents)
	if err != nil {
		return err
	}
	defer pool.close()
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var sessions atomic.Int64 // streams opened by all the agents
	agents := make([]*benchAgent, a.Agents)
	for i := range agents {
		agents[i] = &benchAgent{id: fmt.Sprintf("sim-%06d", i), idx: i, masters: masteraddr.NewSet(a.Masters), sessions: &sessions}
	}
	registered := func(ag *benchAgent) { out.printf("reg %d %d", ag.idx, time.Now().UnixNano()) }
	wg.Add(1)
	go func() { // owned by runAgents: starts the agents at the ramp
		defer wg.Done()
		for i, ag := range agents {
			if a.Ramp > 0 && i > 0 && i%1000 == 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second * 1000 / time.Duration(a.Ramp)):
				}
			}
			wg.Add(1)
			go func() { defer wg.Done(); ag.run(ctx, pool, registered) }()
		}
	}()
	prof := profiler{out: out}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			out.flush()
		case c := <-cmds:
			if prof.command(c) {
				continue
			}
			if c == "sessions" {
				out.printf("sessions %d", sessions.Load())
				out.flush()
				continue
			}
			var want int32
			if _, err := fmt.Sscanf(c, "missing %d", &want); err != nil {
				return fmt.Errorf("command %q: %w", c, err)
			}
			out.printf("missing %s", missing(agents, want))
			out.flush()
		}
	}
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

func newConnPool(targets []string, n int) (*connPool, error) {
	p := &connPool{fixed: map[string][]*grpc.ClientConn{}, conns: map[string]map[int]*grpc.ClientConn{}}
	for _, t := range targets {
		for range (n + benchPerConn - 1) / benchPerConn {
			cc, err := grpc.NewClient(t, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				p.close()
				return nil, err
			}
			p.fixed[t] = append(p.fixed[t], cc)
		}
	}
	return p, nil
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
// with a jittered backoff (0.5 s doubling to 5 s, 20 % down at random)
// — a broken link saying the master it left is unreachable.
type benchAgent struct {
	id      string
	idx     int
	masters *masteraddr.Set
	regs    atomic.Int32 // registrations so far
	// sessions counts the streams all the agents opened (the "sessions"
	// command): a failover's follow costs one each at best.
	sessions *atomic.Int64
	last     atomic.Pointer[sessionEnded] // how the last session ended
}

// sessionEnded is how a simulated agent's session ended: the master it
// talked to and the error.
type sessionEnded struct{ master, err string }

// benchRegisterTimeout bounds the wait for Registered, as the agent's
// own (masterlink's 30 s): a simulated agent without it waited forever
// on a stream the master never answered.
const benchRegisterTimeout = 30 * time.Second

func (a *benchAgent) run(ctx context.Context, pool *connPool, registered func(*benchAgent)) {
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
			a.masters.Left(err)
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
func (a *benchAgent) session(ctx context.Context, pool *connPool, registered func(*benchAgent)) (bool, error) {
	a.sessions.Add(1)
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
	registered(a)
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
// leadership and the registry's load: not the master's record per
// agent.
type leaderLog struct{ slog.Handler }

func (l leaderLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn || strings.Contains(r.Message, "leader") || strings.Contains(r.Message, "registry") {
		return l.Handler.Handle(ctx, r)
	}
	return nil
}

func (l leaderLog) WithAttrs(as []slog.Attr) slog.Handler { return leaderLog{l.Handler.WithAttrs(as)} }
func (l leaderLog) WithGroup(g string) slog.Handler       { return leaderLog{l.Handler.WithGroup(g)} }
