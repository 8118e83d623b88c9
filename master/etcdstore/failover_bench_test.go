package etcdstore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/scheduler"
)

// BenchmarkFailover: N simulated agents (the agent side of masterlink:
// register, heartbeats, no tasks; many per gRPC connection, as
// masterbench does) and one framework follow two masters on a 3-member
// etcd. Every etcd member, every master and the simulated agents run in
// processes of their own (failover_roles_test.go), as on the machines
// of a cluster; the framework runs in the benchmark's. The leader is
// killed with SIGKILL, and the benchmark reports, from the kill: the new
// leader (s-to-leader), its first offer to the framework (s-to-offer),
// all agents re-registered with it (s-to-reregistered), and the storm's
// CPU by party (cpu-s: all processes, during the re-registration).
// Baseline in the same run: the first registration of the same agents
// with the first leader (s-registration); reregistered/registration is
// their ratio.
//
//	go test -run '^$' -bench '^BenchmarkFailover$' -benchtime 1x ./master/etcdstore/
//
// BRIM_FAILOVER_AGENTS="1000 10000 50000" chooses the points (default
// 1000 and 10000); BRIM_FAILOVER_RAMP=5000 starts the agents at 5,000 a
// second for their first registration (default: all at once; the
// failover's storm is never ramped); BRIM_FAILOVER_AGENT_NICE=10 runs
// the simulated agents' process at that nice value (default 0): on one
// machine their CPU is the simulation's, which 50,000 hosts would spend
// on their own. BRIM_FAILOVER_CPUPROFILE=FILE writes the new leader's
// CPU profile from the kill to the last re-registration (the simulated
// agents' into FILE.agents); BRIM_FAILOVER_HEAPPROFILE=FILE its heap
// profile once every agent is back. BRIM_FAILOVER_WAIT_OUT=1 has the
// standby wait out the dead leader's session TTL instead of ending it
// (master.Config.WaitOutDeadLeader). The new leader's scheduling
// latency over the storm (how long its runnable goroutines waited for
// a CPU; its lease refresher is one) is reported with its goroutines'
// stacks.
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
	ramp := envInt(b, "BRIM_FAILOVER_RAMP", "a number of agents a second")
	nice := envInt(b, "BRIM_FAILOVER_AGENT_NICE", "a nice value")
	waitOut := false
	switch envInt(b, "BRIM_FAILOVER_WAIT_OUT", "0 or 1") {
	case 0:
	case 1:
		waitOut = true
	default:
		b.Fatal("BRIM_FAILOVER_WAIT_OUT: want 0 or 1")
	}
	for _, n := range points {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) {
			for range b.N {
				failoverOnce(b, n, ramp, nice, waitOut)
			}
		})
	}
}

// envInt reads a non-negative number from the environment; 0 if unset.
func envInt(b testing.TB, name, what string) int {
	v := os.Getenv(name)
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		b.Fatalf("%s: %q is not %s", name, v, what)
	}
	return n
}

const (
	benchTTL       = 3 * time.Second
	benchHeartbeat = 5 * time.Second
	benchPerConn   = 500
)

func failoverOnce(b *testing.B, n, ramp, nice int, waitOut bool) {
	etcd, members := startEtcdProcs(b, 3)
	margs := roleArgs{Endpoints: etcd, Prefix: "/brim-bench", TTL: benchTTL, Heartbeat: benchHeartbeat, WaitOut: waitOut}
	first := startMasterProc(b, "master-1", margs)
	first.waitLeading(b, 30*time.Second)
	standby := startMasterProc(b, "master-2", margs)
	list := []string{first.addr, standby.addr}

	agents := startRole(b, "agents", "agents", roleArgs{Masters: list, Agents: n, Ramp: ramp}, nice, 4*n)
	registrations := make(chan time.Time, 4*n)
	missingAnswers := make(chan string, 4)
	sessionCounts := make(chan int64, 4)
	agentsProfiled := make(chan struct{}, 1)
	go func() { // owned by agents: ends with its stdout
		for l := range agents.lines {
			var idx int
			var at int64
			if _, err := fmt.Sscanf(l, "reg %d %d", &idx, &at); err == nil {
				select {
				case registrations <- time.Unix(0, at):
				default: // more than 4 rounds: nobody counts them
				}
			} else if _, err := fmt.Sscanf(l, "sessions %d", &at); err == nil {
				sessionCounts <- at
			} else if rest, ok := strings.CutPrefix(l, "missing "); ok {
				missingAnswers <- rest
			} else if l == "profiled" {
				agentsProfiled <- struct{}{}
			}
		}
	}()
	var leader *masterProc // the one that must not stop while agents come
	wait := func(within time.Duration, round int) []time.Time {
		b.Helper()
		deadline := time.After(within)
		var stopped <-chan string
		if leader != nil {
			stopped = leader.stopped
		}
		var at []time.Time
		for i := range n {
			select {
			case t := <-registrations:
				at = append(at, t)
			case why := <-stopped:
				b.Fatalf("%s stopped with %d of %d agents registered: %s", leader.name, i, n, why)
			case <-deadline:
				agents.send(fmt.Sprintf("missing %d", round))
				answer := "(the agents' process did not answer)"
				select {
				case answer = <-missingAnswers:
				case <-time.After(10 * time.Second):
				}
				b.Fatalf("only %d of %d agents registered within %v; %s", i, n, within, answer)
			}
		}
		return at
	}
	start := time.Now()
	leader = first
	wait(5*time.Minute, 1)
	registration := time.Since(start)

	var killedAt, offerAt atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
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
				// have sent one just before the kill).
				if killedAt.Load() != 0 && standby.leading.Load() != 0 {
					offerAt.CompareAndSwap(0, time.Now().UnixNano())
				}
				ids := make([]string, 0, len(offers))
				for _, o := range offers {
					ids = append(ids, o.Id)
				}
				// Nothing to launch: declined with the master's default
				// filter (5 s), as most frameworks do. With a 1 s filter
				// 50,000 agents come back in offers 50,000 times a
				// second, a third of the new leader's CPU while they
				// re-register.
				_ = d.Decline(ctx, ids, -1)
			},
		})
	}()
	select {
	case <-subscribed:
	case <-time.After(2 * time.Minute):
		b.Fatalf("the framework did not subscribe within 2 minutes of %d agents registering", n)
	}

	procs := append([]*roleProc{first.roleProc, standby.roleProc, agents}, members...)
	sessions := func() int64 {
		b.Helper()
		agents.send("sessions")
		select {
		case k := <-sessionCounts:
			return k
		case <-time.After(30 * time.Second):
			b.Fatal("agents: no session count within 30 s")
			return 0
		}
	}
	sessions0 := sessions()
	cpu0 := cpuOf(procs)
	kill := time.Now()
	fmt.Fprintf(os.Stderr, "%s killing the leader %s (SIGKILL)\n", kill.Format(time.TimeOnly+".000"), first.addr)
	first.killed.Store(true)
	killedAt.Store(kill.UnixNano())
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		b.Fatal(err)
	}
	standby.send("sched-mark")
	profile := os.Getenv("BRIM_FAILOVER_CPUPROFILE")
	if profile != "" {
		standby.send("profile " + profile)
		agents.send("profile " + profile + ".agents")
	}
	leadAt := standby.waitLeading(b, 10*benchTTL)
	toLeader := leadAt.Sub(kill)
	leader = standby
	again := wait(5*time.Minute, 2)
	// In the order the agents' process reported them, not quite their own.
	slices.SortFunc(again, func(a, b time.Time) int { return a.Compare(b) })
	last := kill
	for _, t := range again {
		if t.After(last) {
			last = t
		}
	}
	toAll := last.Sub(kill)
	// Streams the agents opened to follow the new leader: one each at
	// best (a standby that sent them back to the dead leader made it 2.3).
	perAgent := float64(sessions()-sessions0) / float64(n)
	for standby.allBack.Load() == 0 && time.Since(last) < 10*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	toAllAtLeader := time.Duration(-1)
	if at := standby.allBack.Load(); at != 0 {
		toAllAtLeader = time.Unix(0, at).Sub(kill)
	}
	cpu := cpuOf(procs)
	rss := rssMiB(standby.roleProc)
	if heap := os.Getenv("BRIM_FAILOVER_HEAPPROFILE"); heap != "" {
		standby.send("heap " + heap)
	}
	standby.send("sched-report")
	var schedP99, schedMax float64
	select {
	case l := <-standby.sched:
		var p50 float64
		var runs, stacks, goroutines int
		if _, err := fmt.Sscanf(l, "sched %g %g %g %d %d %d", &p50, &schedP99, &schedMax, &runs, &stacks, &goroutines); err != nil {
			b.Errorf("%s: %q: %v", standby.name, l, err)
		}
		b.Logf("new leader's scheduling latency from the kill to the last re-registration: p50 %.3gs, p99 %.3gs, max %.3gs over %d goroutine runs sampled; "+
			"then %d goroutines, %.0f MiB of stacks (%.1f KiB each)",
			p50, schedP99, schedMax, runs, goroutines, float64(stacks)/(1<<20), float64(stacks)/1024/float64(max(goroutines, 1)))
	case <-time.After(30 * time.Second):
		b.Errorf("%s: no scheduling latencies within 30 s", standby.name)
	}
	standby.send("cycles")
	select {
	case l := <-standby.sched:
		var n int
		var p50, p99 time.Duration
		if _, err := fmt.Sscanf(l, "cycles %d %d %d", &n, &p50, &p99); err != nil {
			b.Errorf("%s: %q: %v", standby.name, l, err)
		}
		b.Logf("new leader's allocation cycles (each holds the master's lock): %d, the last 1,024 p50 %v, p99 %v", n, p50, p99)
	case <-time.After(30 * time.Second):
		b.Errorf("%s: no cycle figures within 30 s", standby.name)
	}
	if profile != "" {
		standby.send("profile-end")
		agents.send("profile-end")
		select {
		case <-standby.profiled:
		case <-time.After(30 * time.Second):
			b.Errorf("%s: no profile within 30 s", standby.name)
		}
		select {
		case <-agentsProfiled:
		case <-time.After(30 * time.Second):
			b.Errorf("agents: no profile within 30 s")
		}
	}
	q := func(f float64) float64 {
		return again[min(len(again)-1, int(f*float64(len(again))))].Sub(kill).Seconds()
	}
	b.Logf("re-registrations after the kill: first %.2fs, 10%% %.2fs, 50%% %.2fs, 90%% %.2fs, last %.2fs", q(0), q(0.1), q(0.5), q(0.9), q(1))
	for offerAt.Load() == 0 && time.Since(kill) < toAll+30*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	toOffer := time.Duration(offerAt.Load() - kill.UnixNano())
	if offerAt.Load() == 0 {
		toOffer = -1
	}
	var total time.Duration
	var by []string
	for i, p := range procs {
		used := max(cpu[i]-cpu0[i], 0) // 0: gone
		total += used
		by = append(by, fmt.Sprintf("%s %.1fs", p.name, used.Seconds()))
	}
	b.ReportMetric(toLeader.Seconds(), "s-to-leader")
	b.ReportMetric(toOffer.Seconds(), "s-to-offer")
	b.ReportMetric(toAll.Seconds(), "s-to-reregistered")
	b.ReportMetric(toAllAtLeader.Seconds(), "s-to-reregistered-at-leader")
	b.ReportMetric(registration.Seconds(), "s-registration")
	b.ReportMetric(toAll.Seconds()/registration.Seconds(), "reregistered/registration")
	b.ReportMetric(total.Seconds(), "cpu-s")
	b.ReportMetric(perAgent, "streams/agent")
	b.ReportMetric(rss, "leader-rss-MiB")
	b.ReportMetric(schedP99*1000, "leader-sched-p99-ms")
	b.ReportMetric(schedMax*1000, "leader-sched-max-ms")
	b.Logf("the new leader had every agent of its registry back %.2fs after the kill (its own clock); the last agent heard so %.2fs after it",
		toAllAtLeader.Seconds(), toAll.Seconds())
	b.Logf("agents=%d TTL=%v: new leader %.2fs after the kill (goal <= TTL+1s: %v), first offer %.2fs, all re-registered %.2fs "+
		"(first registration %.2fs: %.2fx), %.2f streams an agent, CPU %.1fs from the kill to the last re-registration (%s), new leader's RSS %.0f MiB",
		n, benchTTL, toLeader.Seconds(), toLeader <= benchTTL+time.Second, toOffer.Seconds(), toAll.Seconds(),
		registration.Seconds(), toAll.Seconds()/registration.Seconds(), perAgent, total.Seconds(), strings.Join(by, ", "), rss)
}

// roleProc is one process of the benchmark's cluster
// (failover_roles_test.go): its stdout lines come on lines; its stderr
// goes to the benchmark's, each line prefixed with its name.
type roleProc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // closed when its stdout ends
}

// startRole starts this test binary as role with args, at the nice
// value; its stdout lines are buffered up to buffer. It is killed (by
// its PID) when the benchmark ends, and with the benchmark (Pdeathsig).
func startRole(b testing.TB, name, role string, args roleArgs, nice, buffer int) *roleProc {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	js, err := json.Marshal(args)
	if err != nil {
		b.Fatal(err)
	}
	argv := []string{exe}
	if nice > 0 {
		// nice(1) sets it before the exec: every thread of the Go
		// runtime inherits it (a setpriority later reaches one thread).
		argv = append([]string{"nice", "-n", strconv.Itoa(nice)}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), roleEnv+"="+role, argsEnv+"="+string(js))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start %s: %v", name, err)
	}
	p := &roleProc{name: name, cmd: cmd, stdin: stdin, lines: make(chan string, buffer+16)}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { // owned by p: ends with its stdout
		defer readers.Done()
		defer close(p.lines)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			p.lines <- s.Text()
		}
	}()
	go func() { // owned by p: ends with its stderr
		defer readers.Done()
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			fmt.Fprintf(os.Stderr, "%s: %s\n", name, s.Text())
		}
	}()
	b.Cleanup(func() {
		// Killed, as the benchmark's leader is: a stopping etcd member
		// logs its listeners' closing as errors.
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = stdin.Close()
		for range p.lines { // let the reader end if nobody else reads
		}
		readers.Wait()
		_ = cmd.Wait()
	})
	return p
}

// send writes a command line to the process.
func (p *roleProc) send(line string) { _, _ = io.WriteString(p.stdin, line+"\n") }

// line waits for the next stdout line of the process.
func (p *roleProc) line(b testing.TB, within time.Duration, what string) string {
	b.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			b.Fatalf("%s ended before %s", p.name, what)
		}
		return l
	case <-time.After(within):
		b.Fatalf("%s: no %s within %v", p.name, what, within)
		return ""
	}
}

// startEtcdProcs starts an n-member etcd, one process a member, and
// returns its client addresses and its processes.
func startEtcdProcs(b testing.TB, n int) ([]string, []*roleProc) {
	b.Helper()
	ports := freePorts(b, 2*n)
	var initial, clients []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ports[2*i+1]))
		clients = append(clients, fmt.Sprintf("127.0.0.1:%d", ports[2*i]))
	}
	token := testutil.UniqueName("brim-etcd")
	var ps []*roleProc
	for i := range n {
		ps = append(ps, startRole(b, fmt.Sprintf("etcd-%d", i), "etcd", roleArgs{Name: fmt.Sprintf("m%d", i), Dir: b.TempDir(),
			Token: token, Initial: strings.Join(initial, ","), ClientPort: ports[2*i], PeerPort: ports[2*i+1]}, 0, 4))
	}
	for _, p := range ps {
		if l := p.line(b, 30*time.Second, "ready"); l != "ready" {
			b.Fatalf("%s: %q, want ready", p.name, l)
		}
	}
	return clients, ps
}

// masterProc is a master's process: its address, and when it was
// elected (unix ns; 0: not yet).
type masterProc struct {
	*roleProc
	addr     string
	leading  atomic.Int64
	allBack  atomic.Int64  // "allback": the last awaited agent registered (unix ns)
	elected  chan struct{} // closed when leading is set
	profiled chan struct{} // gets the process's "profiled"
	sched    chan string   // gets the process's "sched …" answers
	stopped  chan string   // gets why it stopped on its own
	killed   atomic.Bool
}

func startMasterProc(b testing.TB, name string, args roleArgs) *masterProc {
	b.Helper()
	m := &masterProc{roleProc: startRole(b, name, "master", args, 0, 4), elected: make(chan struct{}), profiled: make(chan struct{}, 1), sched: make(chan string, 1), stopped: make(chan string, 1)}
	l := m.line(b, 30*time.Second, "its address")
	var ok bool
	if m.addr, ok = strings.CutPrefix(l, "addr "); !ok {
		b.Fatalf("%s: %q, want its address", name, l)
	}
	go func() { // owned by m: ends with its stdout
		for l := range m.lines {
			if v, ok := strings.CutPrefix(l, "leading "); ok {
				at, _ := strconv.ParseInt(v, 10, 64)
				m.leading.Store(at)
				close(m.elected)
			} else if v, ok := strings.CutPrefix(l, "allback "); ok {
				at, _ := strconv.ParseInt(v, 10, 64)
				m.allBack.Store(at)
			} else if l == "profiled" {
				m.profiled <- struct{}{}
			} else if strings.HasPrefix(l, "sched ") || strings.HasPrefix(l, "cycles ") {
				m.sched <- l
			} else if v, ok := strings.CutPrefix(l, "stopped "); ok && !m.killed.Load() {
				// now, not with the benchmark's log at its end
				fmt.Fprintf(os.Stderr, "%s master %s stopped on its own: %s\n", time.Now().Format(time.TimeOnly), m.addr, v)
				select {
				case m.stopped <- v:
				default:
				}
			}
		}
	}()
	return m
}

// waitLeading waits for the master's election and returns its time.
func (m *masterProc) waitLeading(b testing.TB, within time.Duration) time.Time {
	b.Helper()
	select {
	case <-m.elected:
		return time.Unix(0, m.leading.Load())
	case <-time.After(within):
		b.Fatalf("%s (%s) not elected within %v", m.name, m.addr, within)
		return time.Time{}
	}
}

// rssMiB reads the resident set of the process (VmRSS); 0 if gone.
func rssMiB(p *roleProc) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// cpuOf reads the CPU time (user + system) of each process so far from
// /proc/PID/stat; 0 for one that is gone.
func cpuOf(ps []*roleProc) []time.Duration {
	out := make([]time.Duration, len(ps))
	for i, p := range ps {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
		if err != nil {
			continue
		}
		// After "(comm)": state is field 3, utime 14, stime 15.
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		out[i] = time.Duration(ut+st) * time.Second / 100 // USER_HZ
	}
	return out
}
