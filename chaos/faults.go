//go:build linux

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
)

// inject applies a seeded fault every 2–6 s until ctx ends; a fault in
// force when ctx ends is undone before it returns.
func (h *harness) inject(ctx context.Context, rng *rand.Rand) {
	kinds := h.cfg.Faults
	if len(kinds) == 0 {
		kinds = Applicable(h.cfg.Masters)
	}
	for i := uint64(0); ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(2000+rng.IntN(4000)) * time.Millisecond):
		}
		kind := kinds[rng.IntN(len(kinds))]
		a := h.agents[rng.IntN(len(h.agents))]
		pause := time.Duration(300+rng.IntN(3500)) * time.Millisecond
		pick := rng.IntN(1 << 20)
		// A fault's own further choices come from a stream of its own, so
		// that the draws above stay what they were for every seed.
		x := rand.New(rand.NewPCG(h.cfg.Seed, 1000+i))
		f := &Fault{Kind: kind, Agent: a.Name, Pause: pause}
		h.apply(ctx, f, a, pick, x, i)
	}
}

// begin records f as in force from now.
func (h *harness) begin(f *Fault, detail string) {
	f.Start = time.Now()
	h.events.add("fault %s%s", f, detail)
	h.mu.Lock()
	h.current = f
	h.mu.Unlock()
}

// finish records f as over.
func (h *harness) finish(f *Fault) {
	f.End = time.Now()
	h.mu.Lock()
	h.faults = append(h.faults, *f)
	h.current = nil
	h.mu.Unlock()
	h.events.add("fault %s over", f.Kind)
}

// faultsSoFar are the faults applied, the one in force included (its End
// far ahead).
func (h *harness) faultsSoFar() []Fault {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := append([]Fault(nil), h.faults...)
	if h.current != nil {
		f := *h.current
		f.End = time.Now().Add(time.Hour)
		out = append(out, f)
	}
	return out
}

// sleepCtx sleeps d or until ctx ends; false if ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// target is the master a master fault hits: the leader (HA) or the only
// master; nil while none leads.
func (h *harness) target() *Master {
	if !h.cfg.ha() {
		return h.masters[0]
	}
	return h.leading()
}

// startAgain starts a daemon the fault loop stopped; a failure is a
// violation, except a master's in HA mode (without etcd at its start it
// exits, and the supervisor starts it again).
func (h *harness) startAgain(d daemon) {
	err := d.Start()
	if err == nil {
		return
	}
	if _, isMaster := d.(*Master); isMaster && h.cfg.ha() {
		h.events.add("restart %s: %s", d.name(), firstLine(err.Error()))
		return
	}
	h.violation("restart %s: %v", d.name(), err)
}

// apply applies fault f (its kind drawn) to agent a or to what its kind
// aims at; a fault with nothing to aim at is skipped.
func (h *harness) apply(ctx context.Context, f *Fault, a *Agent, pick int, x *rand.Rand, i uint64) {
	switch f.Kind {
	case MasterKill:
		m := h.target()
		if m == nil {
			return
		}
		f.Agent, f.Target, f.Leader = "", m.Name, h.cfg.ha()
		h.begin(f, "")
		m.kill9()
		sleepCtx(ctx, f.Pause)
		h.startAgain(m)
	case MasterStop:
		m := h.target()
		if m == nil {
			return
		}
		f.Agent, f.Target, f.Leader = "", m.Name, h.cfg.ha()
		f.Pause = stopPause(x)
		h.begin(f, "")
		h.mu.Lock()
		h.frozen[m] = true
		h.mu.Unlock()
		m.signal(syscall.SIGSTOP)
		sleepCtx(ctx, f.Pause)
		m.signal(syscall.SIGCONT)
		h.mu.Lock()
		delete(h.frozen, m)
		h.mu.Unlock()
	case EtcdCut:
		if !h.etcdCut(ctx, f, x) {
			return
		}
	case EtcdMemberKill:
		e := h.etcd[x.IntN(len(h.etcd))]
		f.Agent, f.Target = "", e.Name
		f.Pause = time.Duration(300+x.IntN(9700)) * time.Millisecond
		h.begin(f, "")
		e.kill9()
		sleepCtx(ctx, f.Pause)
		h.startAgain(e)
	case EtcdQuorumLoss:
		perm := x.Perm(len(h.etcd))
		lost := []*EtcdMember{h.etcd[perm[0]], h.etcd[perm[1]]}
		f.Agent, f.Target, f.Leader = "", lost[0].Name+","+lost[1].Name, true
		f.Pause = time.Duration(1000+x.IntN(14000)) * time.Millisecond
		h.begin(f, "")
		for _, e := range lost {
			e.kill9()
		}
		sleepCtx(ctx, f.Pause)
		for _, e := range lost {
			h.startAgain(e)
		}
	case FrameworkKill:
		h.frameworkKill(ctx, f, x, i)
	case LogFlood:
		h.logFlood(ctx, f, x, i)
	case AgentKill:
		h.begin(f, "")
		a.kill9()
		sleepCtx(ctx, f.Pause)
		h.startAgain(a)
	case DiskFull:
		h.begin(f, "")
		undo, err := a.FillStateDir()
		if err != nil {
			h.violation("fill the state dir of %s: %v", a.Name, err)
		}
		sleepCtx(ctx, f.Pause)
		undo()
	case DiskFullRecover:
		if !h.diskFullRecover(ctx, f, a, pick, x) {
			return
		}
	case CheckpointCorrupt:
		c, ok := h.pickRunning(a, pick)
		if !ok {
			return
		}
		f.Task, f.Framework = c.Task(), c.Labels["brim.framework"]
		h.begin(f, " container="+c.ID)
		a.kill9()
		if err := a.CorruptCheckpoint(c.ID); err != nil {
			h.violation("corrupt checkpoint of %s: %v", c.ID, err)
		}
		sleepCtx(ctx, f.Pause)
		h.startAgain(a)
	case ShimKill, ShimStop:
		c, pid := h.pickShim(a, pick)
		if pid == 0 {
			return
		}
		f.Task, f.Framework = c.Task(), c.Labels["brim.framework"]
		if f.Kind == ShimKill {
			f.Pause = 0
			h.begin(f, fmt.Sprintf(" pid=%d", pid))
			_ = syscall.Kill(pid, syscall.SIGKILL)
			break
		}
		h.begin(f, fmt.Sprintf(" pid=%d", pid))
		h.mu.Lock()
		h.stopped[pid] = true
		h.mu.Unlock()
		_ = syscall.Kill(pid, syscall.SIGSTOP)
		sleepCtx(ctx, f.Pause)
		h.resume(pid)
	case LinkReset, LinkBlackHole:
		n := 0
		for _, m := range h.masters {
			n += m.Front.Conns(a.Name)
		}
		h.begin(f, fmt.Sprintf(" links=%d", n))
		h.cutLink(a, f.Kind, f.Pause)
		if !sleepCtx(ctx, f.Pause) {
			h.cutLink(a, f.Kind, 0)
		}
	default:
		return
	}
	h.finish(f)
}

// stopPause is how long master-stop freezes the leader: 1–10 s, and one
// time in four 10–90 s.
func stopPause(x *rand.Rand) time.Duration {
	if x.IntN(4) == 0 {
		return time.Duration(10+x.IntN(81)) * time.Second
	}
	return time.Duration(1000+x.IntN(9000)) * time.Millisecond
}

// etcdCut stops the leader's links to etcd for 1–12 s (beyond the
// session TTL now and then), and 0.3 s into the cut writes to the
// registry through it (POST /weights), as an operator would; false if
// no master leads.
func (h *harness) etcdCut(ctx context.Context, f *Fault, x *rand.Rand) bool {
	m := h.target()
	if m == nil {
		return false
	}
	f.Agent, f.Target, f.Leader = "", m.Name, true
	f.Pause = time.Duration(1000+x.IntN(11000)) * time.Millisecond
	weight := 1 + x.IntN(9)
	h.begin(f, "")
	for _, l := range m.EtcdLinks {
		l.BlackHole("", f.Pause)
	}
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		time.Sleep(300 * time.Millisecond)
		h.registryWrite(m, weight)
	}()
	if !sleepCtx(ctx, f.Pause) {
		for _, l := range m.EtcdLinks {
			l.BlackHole("", 0)
		}
	}
	<-wrote
	return true
}

// registryWrite is `brim weights chaos-w=N` against master m: its answer
// (any status) must come within 30 s.
func (h *harness) registryWrite(m *Master, weight int) {
	body, _ := json.Marshal([]map[string]any{{"role": "chaos-w", "weight": weight}})
	c := &http.Client{Timeout: 30 * time.Second}
	start := time.Now()
	resp, err := c.Post("http://"+m.Listen+"/weights", "application/json", bytes.NewReader(body))
	took := time.Since(start).Round(time.Millisecond)
	if err != nil {
		h.events.add("POST /weights at %s: %v after %v", m.Name, err, took)
		if took >= 30*time.Second {
			h.violation("POST /weights at %s (cut from etcd): no answer within 30 s", m.Name)
		}
		return
	}
	resp.Body.Close()
	h.events.add("POST /weights at %s: %s after %v", m.Name, resp.Status, took)
}

// frameworkKill starts a framework with a 3 s failover timeout, kills it
// (kill -9) within 0.5 s of its task running, and 0.2–1.5 s after its
// failover timeout starts another framework with the same task ID: the
// new task must see none of the old one's updates (CheckForeign) and end
// as its own command does. The old task (1–4 s) mostly ends while its
// framework is gone: its final update, unacknowledged, is retried by the
// agent and may land after the new task started (issue 30's recipe).
func (h *harness) frameworkKill(ctx context.Context, f *Fault, x *rand.Rand, i uint64) {
	task := fmt.Sprintf("c%d-k%d", h.cfg.Seed%10000, i)
	sleep := 1 + x.IntN(4)
	victim := &frameworkRun{task: task, victim: true, failover: 3 * time.Second, sleep: time.Duration(sleep) * time.Second}
	f.Agent, f.Task = "", task
	h.begin(f, "")
	h.launch(victim, fmt.Sprintf("sleep %d; exit 0", sleep))
	if victim.cmd == nil || victim.cmd.Process == nil {
		return
	}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline) && !victim.exited(); {
		if slices.ContainsFunc(victim.output(), func(l string) bool { return strings.Contains(l, ": RUNNING") }) {
			break
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			break
		}
	}
	sleepCtx(ctx, time.Duration(x.IntN(500))*time.Millisecond)
	_ = victim.cmd.Process.Signal(syscall.SIGKILL)
	f.Framework = victim.frameworkID()
	agent := ""
	for _, l := range victim.output() {
		if s, ok := ParseStatus(l); ok && s.Agent != "" {
			agent = s.Agent
		}
	}
	h.events.add("framework-kill: killed %s's framework %s (kill -9 of pid %d), its task on agent %q", task, f.Framework, victim.cmd.Process.Pid, agent)
	if !sleepCtx(ctx, victim.failover+time.Duration(200+x.IntN(1300))*time.Millisecond) {
		return
	}
	reuse := &frameworkRun{task: task, reuse: true, want: []int{0, 0, 3, 7}[x.IntN(4)]}
	s := 15 + x.IntN(11) // past the agent's first retry of the old update (10 s by default)
	reuse.sleep = time.Duration(s) * time.Second
	h.launch(reuse, fmt.Sprintf("sleep %d; exit %d", s, reuse.want))
}

// logFlood starts a framework whose task writes 64–128 MiB to its stdout
// (more than the agent's 64 MiB state dir holds) and waits up to a
// minute for it to end.
func (h *harness) logFlood(ctx context.Context, f *Fault, x *rand.Rand, i uint64) {
	task := fmt.Sprintf("c%d-f%d", h.cfg.Seed%10000, i)
	mib := 64 + x.IntN(65)
	// Its memory holds the whole state dir: a log on the tmpfs is charged
	// to the writer's memory cgroup, and the fault is the full disk, not
	// the OOM killer.
	r := &frameworkRun{task: task, flood: true, mem: 128}
	f.Agent, f.Task = "", task
	h.begin(f, fmt.Sprintf(" bytes=%dMiB", mib))
	// The pipeline's status is head's: a write that fails (a full disk)
	// fails the task.
	h.launch(r, fmt.Sprintf("yes %s | head -c %dM", strings.Repeat("flood", 20), mib))
	if r.done == nil {
		return
	}
	select {
	case <-r.done:
	case <-ctx.Done():
	case <-time.After(time.Minute):
	}
	for _, l := range r.output() {
		if s, ok := ParseStatus(l); ok && s.Agent != "" {
			for _, a := range h.agents {
				if a.ID == s.Agent {
					f.Agent = a.Name
				}
			}
		}
	}
}

// diskFullRecover fills agent a's state dir while a container runs
// there, kills the agent (kill -9) and starts it again on the full
// disk: it must start, serve and adopt what runs. The space returns
// after 1–10 s; an agent that did not start must come back then (the
// supervisor starts it again). False if a runs no container.
func (h *harness) diskFullRecover(ctx context.Context, f *Fault, a *Agent, pick int, x *rand.Rand) bool {
	if _, ok := h.pickRunning(a, pick); !ok {
		return false
	}
	f.Pause = time.Duration(1000+x.IntN(9000)) * time.Millisecond
	h.begin(f, "")
	undo, err := a.FillStateDir()
	if err != nil {
		h.violation("fill the state dir of %s: %v", a.Name, err)
	}
	a.kill9()
	if err := a.Start(); err != nil {
		h.violation("agent %s did not start with its state dir full: %v", a.Name, firstLine(lastLine(a)))
	}
	sleepCtx(ctx, f.Pause)
	undo()
	if err := waitFor(60*time.Second, a.running); err != nil {
		h.violation("agent %s not running 60 s after its state dir had space again", a.Name)
	}
	return true
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

// pickShim chooses a running container of a and returns it and its
// verified shim pid.
func (h *harness) pickShim(a *Agent, pick int) (Container, int) {
	c, ok := h.pickRunning(a, pick)
	if !ok {
		return Container{}, 0
	}
	return c, a.ShimPid(c.ID)
}
