//go:build linux

package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// RestartDelay is how long the supervisor waits before it starts a
// daemon that exited on its own again, as brim-master.service's
// RestartSec.
const RestartDelay = 2 * time.Second

// daemon is a process the supervisor restarts.
type daemon interface {
	exitedAlone() (time.Duration, bool, error)
	isHeld() bool
	Start() error
	name() string
}

func (p *proc) name() string { return p.Name }

// daemons are every process the harness keeps running.
func (h *harness) daemons() []daemon {
	var ds []daemon
	for _, e := range h.etcd {
		ds = append(ds, e)
	}
	for _, m := range h.masters {
		ds = append(ds, m)
	}
	for _, a := range h.agents {
		ds = append(ds, a)
	}
	return ds
}

// supervise restarts, RestartDelay after it exited, a daemon that exited
// without the harness asking (as systemd's Restart=always), until ctx
// ends. Such an exit is a violation, except a master's exit with status
// 1 in HA mode: a leader that lost its etcd session exits 1 by design,
// and so does a master that cannot reach etcd within 5 s at its start.
func (h *harness) supervise(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
		for _, d := range h.daemons() {
			ago, ok, err := d.exitedAlone()
			if !ok || ago < RestartDelay {
				continue
			}
			h.selfExit(d, err)
			h.restart(d)
		}
	}
}

// selfExit records a daemon's exit that the harness did not cause.
func (h *harness) selfExit(d daemon, err error) {
	code := -1
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	_, isMaster := d.(*Master)
	if isMaster && h.cfg.ha() && code == 1 {
		h.events.add("%s exited 1 (lost its leadership, or no etcd at its start): restarted", d.name())
		return
	}
	// One report per daemon and exit status: an agent that cannot start
	// exits again at every restart.
	h.violationKeyed(d.name()+" "+fmt.Sprint(err), "%s exited by itself (%v): %s", d.name(), err, lastLine(d))
}

// lastLine is the last line of a daemon's log that says why it ended.
func lastLine(d daemon) string {
	var path string
	switch x := d.(type) {
	case *Master:
		path = x.logPath
	case *Agent:
		path = x.logPath
	case *EtcdMember:
		path = x.logPath
	}
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(tail(b, 4000)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "level=ERROR") || strings.Contains(lines[i], "error") || strings.HasPrefix(lines[i], "brim") {
			return lines[i]
		}
	}
	return lines[len(lines)-1]
}

// restart starts d again; a failure is an event (the supervisor tries
// again RestartDelay after the exit).
func (h *harness) restart(d daemon) {
	if err := d.Start(); err != nil {
		h.events.add("restart %s: %v", d.name(), firstLine(err.Error()))
		return
	}
	h.events.add("%s started", d.name())
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// masterAt is the master advertised at addr (nil: none).
func (h *harness) masterAt(addr string) *Master {
	for _, m := range h.masters {
		if m.Addr == addr {
			return m
		}
	}
	return nil
}

// reachLoop follows the elections etcd reports: it notes the leader, and
// after each election checks that every framework and agent reaches the
// new leader within the reach bound (CheckReach), polling the leader's
// /state (its frameworks' and agents' connected flags) every 200 ms. It
// ends when elections closes.
func (h *harness) reachLoop(ctx context.Context, elections <-chan Election) {
	var next *Election
	for {
		var e Election
		if next != nil {
			e, next = *next, nil
		} else {
			var ok bool
			if e, ok = <-elections; !ok {
				return
			}
		}
		m := h.masterAt(e.Leader)
		h.mu.Lock()
		h.leader = m
		h.elections = append(h.elections, e)
		h.mu.Unlock()
		if e.Leader == "" {
			h.events.add("etcd names no leader")
			continue
		}
		h.events.add("etcd names leader %s (%s)", nameOf(m), e.Key)
		if m == nil {
			continue
		}
		next = h.watchReach(ctx, e, m, elections)
	}
}

func nameOf(m *Master) string {
	if m == nil {
		return "an unknown master"
	}
	return m.Name
}

// watchReach polls leader m's /state after election e until every
// framework and agent of the run has reached it, the next election
// (returned), or the bound and 10 s more have passed; then it checks
// what it saw.
func (h *harness) watchReach(ctx context.Context, e Election, m *Master, elections <-chan Election) *Election {
	h.mu.Lock()
	var runs []*frameworkRun
	for _, r := range h.runs {
		if !r.victim && !r.exited() {
			runs = append(runs, r)
		}
	}
	h.mu.Unlock()
	w := reachWatch{reached: map[string]time.Time{}, down: map[string]bool{}}
	var next *Election
	watchTil := e.At.Add(h.cfg.ReachBound() + 10*time.Second)
	for len(w.reached) < len(runs)+len(h.agents) && time.Now().Before(watchTil) {
		select {
		case <-ctx.Done():
			return nil
		case x, ok := <-elections:
			if !ok {
				return nil // closed: the checks end
			}
			next = &x
		case <-time.After(200 * time.Millisecond):
		}
		if next != nil {
			break
		}
		h.pollReach(m, runs, w)
	}
	h.judgeReach(e, m, next, runs, w)
	return next
}

// reachWatch is what watchReach has seen: when each run (by task) or
// agent (by name) was first listed connected, and the agents seen down.
type reachWatch struct {
	reached map[string]time.Time
	down    map[string]bool
}

// pollReach reads leader m's /state once and notes the runs and agents
// it lists connected.
func (h *harness) pollReach(m *Master, runs []*frameworkRun, w reachWatch) {
	for _, a := range h.agents {
		if !a.running() {
			w.down[a.Name] = true
		}
	}
	// A client the answer lists connected reached the leader before
	// the request was answered and after the previous one: the
	// request's start is the bound in its favour.
	now := time.Now()
	st, err := m.State()
	if err != nil {
		return
	}
	conn := map[string]bool{}
	for _, f := range st.Frameworks {
		if f.Connected {
			conn[f.ID] = true
		}
	}
	for _, a := range st.Agents {
		if a.Connected {
			conn[a.ID] = true
		}
	}
	for _, r := range runs {
		if id := r.frameworkID(); id != "" && conn[id] && w.reached[r.task].IsZero() {
			w.reached[r.task] = now
		}
	}
	for _, a := range h.agents {
		if conn[a.ID] && w.reached[a.Name].IsZero() {
			w.reached[a.Name] = now
		}
	}
}

// judgeReach checks what watchReach saw after election e of m
// (CheckReach) and notes the delays.
func (h *harness) judgeReach(e Election, m *Master, next *Election, runs []*frameworkRun, w reachWatch) {
	var nextAt time.Time
	if next != nil {
		nextAt = next.At
	}
	var clients []Reach
	byName := map[string]*frameworkRun{}
	for _, r := range runs {
		c := Reach{Name: "framework of task " + r.task, Reached: w.reached[r.task]}
		byName[c.Name] = r
		if r.exited() {
			r.mu.Lock()
			c.Left = r.end
			r.mu.Unlock()
		}
		clients = append(clients, c)
	}
	for _, a := range h.agents {
		clients = append(clients, Reach{Name: "agent " + a.Name, Agent: a.Name, Reached: w.reached[a.Name], Down: w.down[a.Name]})
	}
	for _, b := range CheckReach(e, m.Name, nextAt, h.cfg.ReachBound(), h.faultsSoFar(), clients) {
		// A late framework's lines, timed from the election, say where
		// it waited.
		for name, r := range byName {
			if strings.HasPrefix(b, name+" ") {
				var lines []string
				for _, l := range r.timed() {
					lines = append(lines, fmt.Sprintf("%+.2fs %s", l.At.Sub(e.At).Seconds(), l.Text))
				}
				b += ":\n" + strings.Join(lines, "\n")
			}
		}
		h.violation("%s", b)
	}
	var fw, ag []string
	h.mu.Lock()
	for _, c := range clients {
		if c.Reached.IsZero() {
			continue
		}
		d := max(c.Reached.Sub(e.At), 0)
		if c.Agent != "" {
			h.agentReach = append(h.agentReach, d)
			ag = append(ag, d.Round(10*time.Millisecond).String())
		} else {
			h.reach = append(h.reach, d)
			fw = append(fw, d.Round(10*time.Millisecond).String())
		}
	}
	h.mu.Unlock()
	h.events.add("reach of leader %s after its election: frameworks %v, agents %v", m.Name, fw, ag)
}
