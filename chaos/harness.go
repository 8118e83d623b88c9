//go:build linux

package chaos

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/cgtree"
)

// Config is one chaos run.
type Config struct {
	Seed     uint64
	Duration time.Duration // how long faults are injected
	Brim     string        // the brim binary
	Agents   int           // 2 or 3
	// Masters is 1 (one master on a bbolt store) or 3 (HA mode: three
	// masters on a 3-member etcd cluster).
	Masters int
	// SessionTTL is the masters' --session-ttl in HA mode (default 4 s).
	SessionTTL time.Duration
	// Etcd is the etcd binary of HA mode (default /usr/bin/etcd).
	Etcd string
	// Parent names the cgroup parents: agent i gets /Parent-i.
	Parent string
	// Faults are the fault kinds to choose from (nil: Applicable(Masters)).
	Faults []string
	// Replay is the command that repeats this run, printed on failure.
	Replay string
	// KeepLogs keeps the daemons' logs and the events even when the run
	// passes (a failed run always keeps them).
	KeepLogs bool
}

// ha reports HA mode.
func (c Config) ha() bool { return c.Masters > 1 }

// ttl is the session TTL of HA mode.
func (c Config) ttl() time.Duration {
	if c.SessionTTL > 0 {
		return c.SessionTTL
	}
	return 4 * time.Second
}

// ReachBound is how soon after an election every framework and agent
// must have reached the new leader: the session TTL and 2 s.
func (c Config) ReachBound() time.Duration { return c.ttl() + 2*time.Second }

// ReservedRole is the role some frameworks use, with resources reserved
// for it on the first agent.
const ReservedRole = "chaos"

// harness is one run in progress. The fault loop, the workload loop, the
// checker loop, the supervisor and (in HA mode) the leader watch each own
// a goroutine that Run starts and waits for.
type harness struct {
	t       testing.TB
	cfg     Config
	base    string
	masters []*Master
	etcd    []*EtcdMember
	agents  []*Agent
	events  *lockedLog
	logCap  logCap

	mu      sync.Mutex // guards the fields below
	faults  []Fault
	runs    []*frameworkRun
	bad     []string
	said    map[string]bool // violations reported once
	stopped map[int]bool    // shim pids SIGSTOPped right now
	frozen  map[*Master]bool
	current *Fault  // the fault in force, if any
	leader  *Master // as etcd last named it (HA); nil: unknown
	// seen is the harness's view of each task's containers (by
	// framework/task): when a listing that began at that time showed it
	// running, last and first.
	seen       map[string]seenRunning
	logPeak    map[string]logPeak // flood task → the most its logs held
	elections  []Election
	reach      []time.Duration // frameworks' delays to a new leader
	failovers  string          // how soon leaders came after leader faults
	agentReach []time.Duration
}

type seenRunning struct{ first, last time.Time }

// frameworkRun is one `brim run` process: a framework with one task.
type frameworkRun struct {
	task      string
	want      int
	sleep     time.Duration // the command's sleep before it exits
	revocable bool
	role      string
	netMbit   int64 // net_bw: its own network namespace
	master    string
	// victim: a framework the harness kills (framework-kill); its
	// outcome is not judged. reuse: it reuses a victim's task ID.
	// flood: its command floods its stdout (log-flood).
	victim, reuse, flood bool
	failover             time.Duration
	mem                  int // MiB (32 unless said)
	cmd                  *exec.Cmd
	start                time.Time
	end                  time.Time
	done                 chan struct{}
	code                 int

	mu    sync.Mutex
	lines []timedLine
}

// timedLine is one line a brim run printed and when the harness read it.
type timedLine struct {
	At   time.Time
	Text string
}

func (r *frameworkRun) output() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.lines))
	for i, l := range r.lines {
		out[i] = l.Text
	}
	return out
}

func (r *frameworkRun) timed() []timedLine {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]timedLine(nil), r.lines...)
}

// frameworkID is the ID the run subscribed with ("" before it did).
func (r *frameworkRun) frameworkID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.lines) - 1; i >= 0; i-- {
		if id, ok := strings.CutPrefix(r.lines[i].Text, "subscribed as framework "); ok {
			return strings.TrimSpace(id)
		}
	}
	return ""
}

func (r *frameworkRun) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// Run runs cfg against real processes and reports every invariant it sees
// broken with t.Errorf; on failure it logs the seed, the fault schedule
// and the replay command. Everything it starts is killed (by PID) and
// removed in t.Cleanup.
func Run(t testing.TB, cfg Config) {
	h := &harness{t: t, cfg: cfg, events: &lockedLog{start: time.Now()}, stopped: map[int]bool{},
		frozen: map[*Master]bool{}, said: map[string]bool{}, seen: map[string]seenRunning{}, logPeak: map[string]logPeak{}}
	base, err := os.MkdirTemp("", "brim-chaos")
	if err != nil {
		t.Fatal(err)
	}
	h.base = base
	t.Cleanup(h.cleanup)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("chaos seed %d duration %v failed; replay: %s", cfg.Seed, cfg.Duration, cfg.Replay)
			t.Logf("events (faults, launches):\n%s", h.events)
		}
	})
	h.setup()

	// The checks, the supervisor and the leader watch run until the end
	// of the drain; the faults and the workload for cfg.Duration.
	checkCtx, stopChecks := context.WithCancel(context.Background())
	var checks sync.WaitGroup
	checks.Add(2)
	go func() { defer checks.Done(); h.checkLoop(checkCtx) }()
	go func() { defer checks.Done(); h.supervise(checkCtx) }()
	if cfg.ha() {
		elections := make(chan Election)
		var eps []string
		for _, e := range h.etcd {
			eps = append(eps, e.Client)
		}
		if err := leaderWatch(checkCtx, eps, elections); err != nil {
			stopChecks()
			checks.Wait()
			t.Fatal(err)
		}
		checks.Add(1)
		go func() { defer checks.Done(); h.reachLoop(checkCtx, elections) }()
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration)
	var faults sync.WaitGroup
	faults.Add(2)
	go func() { defer faults.Done(); h.workload(ctx, rand.New(rand.NewPCG(cfg.Seed, 1))) }()
	go func() { defer faults.Done(); h.inject(ctx, rand.New(rand.NewPCG(cfg.Seed, 2))) }()
	faults.Wait() // each undoes its fault in force when ctx ends
	cancel()
	h.events.add("faults and launches stop")
	h.heal()
	h.awaitRuns(3 * time.Minute)
	stopChecks()
	checks.Wait()
	h.judge()
	h.checkFailovers()
	h.converge(90 * time.Second)
	h.checkLogs()
	h.teardown()
	for _, b := range h.bad {
		t.Error(b)
	}
	t.Logf("chaos seed %d: %d runs (%s), %d faults (%s), %d violations", cfg.Seed, len(h.runs), h.outcomes(), len(h.faults), h.faultKinds(), len(h.bad))
	if cfg.ha() {
		t.Logf("chaos seed %d: %d leader changes seen in etcd; after an election, frameworks reached the new leader in %s, agents in %s (bound %v)",
			cfg.Seed, len(h.elections), spread(h.reach), spread(h.agentReach), cfg.ReachBound())
		t.Logf("chaos seed %d: a new leader was elected, after %s", cfg.Seed, h.failovers)
	}
}

func (h *harness) violation(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.events.add("VIOLATION %s", msg)
	h.mu.Lock()
	h.bad = append(h.bad, msg)
	h.mu.Unlock()
}

// violationOnce reports msg unless it was reported already.
func (h *harness) violationOnce(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.violationKeyed(msg, "%s", msg)
}

// violationKeyed reports a violation unless one with key was reported
// already.
func (h *harness) violationKeyed(key, format string, args ...any) {
	h.mu.Lock()
	dup := h.said[key]
	h.said[key] = true
	h.mu.Unlock()
	if !dup {
		h.violation(format, args...)
	}
}

func (h *harness) setup() {
	t := h.t
	if h.cfg.ha() {
		if err := h.startEtcd(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range h.cfg.Masters {
		m, err := newMaster(h.cfg.Brim, h.base, i, h.etcd, h.cfg.ttl(), h.connOwner)
		if err != nil {
			t.Fatal(err)
		}
		h.masters = append(h.masters, m)
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
	}
	if err := waitFor(30*time.Second, func() bool { return h.leading() != nil }); err != nil {
		t.Fatalf("no master leads: %v", err)
	}
	if err := h.startAgents(); err != nil {
		t.Fatal(err)
	}
	leader := h.leading()
	if leader == nil {
		t.Fatal("no master leads once the agents registered")
	}
	err := leader.Post("/reserve", map[string]string{"agentId": h.agents[0].ID,
		"resources": fmt.Sprintf("cpus(%s):0.5;mem(%s):128", ReservedRole, ReservedRole)})
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(h.agents))
	for i, a := range h.agents {
		names[i] = a.Name + "=" + a.ID
	}
	var ms []string
	for _, m := range h.masters {
		ms = append(ms, m.Name+"="+m.Addr)
	}
	h.events.add("cluster up: masters %v, agents %v, log cap %s", ms, names, h.logCap)
}

// startEtcd mounts the etcd members' tmpfs, starts the three members and
// waits until every one is healthy.
func (h *harness) startEtcd() error {
	dir := filepath.Join(h.base, "etcd")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := mountTmpfs(dir, "512m"); err != nil {
		return err
	}
	bin := h.cfg.Etcd
	if bin == "" {
		bin = "/usr/bin/etcd"
	}
	ms, err := newEtcd(bin, dir, filepath.Base(h.base), 3)
	if err != nil {
		return err
	}
	h.etcd = ms
	for _, m := range ms {
		if err := m.Start(); err != nil {
			return fmt.Errorf("etcd member %s: %w", m.Name, err)
		}
	}
	if err := waitFor(30*time.Second, func() bool {
		for _, m := range ms {
			if !m.healthy() {
				return false
			}
		}
		return true
	}); err != nil {
		return fmt.Errorf("etcd cluster not healthy: %w", err)
	}
	return nil
}

// startAgents starts the agents (with the log cap when this brim has
// one) and waits until every one registered and offers revocable
// resources.
func (h *harness) startAgents() error {
	capArgs, lc, err := logCapFlags(h.cfg.Brim)
	if err != nil {
		return err
	}
	h.logCap = lc
	for i := 0; i < h.cfg.Agents; i++ {
		masters := h.masterList()
		// Agents retry unacknowledged status updates after 200 ms
		// doubling to 2 s; in HA mode the last agent finds the masters in
		// etcd and keeps the product's retry (10 s doubling to 10 min),
		// as operators run it.
		retry := []string{"--status-retry-min", "200ms", "--status-retry-max", "2s"}
		if h.cfg.ha() && i == h.cfg.Agents-1 {
			masters, retry = h.etcdURL(), nil
		}
		a, err := newAgent(h.cfg.Brim, h.base, i, fmt.Sprintf("/%s-%d", h.cfg.Parent, i), masters, append(retry, capArgs...)...)
		if a != nil {
			h.mu.Lock()
			h.agents = append(h.agents, a)
			h.mu.Unlock()
		}
		if err != nil {
			return err
		}
		if err := a.Start(); err != nil {
			return err
		}
		if err := a.loadID(); err != nil {
			return err
		}
	}
	var st MasterState
	if err := waitFor(60*time.Second, func() bool {
		var err error
		st, err = h.state()
		ok := err == nil && len(st.Agents) == len(h.agents)
		for _, a := range st.Agents {
			ok = ok && a.Connected && a.Revocable != ""
		}
		return ok
	}); err != nil {
		return fmt.Errorf("agents did not register with revocable resources: %+v: %w", st, err)
	}
	return nil
}

// waitFor polls ok every 50 ms until it holds or bound passes.
func waitFor(bound time.Duration, ok func() bool) error {
	for deadline := time.Now().Add(bound); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", bound)
		}
	}
	return nil
}

// masterList is the masters' addresses, comma-separated (--master).
func (h *harness) masterList() string {
	var out []string
	for _, m := range h.masters {
		out = append(out, m.Addr)
	}
	return strings.Join(out, ",")
}

// etcdURL is --master etcd://…/PREFIX, straight to the etcd members.
func (h *harness) etcdURL() string {
	var eps []string
	for _, e := range h.etcd {
		eps = append(eps, e.Client)
	}
	return "etcd://" + strings.Join(eps, ",") + EtcdPrefix
}

// connOwner names the agent holding the client end of a connection a
// master's front proxy accepted ("" for anyone else: frameworks, the
// harness, other masters).
func (h *harness) connOwner(c net.Conn) string {
	h.mu.Lock()
	agents := append([]*Agent(nil), h.agents...)
	h.mu.Unlock()
	pids := make([]int, len(agents))
	for i, a := range agents {
		pids[i] = a.pid()
	}
	pid := connPid(c, pids)
	for i, a := range agents {
		if pid != 0 && pids[i] == pid {
			return a.Name
		}
	}
	return ""
}

// cutLink applies a link fault to every connection of agent a to any
// master.
func (h *harness) cutLink(a *Agent, kind string, d time.Duration) {
	for _, m := range h.masters {
		if kind == LinkReset {
			m.Front.Reset(a.Name, d)
		} else {
			m.Front.BlackHole(a.Name, d)
		}
	}
}

// leading is a master that answers /health 200 (the leader, or the
// single master), preferring the one etcd last named; nil if none does.
func (h *harness) leading() *Master {
	h.mu.Lock()
	first := h.leader
	h.mu.Unlock()
	if first != nil && first.health() == 200 {
		return first
	}
	for _, m := range h.masters {
		if m != first && m.health() == 200 {
			return m
		}
	}
	return nil
}

// state is the leader's /state.
func (h *harness) state() (MasterState, error) {
	last := fmt.Errorf("no master answers")
	h.mu.Lock()
	first := h.leader
	h.mu.Unlock()
	order := h.masters
	if first != nil {
		order = append([]*Master{first}, h.masters...)
	}
	for _, m := range order {
		st, err := m.State()
		if err == nil {
			return st, nil
		}
		last = err
	}
	return MasterState{}, last
}

// workload starts frameworks until ctx ends, at most 4 at a time: plain
// tasks, revocable ones, and ones in the reserved role.
func (h *harness) workload(ctx context.Context, rng *rand.Rand) {
	n := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(200+rng.IntN(1000)) * time.Millisecond):
		}
		if h.active() >= 4 {
			continue
		}
		n++
		r := &frameworkRun{task: fmt.Sprintf("c%d-%d", h.cfg.Seed%10000, n), want: []int{0, 0, 0, 3, 7}[rng.IntN(5)]}
		sleep := 1 + rng.IntN(6)
		switch k := rng.IntN(4); k {
		case 0:
			r.revocable = true
		case 1:
			r.role = ReservedRole
		}
		// Every third plain task has bandwidth, so its own netns, veth,
		// address and HTB classes (chosen by n, not drawn: the draws of
		// a seed stay what they were).
		if !r.revocable && n%3 == 0 {
			r.netMbit = 5
		}
		// In HA mode every fourth framework finds the masters in etcd.
		if h.cfg.ha() && n%4 == 1 {
			r.master = h.etcdURL()
		}
		r.sleep = time.Duration(sleep) * time.Second
		h.launch(r, fmt.Sprintf("sleep %d; exit %d", sleep, r.want))
	}
}

func (h *harness) active() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.runs {
		if !r.exited() {
			n++
		}
	}
	return n
}

// launch starts r's brim run with the shell command script.
func (h *harness) launch(r *frameworkRun, script string) {
	if r.master == "" {
		r.master = h.masterList()
	}
	if r.failover == 0 {
		r.failover = 2 * time.Minute
	}
	if r.mem == 0 {
		r.mem = 32
	}
	args := []string{"run", "--master", r.master, "--task-id", r.task, "--cpus", "0.1", "--mem", strconv.Itoa(r.mem),
		"--timeout", "2m", "--failover-timeout", r.failover.String()}
	if r.revocable {
		args = append(args, "--revocable")
	}
	if r.role != "" {
		args = append(args, "--role", r.role)
	}
	if r.netMbit > 0 {
		args = append(args, "--net-bw", strconv.FormatInt(r.netMbit, 10))
	}
	args = append(args, "--", "sh", "-c", script)
	r.cmd = exec.Command(h.cfg.Brim, args...)
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		h.violation("brim run %s: %v", r.task, err)
		return
	}
	r.cmd.Stderr = r.cmd.Stdout
	r.done, r.code = make(chan struct{}), -1
	r.start = time.Now()
	if err := r.cmd.Start(); err != nil {
		h.violation("start brim run %s: %v", r.task, err)
		return
	}
	h.events.add("launch %s pid=%d revocable=%v role=%q net_bw=%d script=%q victim=%v reuse=%v", r.task, r.cmd.Process.Pid,
		r.revocable, r.role, r.netMbit, script, r.victim, r.reuse)
	h.mu.Lock()
	h.runs = append(h.runs, r)
	h.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			r.mu.Lock()
			r.lines = append(r.lines, timedLine{At: time.Now(), Text: sc.Text()})
			r.mu.Unlock()
		}
		err := r.cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			code = 255
		}
		r.mu.Lock()
		r.code, r.end = code, time.Now()
		final := "no terminal state"
		for _, l := range r.lines {
			if s, ok := ParseStatus(l.Text); ok && terminalState(s.State) {
				final = l.Text
			}
		}
		r.mu.Unlock()
		h.events.add("end %s exit %d: %s", r.task, code, final)
		close(r.done)
	}()
}

// checkLoop checks the leader's allocation, that no task runs twice and
// (HA) that no two masters lead at once, about every second, until ctx
// ends.
func (h *harness) checkLoop(ctx context.Context) {
	seen := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		h.observeContainers(seen)
		if h.cfg.ha() {
			h.checkOneLeader()
		}
		st, err := h.state()
		if err != nil {
			continue // the master is being killed, restarted or frozen
		}
		for _, b := range CheckAllocation(st) {
			if !seen[b] {
				seen[b] = true
				h.violation("master /state: %s", b)
			}
		}
	}
}

// checkOneLeader reports two masters answering /health as the leader in
// one round.
func (h *harness) checkOneLeader() {
	var leaders []string
	for _, m := range h.masters {
		h.mu.Lock()
		frozen := h.frozen[m]
		h.mu.Unlock()
		if !frozen && m.health() == 200 {
			leaders = append(leaders, m.Name)
		}
	}
	if len(leaders) > 1 {
		h.violation("masters %v all answer /health as the leader", leaders)
	}
}

// observeContainers lists every agent's containers: it reports a task
// running in two containers at once, records when each task's container
// was seen running (the foreign-update check), and checks the logs of
// flooding containers against the cap.
func (h *harness) observeContainers(seen map[string]bool) {
	where := map[string][]string{}
	for _, a := range h.agents {
		if !a.running() {
			continue
		}
		began := time.Now()
		cs, err := a.List()
		if err != nil {
			continue
		}
		for _, c := range cs {
			key := taskKey(c.Labels["brim.framework"], c.Task())
			if c.State == "running" && c.Quarantine == "" {
				where[key] = append(where[key], a.Name+"/"+c.ID)
				h.mu.Lock()
				s := h.seen[key]
				if s.first.IsZero() {
					s.first = began
				}
				s.last = began
				h.seen[key] = s
				h.mu.Unlock()
			}
			if h.isFlood(c.Task()) {
				h.checkLog(a, c)
			}
		}
	}
	for task, w := range where {
		if len(w) > 1 {
			msg := fmt.Sprintf("task %s runs twice: %v", task, w)
			if !seen[msg] {
				seen[msg] = true
				h.violation("%s", msg)
			}
		}
	}
}

func (h *harness) isFlood(task string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.runs {
		if r.flood && r.task == task {
			return true
		}
	}
	return false
}

// checkLog notes how much container c's logs on a hold, and checks that
// against the cap (when the agent has one).
func (h *harness) checkLog(a *Agent, c Container) {
	sizes, err := a.LogSizes(c.ID)
	if err != nil {
		return
	}
	var total int64
	for _, n := range sizes {
		total += n
	}
	h.mu.Lock()
	if p := h.logPeak[c.Task()]; total > p.bytes {
		h.logPeak[c.Task()] = logPeak{bytes: total, files: len(sizes)}
	}
	h.mu.Unlock()
	if !h.logCap.set() {
		return
	}
	if why := CheckLogCap(sizes, h.logCap.total()); why != "" {
		h.violationOnce("task %s: container %s on %s: %s", c.Task(), c.ID, a.Name, why)
	}
}

// checkLogs checks every flooding container's logs once more after the
// drain, before the teardown removes them, and notes the most each held.
func (h *harness) checkLogs() {
	for _, a := range h.agents {
		cs, err := a.List()
		if err != nil {
			continue
		}
		for _, c := range cs {
			if h.isFlood(c.Task()) {
				h.checkLog(a, c)
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for task, p := range h.logPeak {
		h.events.add("flood %s: its logs held at most %d bytes in %d files (cap %s)", task, p.bytes, p.files, h.logCap)
	}
}

// logPeak is the most a flooding container's logs were seen to hold.
type logPeak struct {
	bytes int64
	files int
}

// heal undoes every fault still in force: stopped shims and masters
// resumed, daemons that are down restarted, links restored (they restore
// themselves).
func (h *harness) heal() {
	h.mu.Lock()
	for pid := range h.stopped {
		_ = syscall.Kill(pid, syscall.SIGCONT)
		delete(h.stopped, pid)
	}
	for m := range h.frozen {
		m.signal(syscall.SIGCONT)
		delete(h.frozen, m)
	}
	h.mu.Unlock()
	// A daemon the harness stopped is started again; one that exited on
	// its own is the supervisor's.
	for _, d := range h.daemons() {
		if d.isHeld() {
			h.restart(d)
		}
	}
}

// awaitRuns waits for every brim run to exit; one still running after
// bound is a hang, reported and killed.
func (h *harness) awaitRuns(bound time.Duration) {
	h.mu.Lock()
	runs := append([]*frameworkRun(nil), h.runs...)
	h.mu.Unlock()
	dones := make([]<-chan struct{}, len(runs))
	for i, r := range runs {
		dones[i] = r.done
	}
	for _, i := range overdue(dones, time.Now().Add(bound)) {
		r := runs[i]
		h.violation("task %s: brim run still running %v after the faults stopped:\n%s", r.task, bound, strings.Join(r.output(), "\n"))
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
		<-r.done
		r.mu.Lock()
		r.code = -1
		r.mu.Unlock()
	}
}

// overdue waits until every channel of dones is closed or deadline
// passes, and returns the indexes of those still open then. A closed
// channel always wins over the passed deadline (a select with both ready
// picks either).
func overdue(dones []<-chan struct{}, deadline time.Time) []int {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	expired := false
	var out []int
	for i, done := range dones {
		if !expired {
			select {
			case <-done:
				continue
			case <-timer.C:
				expired = true
			}
		}
		select {
		case <-done:
		default:
			out = append(out, i)
		}
	}
	return out
}

// checkFailovers checks how soon leaders were elected after the leader
// faults (CheckFailovers) and notes the figures.
func (h *harness) checkFailovers() {
	if !h.cfg.ha() {
		return
	}
	bad, delays := CheckFailovers(h.faults, h.elections, h.cfg.ReachBound())
	for _, b := range bad {
		h.violation("%s", b)
	}
	var kinds []string
	for k, ds := range delays {
		from := "its start"
		if k == EtcdQuorumLoss {
			from = "quorum returned"
		}
		kinds = append(kinds, fmt.Sprintf("%s (from %s): %s", k, from, spread(ds)))
	}
	sort.Strings(kinds)
	h.failovers = strings.Join(kinds, "; ")
	if h.failovers == "" {
		h.failovers = "no leader fault"
	}
}

// judge checks every framework's status sequence, its task's outcome
// against the faults, and that it saw no other framework's update.
func (h *harness) judge() {
	byID := map[string]string{}
	for _, a := range h.agents {
		byID[a.ID] = a.Name
	}
	for _, r := range h.runs {
		lines := r.output()
		var sts []Status
		var ends []TimedStatus
		for _, l := range r.timed() {
			if s, ok := ParseStatus(l.Text); ok && s.Task == r.task {
				sts = append(sts, s)
				if terminalState(s.State) {
					ends = append(ends, TimedStatus{Status: s, At: l.At})
				}
			}
		}
		for _, b := range CheckSequence(sts) {
			h.violation("%s:\n%s", b, strings.Join(lines, "\n"))
		}
		fw := r.frameworkID()
		h.mu.Lock()
		seen := h.seen[taskKey(fw, r.task)]
		h.mu.Unlock()
		if !r.victim {
			v := TaskView{Task: r.task, Framework: fw, Start: r.start, Sleep: r.sleep, Ends: ends, LastSeenRunning: seen.last}
			for _, b := range CheckForeign(v) {
				h.violation("%s; output:\n%s", b, strings.Join(lines, "\n"))
			}
		}
		if r.victim {
			continue // killed by the harness: no outcome to judge
		}
		o := Outcome{Task: r.task, Framework: fw, Want: r.want, Code: r.code, Start: r.start, End: r.end, SeenRunning: !seen.first.IsZero(),
			NoMasters: slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "brim: --master etcd://") }),
			Recover:   h.cfg.ReachBound()}
		if o.End.IsZero() {
			o.End = time.Now()
		}
		for _, s := range sts {
			if s.Agent != "" {
				o.Agent = byID[s.Agent]
			}
			if s.State == "STARTING" || s.State == "RUNNING" {
				o.Started = true
			}
			if terminalState(s.State) {
				o.Final = s
			}
		}
		if why := Judge(o, h.faults); why != "" {
			h.violation("%s; output:\n%s", why, strings.Join(lines, "\n"))
		}
	}
}

// converge waits until the master and the agents agree: the master's live
// tasks are exactly the agents' running containers, each agent's "used"
// equals what its running containers hold, and the allocation checks
// pass. It reports the last disagreement after bound.
func (h *harness) converge(bound time.Duration) {
	deadline := time.Now().Add(bound)
	var why []string
	for {
		why = h.disagreements()
		if len(why) == 0 {
			h.events.add("master and agents agree")
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, w := range why {
		h.violation("after the faults stopped, for %v: %s", bound, w)
	}
}

func (h *harness) disagreements() []string {
	st, err := h.state()
	if err != nil {
		return []string{fmt.Sprintf("master /state: %v", err)}
	}
	why := CheckAllocation(st)
	live := st.LiveTasks()
	running := map[string]string{}
	for _, a := range h.agents {
		cs, err := a.List()
		if err != nil {
			why = append(why, fmt.Sprintf("agent %s: %v", a.Name, err))
			continue
		}
		var held []string
		for _, c := range cs {
			if c.State != "running" || c.Quarantine != "" {
				continue // a quarantined container is the operator's to remove
			}
			running[taskKey(c.Labels["brim.framework"], c.Task())] = a.ID
			r := fmt.Sprintf("cpus:%g;mem:%d", c.CPUs, c.MemMiB)
			if c.NetMbit > 0 {
				r += fmt.Sprintf(";net_bw:%d", c.NetMbit)
			}
			held = append(held, r)
		}
		info, err := a.Info()
		if err != nil {
			why = append(why, fmt.Sprintf("agent %s: %v", a.Name, err))
			continue
		}
		if w := compareUsed(info["resources used"], info["revocable used"], held); w != "" {
			why = append(why, fmt.Sprintf("agent %s: %s", a.Name, w))
		}
	}
	for id, ag := range live {
		if running[id] != ag {
			why = append(why, fmt.Sprintf("task %s: live on agent %s in the master, running on %q", id, ag, running[id]))
		}
	}
	for id, ag := range running {
		if _, ok := live[id]; !ok {
			why = append(why, fmt.Sprintf("task %s: running on agent %s, not live in the master", id, ag))
		}
	}
	sort.Strings(why)
	return why
}

// compareUsed checks an agent's accounting (resources and revocable used,
// as `brim agent info` prints them) against its running containers.
func compareUsed(used, revUsed string, held []string) string {
	got, err := sum(orEmpty(used), orEmpty(revUsed))
	if err != nil {
		return err.Error()
	}
	want, err := sum(held...)
	if err != nil {
		return err.Error()
	}
	if !sameScalars(got, want) {
		return fmt.Sprintf("accounting used %q (revocable %q) != its running containers' %q", used, revUsed, want)
	}
	return ""
}

func orEmpty(s string) string {
	if s == "-" || s == "none" || s == "(none)" {
		return ""
	}
	return s
}

// teardown removes every container through its agent, stops the agents,
// the masters and etcd, and reports anything left: processes, cgroups,
// mounts, and the network's netns files, veths, address records and HTB
// classes.
func (h *harness) teardown() {
	for _, a := range h.agents {
		cs, err := a.List()
		if err != nil {
			h.violation("teardown: agent %s: %v", a.Name, err)
			continue
		}
		for _, c := range cs {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if _, err := a.CLI(ctx, "container", "rm", "-f", c.ID); err != nil {
				h.violation("teardown: rm %s on %s: %v", c.ID, a.Name, err)
			}
			cancel()
		}
		if !a.stop(30 * time.Second) {
			h.violation("teardown: agent %s did not stop on SIGTERM", a.Name)
		}
	}
	for _, m := range h.masters {
		if !m.stop(30 * time.Second) {
			h.violation("teardown: master %s did not stop on SIGTERM", m.Name)
		}
	}
	for _, e := range h.etcd {
		e.stop(30 * time.Second)
	}
	for _, a := range h.agents {
		var left []string
		for try := 0; try < 50; try++ {
			if left = a.Leftovers(); len(left) == 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, l := range left {
			h.violation("teardown: agent %s left %s", a.Name, l)
		}
	}
}

// cleanup kills whatever is left (by PID), removes the cgroup parents,
// mounts and the run's directory; it runs even when the test failed.
func (h *harness) cleanup() {
	h.mu.Lock()
	runs := append([]*frameworkRun(nil), h.runs...)
	for pid := range h.stopped {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	h.mu.Unlock()
	for _, r := range runs {
		if r.cmd != nil && r.cmd.Process != nil && !r.exited() {
			_ = r.cmd.Process.Signal(syscall.SIGKILL)
			<-r.done
		}
	}
	for _, a := range h.agents {
		a.kill9()
		for _, pid := range a.LeftoverPids() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, m := range h.masters {
		m.kill9()
		m.closeLinks()
	}
	for _, e := range h.etcd {
		e.kill9()
	}
	for _, a := range h.agents {
		if err := cgtree.Remove(a.Parent); err != nil {
			h.t.Errorf("cleanup: %v", err)
		}
		if err := a.Net.Remove(); err != nil {
			h.t.Errorf("cleanup: %v", err)
		}
	}
	if h.t.Failed() || h.cfg.KeepLogs {
		h.keepLogs()
	}
	for _, m := range mountsUnder(h.base) {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
	if err := os.RemoveAll(h.base); err != nil {
		h.t.Errorf("cleanup: %v", err)
	}
}

// keepLogs copies the daemons' logs next to the temp dir's parent so that
// a failed run can be read after its directory is gone.
func (h *harness) keepLogs() {
	dst := filepath.Join(os.TempDir(), "brim-chaos-logs-"+strconv.FormatUint(h.cfg.Seed, 10))
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return
	}
	var logs []string
	for _, m := range h.masters {
		logs = append(logs, m.logPath)
	}
	for _, e := range h.etcd {
		logs = append(logs, e.logPath)
	}
	for _, a := range h.agents {
		logs = append(logs, a.logPath)
	}
	for _, l := range logs {
		if b, err := os.ReadFile(l); err == nil {
			name := strings.ReplaceAll(strings.TrimPrefix(l, h.base+"/"), "/", "-")
			_ = os.WriteFile(filepath.Join(dst, name), b, 0o600)
		}
	}
	_ = os.WriteFile(filepath.Join(dst, "events.txt"), []byte(h.events.String()), 0o600)
	h.t.Logf("daemon logs and events kept in %s", dst)
}

// outcomes counts the runs' final states ("FINISHED 20, LOST 2").
func (h *harness) outcomes() string {
	n := map[string]int{}
	for _, r := range h.runs {
		final := "none"
		for _, l := range r.output() {
			if s, ok := ParseStatus(l); ok && terminalState(s.State) {
				final = s.State
			}
		}
		if r.victim {
			final = "killed framework"
		}
		n[final]++
		if r.netMbit > 0 && final == "FINISHED" {
			n["FINISHED with net_bw"]++
		}
	}
	return counts(n)
}

func (h *harness) faultKinds() string {
	n := map[string]int{}
	for _, f := range h.faults {
		n[f.Kind]++
	}
	return counts(n)
}

func counts(n map[string]int) string {
	var out []string
	for k, v := range n {
		out = append(out, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// spread summarises durations: "n=12 median 1.2s max 3.4s" ("none").
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("n=%d median %v max %v", len(s), s[len(s)/2].Round(10*time.Millisecond), s[len(s)-1].Round(10*time.Millisecond))
}
