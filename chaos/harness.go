//go:build linux

package chaos

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
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
	// Parent names the cgroup parents: agent i gets /Parent-i.
	Parent string
	// Faults are the fault kinds to choose from (nil: all of AllFaults).
	Faults []string
	// Replay is the command that repeats this run, printed on failure.
	Replay string
}

// AllFaults are the fault kinds, in the order the seed indexes them.
var AllFaults = []string{AgentKill, MasterKill, ShimKill, ShimStop, LinkReset, LinkBlackHole, CheckpointCorrupt, DiskFull}

// ReservedRole is the role some frameworks use, with resources reserved
// for it on the first agent.
const ReservedRole = "chaos"

// harness is one run in progress. The fault loop, the workload loop and
// the checker loop each own a goroutine that Run starts and waits for.
type harness struct {
	t      testing.TB
	cfg    Config
	base   string
	master *Master
	agents []*Agent
	events *lockedLog

	mu       sync.Mutex // guards faults, runs, violations, stopped
	faults   []Fault
	runs     []*frameworkRun
	bad      []string
	stopped  map[int]bool // shim pids SIGSTOPped right now
	masterUp bool
}

// frameworkRun is one `brim run` process: a framework with one task.
type frameworkRun struct {
	task      string
	want      int
	revocable bool
	role      string
	netMbit   int64 // net_bw: its own network namespace
	cmd       *exec.Cmd
	start     time.Time
	end       time.Time
	done      chan struct{}
	code      int

	mu    sync.Mutex
	lines []string
}

func (r *frameworkRun) output() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

// Run runs cfg against real processes and reports every invariant it sees
// broken with t.Errorf; on failure it logs the seed, the fault schedule
// and the replay command. Everything it starts is killed (by PID) and
// removed in t.Cleanup.
func Run(t testing.TB, cfg Config) {
	h := &harness{t: t, cfg: cfg, events: &lockedLog{start: time.Now()}, stopped: map[int]bool{}}
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
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); h.workload(ctx, rand.New(rand.NewPCG(cfg.Seed, 1))) }()
	go func() { defer wg.Done(); h.inject(ctx, rand.New(rand.NewPCG(cfg.Seed, 2))) }()
	checkCtx, stopChecks := context.WithCancel(context.Background())
	go func() { defer wg.Done(); h.checkLoop(checkCtx) }()
	<-ctx.Done()
	cancel()
	h.events.add("faults and launches stop")
	h.heal()
	h.awaitRuns(3 * time.Minute)
	stopChecks()
	wg.Wait()
	h.judge()
	h.converge(90 * time.Second)
	h.teardown()
	for _, b := range h.bad {
		t.Error(b)
	}
	t.Logf("chaos seed %d: %d runs (%s), %d faults (%s), %d violations", cfg.Seed, len(h.runs), h.outcomes(), len(h.faults), h.faultKinds(), len(h.bad))
}

func (h *harness) violation(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.events.add("VIOLATION %s", msg)
	h.mu.Lock()
	h.bad = append(h.bad, msg)
	h.mu.Unlock()
}

func (h *harness) setup() {
	t := h.t
	m, err := newMaster(h.cfg.Brim, h.base)
	if m != nil {
		h.master = m
	}
	if err != nil {
		t.Fatal(err)
	}
	h.masterUp = true
	for i := 0; i < h.cfg.Agents; i++ {
		link, err := NewProxy(m.Addr)
		if err != nil {
			t.Fatal(err)
		}
		a, err := newAgent(h.cfg.Brim, h.base, i, fmt.Sprintf("/%s-%d", h.cfg.Parent, i), link)
		if a != nil {
			h.agents = append(h.agents, a)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// Every agent registered and offers revocable resources.
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := m.State()
		ok := err == nil && len(st.Agents) == len(h.agents)
		for _, a := range st.Agents {
			ok = ok && a.Connected && a.Revocable != ""
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agents did not register with revocable resources: %+v %v", st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	err = m.Post("/reserve", map[string]string{"agentId": h.agents[0].ID,
		"resources": fmt.Sprintf("cpus(%s):0.5;mem(%s):128", ReservedRole, ReservedRole)})
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(h.agents))
	for i, a := range h.agents {
		names[i] = a.Name + "=" + a.ID
	}
	h.events.add("cluster up: master %s, agents %v", m.Addr, names)
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
		h.launch(r, sleep)
	}
}

func (h *harness) active() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.runs {
		select {
		case <-r.done:
		default:
			n++
		}
	}
	return n
}

func (h *harness) launch(r *frameworkRun, sleep int) {
	args := []string{"run", "--master", h.master.Addr, "--task-id", r.task, "--cpus", "0.1", "--mem", "32",
		"--timeout", "2m", "--failover-timeout", "2m"}
	if r.revocable {
		args = append(args, "--revocable")
	}
	if r.role != "" {
		args = append(args, "--role", r.role)
	}
	if r.netMbit > 0 {
		args = append(args, "--net-bw", strconv.FormatInt(r.netMbit, 10))
	}
	args = append(args, "--", "sh", "-c", fmt.Sprintf("sleep %d; exit %d", sleep, r.want))
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
	h.events.add("launch %s revocable=%v role=%q net_bw=%d sleep=%d exit=%d", r.task, r.revocable, r.role, r.netMbit, sleep, r.want)
	h.mu.Lock()
	h.runs = append(h.runs, r)
	h.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			r.mu.Lock()
			r.lines = append(r.lines, sc.Text())
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
			if s, ok := ParseStatus(l); ok && terminalState(s.State) {
				final = l
			}
		}
		r.mu.Unlock()
		h.events.add("end %s exit %d: %s", r.task, code, final)
		close(r.done)
	}()
}

// inject applies a seeded fault every 2–6 s until ctx ends.
func (h *harness) inject(ctx context.Context, rng *rand.Rand) {
	kinds := h.cfg.Faults
	if len(kinds) == 0 {
		kinds = AllFaults
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(2000+rng.IntN(4000)) * time.Millisecond):
		}
		kind := kinds[rng.IntN(len(kinds))]
		a := h.agents[rng.IntN(len(h.agents))]
		pause := time.Duration(300+rng.IntN(3500)) * time.Millisecond
		pick := rng.IntN(1 << 20)
		f := Fault{Kind: kind, Agent: a.Name, Pause: pause, Start: time.Now()}
		switch kind {
		case MasterKill:
			f.Agent = ""
			h.events.add("fault %s", f)
			h.master.kill9()
			h.setMaster(false)
			time.Sleep(pause)
			if err := h.master.Start(); err != nil {
				h.violation("restart master: %v", err)
			}
			h.setMaster(true)
		case AgentKill:
			h.events.add("fault %s", f)
			a.kill9()
			time.Sleep(pause)
			if err := a.Start(); err != nil {
				h.violation("restart agent %s: %v", a.Name, err)
			}
		case DiskFull:
			h.events.add("fault %s", f)
			undo, err := a.FillStateDir()
			if err != nil {
				h.violation("fill the state dir of %s: %v", a.Name, err)
			}
			time.Sleep(pause)
			undo()
		case CheckpointCorrupt:
			c, ok := h.pickRunning(a, pick)
			if !ok {
				continue
			}
			f.Task = c.Task()
			h.events.add("fault %s container=%s", f, c.ID)
			a.kill9()
			if err := a.CorruptCheckpoint(c.ID); err != nil {
				h.violation("corrupt checkpoint of %s: %v", c.ID, err)
			}
			time.Sleep(pause)
			if err := a.Start(); err != nil {
				h.violation("restart agent %s: %v", a.Name, err)
			}
		case ShimKill, ShimStop:
			task, pid := h.pickShim(a, pick)
			if pid == 0 {
				continue
			}
			f.Task = task
			if kind == ShimKill {
				f.Pause = 0
				h.events.add("fault %s pid=%d", f, pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
				break
			}
			h.events.add("fault %s pid=%d", f, pid)
			h.mu.Lock()
			h.stopped[pid] = true
			h.mu.Unlock()
			_ = syscall.Kill(pid, syscall.SIGSTOP)
			time.Sleep(pause)
			h.resume(pid)
		case LinkReset:
			h.events.add("fault %s", f)
			a.Link.Reset(pause)
			time.Sleep(pause)
		case LinkBlackHole:
			h.events.add("fault %s", f)
			a.Link.BlackHole(pause)
			time.Sleep(pause)
		}
		f.End = time.Now()
		h.mu.Lock()
		h.faults = append(h.faults, f)
		h.mu.Unlock()
	}
}

func (h *harness) setMaster(up bool) {
	h.mu.Lock()
	h.masterUp = up
	h.mu.Unlock()
}

// resume SIGCONTs a shim this harness stopped, if it is still that shim.
func (h *harness) resume(pid int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped[pid] {
		_ = syscall.Kill(pid, syscall.SIGCONT)
		delete(h.stopped, pid)
	}
}

// pickRunning chooses a running container of a (pick indexes them in
// name order).
func (h *harness) pickRunning(a *Agent, pick int) (Container, bool) {
	if !a.running() {
		return Container{}, false
	}
	cs, err := a.List()
	if err != nil {
		return Container{}, false
	}
	var live []Container
	for _, c := range cs {
		if c.State == "running" && c.Quarantine == "" {
			live = append(live, c)
		}
	}
	if len(live) == 0 {
		return Container{}, false
	}
	sort.Slice(live, func(i, j int) bool { return live[i].Name < live[j].Name })
	return live[pick%len(live)], true
}

// pickShim chooses a running container of a and returns its task and
// verified shim pid.
func (h *harness) pickShim(a *Agent, pick int) (string, int) {
	c, ok := h.pickRunning(a, pick)
	if !ok {
		return "", 0
	}
	return c.Task(), a.ShimPid(c.ID)
}

// checkLoop checks the master's allocation and that no task runs twice,
// about every second, until ctx ends.
func (h *harness) checkLoop(ctx context.Context) {
	seen := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		h.mu.Lock()
		up := h.masterUp
		h.mu.Unlock()
		if !up {
			continue
		}
		st, err := h.master.State()
		if err != nil {
			continue // the master is being killed or restarted
		}
		for _, b := range CheckAllocation(st) {
			if !seen[b] {
				seen[b] = true
				h.violation("master /state: %s", b)
			}
		}
		h.checkDuplicates(seen)
	}
}

// checkDuplicates reports a task running in two containers at once.
func (h *harness) checkDuplicates(seen map[string]bool) {
	where := map[string][]string{}
	for _, a := range h.agents {
		if !a.running() {
			continue
		}
		cs, err := a.List()
		if err != nil {
			continue
		}
		for _, c := range cs {
			if c.State == "running" && c.Quarantine == "" {
				where[c.Name] = append(where[c.Name], a.Name+"/"+c.ID)
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

// heal undoes every fault still in force: stopped shims resumed, stopped
// processes restarted, links restored (they restore themselves).
func (h *harness) heal() {
	h.mu.Lock()
	for pid := range h.stopped {
		_ = syscall.Kill(pid, syscall.SIGCONT)
		delete(h.stopped, pid)
	}
	h.mu.Unlock()
	if !h.master.running() {
		if err := h.master.Start(); err != nil {
			h.violation("restart master: %v", err)
		}
		h.setMaster(true)
	}
	for _, a := range h.agents {
		if !a.running() {
			if err := a.Start(); err != nil {
				h.violation("restart agent %s: %v", a.Name, err)
			}
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

// judge checks every framework's status sequence and its task's outcome
// against the faults.
func (h *harness) judge() {
	byID := map[string]string{}
	for _, a := range h.agents {
		byID[a.ID] = a.Name
	}
	for _, r := range h.runs {
		lines := r.output()
		var sts []Status
		for _, l := range lines {
			if s, ok := ParseStatus(l); ok && s.Task == r.task {
				sts = append(sts, s)
			}
		}
		for _, b := range CheckSequence(sts) {
			h.violation("%s:\n%s", b, strings.Join(lines, "\n"))
		}
		o := Outcome{Task: r.task, Want: r.want, Code: r.code, Start: r.start, End: r.end}
		if o.End.IsZero() {
			o.End = time.Now()
		}
		for _, s := range sts {
			if s.Agent != "" {
				o.Agent = byID[s.Agent]
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
	st, err := h.master.State()
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
			running[c.Task()] = a.ID
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

// teardown removes every container through its agent, stops the agents
// and the master, and reports anything left: processes, cgroups, mounts,
// and the network's netns files, veths, address records and HTB classes.
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
	if !h.master.stop(30 * time.Second) {
		h.violation("teardown: master did not stop on SIGTERM")
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
		if r.cmd != nil && r.cmd.Process != nil {
			select {
			case <-r.done:
			default:
				_ = r.cmd.Process.Signal(syscall.SIGKILL)
				<-r.done
			}
		}
	}
	for _, a := range h.agents {
		a.kill9()
		a.Link.Close()
		for _, pid := range a.LeftoverPids() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if h.master != nil {
		h.master.kill9()
	}
	for _, a := range h.agents {
		if err := cgtree.Remove(a.Parent); err != nil {
			h.t.Errorf("cleanup: %v", err)
		}
		if err := a.Net.Remove(); err != nil {
			h.t.Errorf("cleanup: %v", err)
		}
	}
	for _, m := range mountsUnder(h.base) {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
	if h.t.Failed() {
		h.keepLogs()
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
	logs := []string{filepath.Join(h.base, "master.log")}
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
