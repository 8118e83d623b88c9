package main

import (
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/brimnode/brim/demand"
	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/master/demandplan"
	"github.com/brimnode/brim/resources"
)

// The modes, run on the same trace and cluster.
const (
	modeDRF     = "drf"     // plain DRF: timing ignored
	modePlanned = "planned" // the planner, no preemption, no lending
	modePreempt = "preempt" // the planner with preemption and lending
)

// result is one mode's run of one seed.
type result struct {
	mode                              string
	seed                              uint64
	strictTotal, strictAcc, strictMet int
	looseTotal, looseStarted          int
	looseDelays                       []time.Duration
	util, goodput                     float64
	lostCPU, lostRevCPU               float64 // cpu·s
	preempted                         int     // tasks
	submitWall, submitCPU             []time.Duration
	cycleWall, cycleCPU               []time.Duration
	failed                            map[string]int
	missed                            map[string]int // strict demands not met, by why
	wall                              time.Duration
}

// run steps one mode through the day on the simulated clock: each step
// (the master's allocation interval) ends the tasks due, lets the mode
// act (submissions, the planner's cycle), lets background work arrive,
// runs DRF's cycle and samples what is busy.
func run(cfg config, mode string, seed uint64, tr []*entry) result {
	begin := time.Now()
	c := newCluster(cfg, seed)
	must(c.alloc.AddFramework(allocator.FrameworkInfo{ID: "timed", Roles: []string{"timed"}, SuppressedRoles: []string{"timed"}}, nil))
	var m modeRunner
	if mode == modeDRF {
		m = newDRF(c, tr)
	} else {
		m = newPlanned(c, tr, mode == modePreempt)
	}
	end := t0.Add(cfg.hours)
	for ; !c.clock.t.After(end); c.clock.t = c.clock.t.Add(cfg.step) {
		c.endTasks()
		m.step()
		c.arrivals()
		for _, o := range c.alloc.Allocate() {
			if o.FrameworkID == "timed" {
				m.offer(o)
			} else {
				c.fill(o)
			}
		}
		c.sample()
	}
	r := m.result()
	r.mode, r.seed, r.wall = mode, seed, time.Since(begin)
	r.util = c.busy / c.capacity
	r.goodput = (c.busy*cfg.step.Seconds() - c.lostCPU) / (c.capacity * cfg.step.Seconds())
	r.lostCPU, r.lostRevCPU, r.preempted = c.lostCPU, c.lostRevCPU, c.preempted
	return r
}

type modeRunner interface {
	step()
	offer(o allocator.Offer)
	result() result
}

var oneCPU = resources.MustParse("cpus:1").CPUs()

var debug = os.Getenv("DEMANDBENCH_DEBUG") != ""

// drfMode is plain DRF: each demand's tasks join the queue of a DRF
// framework ("timed") at the demand's desired start (an OrderBy demand:
// once submitted and its predecessor's tasks all ended); the framework
// launches every queued task an offer fits, in queue order (first fit: a
// task that does not fit does not block the ones behind it), and gives
// back the rest. A demand starts when its first task does, a gang when
// its last one does (it runs whole).
type drfMode struct {
	c       *cluster
	tr      []*entry
	byStart []*entry
	next    int
	queue   []*pending
	first   map[string]time.Time // first task started
	last    map[string]time.Time // last task started
	done    map[string]time.Time // last task ended
	left    map[string]int
	after   []*entry // OrderBy successors, by submission, not queued yet
	desired map[string]time.Time
}

type pending struct {
	e    *entry
	left int
}

func newDRF(c *cluster, tr []*entry) *drfMode {
	m := &drfMode{c: c, tr: tr, first: map[string]time.Time{}, last: map[string]time.Time{}, done: map[string]time.Time{},
		left: map[string]int{}, desired: map[string]time.Time{}}
	for _, e := range byStart(tr) {
		if e.orderBy == "" {
			m.byStart = append(m.byStart, e)
		}
	}
	for _, e := range tr {
		if e.orderBy != "" {
			m.after = append(m.after, e)
		}
	}
	c.onEnd = func(t *task) {
		if t.demand == "" {
			return
		}
		if m.left[t.demand]--; m.left[t.demand] == 0 {
			m.done[t.demand] = c.clock.t
		}
	}
	return m
}

// lastOfAll reports whether every task of e started.
func (m *drfMode) lastOfAll(e *entry) bool {
	for _, p := range m.queue {
		if p.e == e {
			return false
		}
	}
	_, queued := m.desired[e.id]
	return queued
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (m *drfMode) enqueue(e *entry, at time.Time) {
	m.queue = append(m.queue, &pending{e: e, left: e.tasks})
	m.left[e.id] = e.tasks
	m.desired[e.id] = at
}

func (m *drfMode) step() {
	now := m.c.clock.t
	for m.next < len(m.byStart) && !m.byStart[m.next].start.After(now) {
		m.enqueue(m.byStart[m.next], m.byStart[m.next].start)
		m.next++
	}
	kept := m.after[:0]
	for _, e := range m.after {
		if at, done := m.done[e.orderBy]; done && !e.submit.After(now) {
			m.enqueue(e, maxTime(at, e.submit))
		} else {
			kept = append(kept, e)
		}
	}
	m.after = kept
	if len(m.queue) > 0 {
		m.c.alloc.Revive("timed")
	} else {
		m.c.alloc.Suppress("timed")
	}
}

func (m *drfMode) offer(o allocator.Offer) {
	now := m.c.clock.t
	left := o.Resources
	kept := m.queue[:0]
	for _, p := range m.queue {
		if left.CPUs() < oneCPU {
			kept = append(kept, p)
			continue
		}
		per := p.e.per()
		for p.left > 0 && left.Contains(per) {
			left = left.Subtract(per)
			if _, ok := m.first[p.e.id]; !ok {
				m.first[p.e.id] = now
			}
			m.last[p.e.id] = now
			m.c.launch("timed", "timed", o.AgentID, per, p.e.actual, p.e.id, p.e.cpus)
			p.left--
		}
		if p.left > 0 {
			kept = append(kept, p)
		}
	}
	m.queue = kept
	m.c.giveBack(o, left)
}

func (m *drfMode) result() result {
	r := result{failed: map[string]int{}, missed: map[string]int{}}
	for _, e := range m.tr {
		first, started := m.first[e.id]
		if e.strict {
			r.strictTotal++
			r.strictAcc++ // DRF admits everything
			fin, done := m.done[e.id]
			inWindow := started && !m.last[e.id].After(e.start.Add(e.window))
			switch {
			case done && inWindow && (e.deadline.IsZero() || !fin.After(e.deadline)):
				r.strictMet++
			case !started:
				r.missed["never started"]++
			case !inWindow && m.left[e.id] > 0 && !m.last[e.id].After(e.start.Add(e.window)):
				r.missed["not all started by the end"]++
			case !inWindow:
				r.missed["started after its window"]++
			case !done:
				r.missed["still running at the end"]++
			default:
				r.missed["finished late"]++
			}
			continue
		}
		r.looseTotal++
		if e.gang {
			first = m.last[e.id]
			started = started && m.left[e.id] >= 0 && m.lastOfAll(e)
		}
		if started {
			r.looseStarted++
			r.looseDelays = append(r.looseDelays, max(0, first.Sub(m.desired[e.id])))
		}
	}
	return r
}

// plannedMode runs the master's planner (package demandplan, the code
// the master calls) on the simulated cluster; the demands' framework
// launches on every offer of a demand at once.
type plannedMode struct {
	c       *cluster
	p       *demandplan.Planner
	tr      []*entry
	next    int
	entries map[string]*entry
	r       result
	offers  int
}

func newPlanned(c *cluster, tr []*entry, preempt bool) *plannedMode {
	m := &plannedMode{c: c, tr: tr, entries: map[string]*entry{}, r: result{failed: map[string]int{}, missed: map[string]int{}}}
	lead, loose := c.cfg.lead, c.cfg.looseLead
	if preempt {
		lead, loose = c.cfg.leadPreempt, c.cfg.looseLeadLend
	}
	m.p = demandplan.New(demandplan.Options{Lead: lead, LooseLead: loose, PickUp: time.Hour,
		Preempt: preempt, Lend: preempt, ReclaimAhead: c.cfg.reclaim, Spread: c.cfg.spread,
		NewID: func() string { m.offers++; return fmt.Sprintf("o%d", m.offers) }}, c.alloc, simView{c})
	for _, a := range c.agents {
		m.p.SetAgent(a, agentTotal())
	}
	c.onEnd = func(t *task) { m.apply(m.p.TaskEnded(t.id, t.fw, !t.killed, c.clock.t)) }
	return m
}

// apply carries out the planner's effects on the simulated cluster.
func (m *plannedMode) apply(eff demandplan.Effects) {
	for _, err := range eff.Errs {
		must(err)
	}
	if debug {
		for _, ch := range eff.Changes {
			if ch.From == demand.Allocating && ch.To == demand.Failed {
				m.explain(ch.Demand)
			}
		}
	}
	for _, o := range eff.Offers {
		d, err := m.p.Get(o.Demand)
		must(err)
		e := m.entries[o.Demand]
		per := d.Spec().Resources
		var ids []string
		for n := demandplan.Units(o.Resources, per); n > 0; n-- {
			ids = append(ids, m.c.launch(o.Framework, o.Role, o.Agent, per, e.actual, o.Demand, e.cpus).id)
		}
		if left := o.Resources.Subtract(demandplan.Scale(per, len(ids))); !left.IsEmpty() {
			zero := time.Duration(0)
			must(m.c.alloc.RecoverRole(o.Framework, o.Role, o.Agent, left, &zero))
		}
		m.apply(m.p.Launched([]string{o.ID}, ids, m.c.clock.t))
	}
	for _, k := range eff.Kill {
		m.c.kill(k.Task, k.Preempted)
	}
}

// explain prints where a demand that failed at its start stood.
func (m *plannedMode) explain(d *demand.Demand) {
	fmt.Fprintf(os.Stderr, "%s %s failed %s: %s strict=%v per %s\n", m.c.clock.t.Format(time.TimeOnly), d.ID, d.Reason, d.Message, d.Timing().StartStrict, d.Spec().Resources)
	for _, s := range d.Placement {
		fmt.Fprintf(os.Stderr, "  slot %s x%d handed %d: held %s, all holds %s, overdraft %s, lent %s\n", s.Agent, s.Tasks, s.Handed,
			m.c.alloc.Held(s.Agent, d.ID), m.c.alloc.HeldOn(s.Agent, ""), m.c.alloc.Overdraft(s.Agent), m.c.alloc.Lent(s.Agent))
		for _, t := range m.c.byAgent[s.Agent] {
			if t.demand != "" || t.killed {
				fmt.Fprintf(os.Stderr, "    task %s %s demand=%q killed=%v cpus %d launched %s ends %s\n", t.id, t.fw, t.demand, t.killed, t.cpus, t.launched.Format(time.TimeOnly), t.end.Format(time.TimeOnly))
			}
		}
	}
}

func (m *plannedMode) step() {
	now := m.c.clock.t
	for m.next < len(m.tr) && !m.tr[m.next].submit.After(now) {
		e := m.tr[m.next]
		m.next++
		m.entries[e.id] = e
		spec, err := demand.ParseSpec(e.doc())
		must(err)
		spec.Framework, spec.Role = "timed", "timed"
		w0, c0 := time.Now(), threadCPU()
		_, eff, err := m.p.Submit(now, []*demand.Spec{spec})
		m.r.submitWall = append(m.r.submitWall, time.Since(w0))
		m.r.submitCPU = append(m.r.submitCPU, threadCPU()-c0)
		if err != nil {
			m.r.failed["refused: "+err.Error()]++
			continue
		}
		m.apply(eff)
	}
	w0, c0 := time.Now(), threadCPU()
	eff := m.p.Cycle(now)
	w1, c1 := time.Since(w0), threadCPU()-c0
	m.apply(eff)
	w0, c0 = time.Now(), threadCPU()
	eff = m.p.TopUp(now)
	m.r.cycleWall = append(m.r.cycleWall, w1+time.Since(w0))
	m.r.cycleCPU = append(m.r.cycleCPU, c1+threadCPU()-c0)
	m.apply(eff)
	if debug && now.Sub(t0)%(30*time.Minute) == 0 {
		m.idle()
	}
}

// idle prints, for debugging, what holds keep idle by kind of demand.
func (m *plannedMode) idle() {
	now := m.c.clock.t
	by := map[string]float64{}
	for _, d := range m.p.List() {
		if d.State.Final() {
			continue
		}
		kind := d.State.String()
		if d.Timing().StartStrict {
			kind = "strict " + kind
		} else {
			kind = "loose " + kind
		}
		if now.Before(d.Start) {
			kind += " before start"
		} else {
			kind += " after start"
		}
		for _, s := range d.Placement {
			by[kind] += float64(m.c.alloc.Held(s.Agent, d.ID).CPUs()) / 1000
		}
	}
	lent := 0.0
	for _, a := range m.c.agents {
		lent += float64(m.c.alloc.Lent(a).CPUs()) / 1000
	}
	fmt.Fprintf(os.Stderr, "%s held cpus %v lent %.0f\n", now.Format(time.TimeOnly), by, lent)
}

func (m *plannedMode) offer(o allocator.Offer) { m.c.giveBack(o, o.Resources) }

func (m *plannedMode) result() result {
	r := m.r
	ended := map[string]time.Time{}
	for _, d := range m.p.List() {
		if d.State.Final() {
			ended[d.ID] = d.EndedAt
		}
	}
	for _, d := range m.p.List() {
		e := m.entries[d.ID]
		accepted := len(d.History) == 0 || d.History[0].To != demand.Failed
		if d.State == demand.Failed {
			r.failed[string(d.Reason)]++
		}
		if e.strict {
			r.strictTotal++
			if accepted {
				r.strictAcc++
			}
			inWindow := !d.AllocatedAt.IsZero() && !d.AllocatedAt.After(e.start.Add(e.window))
			switch {
			case d.State == demand.Finished && inWindow && (e.deadline.IsZero() || !d.EndedAt.After(e.deadline)):
				r.strictMet++
			case d.State == demand.Failed:
				r.missed["failed: "+string(d.Reason)]++
				if debug {
					fmt.Fprintf(os.Stderr, "strict %s failed: submit %s start %s window %s tasks %d x %d gang %v on %v: %+v\n", d.ID, e.submit, e.start, e.window, e.tasks, e.cpus, e.gang, d.Placement, d.History)
				}
			case !d.State.Final():
				r.missed["still "+d.State.String()+" at the end"]++
			default:
				r.missed["finished late"]++
			}
			continue
		}
		r.looseTotal++
		desired := e.start
		if e.orderBy != "" {
			at, ok := ended[e.orderBy]
			if !ok {
				continue // its predecessor never ended: never due
			}
			desired = maxTime(at, e.submit)
		}
		if !d.AllocatedAt.IsZero() {
			r.looseStarted++
			r.looseDelays = append(r.looseDelays, max(0, d.AllocatedAt.Sub(desired)))
			if debug && d.AllocatedAt.Sub(desired) > time.Hour {
				fmt.Fprintf(os.Stderr, "late loose %s: desired %s orderBy %q submit %s start %s window %s tasks %d x %d gang %v: %+v\n", d.ID, desired, e.orderBy, e.submit, e.start, e.window, e.tasks, e.cpus, e.gang, d.History)
			}
		}
	}
	return r
}

// pct is the p-quantile of ds (0 for none).
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}
