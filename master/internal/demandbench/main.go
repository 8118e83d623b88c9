// Command demandbench replays one simulated day of time-aware demands on
// a simulated clock, twice in the same run: planned (the demand package's
// Book and Plan admitting and placing demands, capacity held from DRF
// through the allocator's hold hook and handed over at the start) and
// plain DRF (timing ignored: each demand's tasks join a DRF framework's
// queue at its desired start). Untimed DRF frameworks fill whatever is
// left in both. It prints acceptance, deadlines met, start delay of loose
// demands, utilization and the planner's time per submitted demand.
//
// Everything is simulated (agents, tasks, frameworks): it measures the
// policy and the planner, not the wire. Figures are printed side by side;
// nothing here asserts on wall time.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"time"

	"github.com/brimnode/brim/demand"
	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/resources"
)

var (
	nAgents  = flag.Int("agents", 1000, "simulated agents (cpus:32;mem:131072 each)")
	nDemands = flag.Int("demands", 5000, "demands over the simulated day")
	seed     = flag.Uint64("seed", 1, "trace seed")
	lead     = flag.Duration("lead", 30*time.Minute, "hold lead; the filler's tasks last at most this long")
	looseLd  = flag.Duration("loose-lead", time.Second, "hold lead of loose starts (0: -lead; 1s: from the start)")
	step     = flag.Duration("step", time.Minute, "simulated allocation interval")
	cpuprof  = flag.String("cpuprofile", "", "write a CPU profile of the planned run")
)

var t0 = time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)

// entry is one demand of the trace.
type entry struct {
	id       string
	submit   time.Time
	strict   bool
	start    time.Time // desired start
	window   time.Duration
	length   time.Duration // planned
	actual   time.Duration // how long its tasks really run (≤ length)
	deadline time.Time     // zero: none
	tasks    int
	cpus     int
	gang     bool
	orderBy  string
}

func (e *entry) per() resources.Resources {
	return resources.MustParse(fmt.Sprintf("cpus:%d;mem:%d", e.cpus, 4096*e.cpus))
}

func (e *entry) doc() []byte {
	strategy := map[bool]string{true: "strict", false: "loose"}[e.strict]
	m := map[string]any{
		"DemandID":  e.id,
		"Resources": e.per().String(),
		"Tasks":     e.tasks,
		"Gang":      e.gang,
		"Start":     map[string]any{"Time": []any{e.start.Format(time.RFC3339), "+" + fmt.Sprint(int(e.window.Seconds())) + "s"}, "Strategy": strategy},
		"Duration":  map[string]any{"Time": []any{nil, "+" + fmt.Sprint(int(e.length.Seconds())) + "s"}, "Strategy": strategy},
	}
	if !e.deadline.IsZero() {
		m["Deadline"] = map[string]any{"Time": []any{nil, e.deadline.Format(time.RFC3339)}, "Strategy": strategy}
	}
	if e.orderBy != "" {
		m["OrderBy"] = e.orderBy
		delete(m, "Start")
	}
	b, _ := json.Marshal(m)
	return b
}

func trace(r *rand.Rand) []*entry {
	var out []*entry
	for i := range *nDemands {
		e := &entry{id: fmt.Sprintf("d%05d", i)}
		e.submit = t0.Add(time.Duration(r.Int64N(int64(22 * time.Hour))))
		e.strict = r.IntN(2) == 0
		e.start = e.submit.Add(5*time.Minute + time.Duration(r.Int64N(int64(2*time.Hour)))).Truncate(time.Second)
		e.window = time.Duration(5+r.IntN(25)) * time.Minute
		e.length = time.Duration(10+r.IntN(110)) * time.Minute
		e.actual = time.Duration(float64(e.length) * (0.7 + 0.3*r.Float64())).Truncate(time.Second)
		if e.strict || r.IntN(2) == 0 {
			e.deadline = e.start.Add(e.window + time.Duration(float64(e.length)*(1.2+0.8*r.Float64()))).Truncate(time.Second)
		}
		e.tasks = 1 + r.IntN(16)
		e.cpus = []int{1, 2, 4, 8}[r.IntN(4)]
		e.gang = r.IntN(2) == 0
		if !e.strict && i > 0 && r.IntN(10) == 0 {
			e.orderBy = out[r.IntN(len(out))].id // a workflow step after an earlier demand
			if out[slices.IndexFunc(out, func(x *entry) bool { return x.id == e.orderBy })].submit.After(e.submit) {
				e.orderBy = ""
			}
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].submit.Before(out[j].submit) })
	return out
}

type simClock struct{ t time.Time }

func (c *simClock) Now() time.Time { return c.t }

type task struct {
	fw, role, agent string
	res             resources.Resources
	end             time.Time
	demand          string
	cpus            int
}

type result struct {
	submitted, accepted                  int
	strictAccepted, strictMet            int
	looseAllocated                       int
	looseDelay                           time.Duration
	utilization                          float64
	planP50, planP99, planMax            time.Duration
	cpuP50, cpuP99                       time.Duration // the planner's own CPU time
	demandsFinished, demandsFailedReason map[string]int
}

const fillers = 8

type sim struct {
	planned bool
	clock   *simClock
	alloc   *allocator.Allocator
	tasks   []*task
	agents  []string
	total   int // cpus
	rng     *rand.Rand
	// planned mode
	book    *demand.Book
	entries map[string]*entry
	live    map[string]int
	holds   map[string]map[string]bool     // demand → agents holding for it
	own     map[string]resources.Resources // demands' own tasks per agent (refreshOwn)
	// plain mode: pending tasks of demands, FIFO
	queue   []*pending
	started map[string]time.Time
	done    map[string]time.Time
	left    map[string]int
}

type pending struct {
	e    *entry
	left int
}

func newSim(planned bool) *sim {
	s := &sim{planned: planned, clock: &simClock{t: t0}, rng: rand.New(rand.NewPCG(*seed, 7)), entries: map[string]*entry{}, live: map[string]int{}, holds: map[string]map[string]bool{},
		started: map[string]time.Time{}, done: map[string]time.Time{}, left: map[string]int{}}
	a, err := allocator.New(allocator.Options{Clock: s.clock, Seed: int64(*seed)})
	must(err)
	s.alloc = a
	plan := demand.NewPlan()
	for i := range *nAgents {
		id := fmt.Sprintf("a%04d", i)
		tot := resources.MustParse("cpus:32;mem:131072")
		must(a.AddAgent(allocator.AgentInfo{ID: id, Total: tot}, nil))
		plan.SetAgent(id, tot)
		s.agents = append(s.agents, id)
		s.total += 32
	}
	for i := range fillers {
		must(a.AddFramework(allocator.FrameworkInfo{ID: fmt.Sprintf("filler%d", i), Roles: []string{"batch"}}, nil))
	}
	// The demands' framework: in planned mode it is handed capacity only
	// (suppressed for DRF); in plain mode revived while it has a queue.
	must(a.AddFramework(allocator.FrameworkInfo{ID: "timed", Roles: []string{"timed"}, SuppressedRoles: []string{"timed"}}, nil))
	s.book = demand.NewBook(demand.Config{Lead: *lead, LooseLead: *looseLd, PickUp: time.Hour}, plan)
	s.own = map[string]resources.Resources{}
	plan.SetLoadFunc(s.drfLoad)
	plan.SetHeldFunc(s.alloc.HeldOn)
	return s
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "demandbench:", err)
		os.Exit(1)
	}
}

func (s *sim) launch(fw, role, agent string, res resources.Resources, d time.Duration, dem string, cpus int) {
	s.tasks = append(s.tasks, &task{fw: fw, role: role, agent: agent, res: res, end: s.clock.t.Add(d), demand: dem, cpus: cpus})
}

func (s *sim) endTasks() {
	zero := time.Duration(0)
	now := s.clock.t
	kept := s.tasks[:0]
	for _, t := range s.tasks {
		if t.end.After(now) {
			kept = append(kept, t)
			continue
		}
		must(s.alloc.RecoverRole(t.fw, t.role, t.agent, t.res, &zero))
		if t.demand == "" {
			continue
		}
		if s.planned {
			s.live[t.demand]--
			d, _ := s.book.Get(t.demand)
			if s.live[t.demand] == 0 && d.Handed >= d.Spec().Tasks {
				s.apply(s.book.Ended(t.demand, true, "done", now))
			}
		} else if s.left[t.demand]--; s.left[t.demand] == 0 {
			s.done[t.demand] = now
		}
	}
	s.tasks = kept
}

func (s *sim) apply(cs []demand.Change, _ error) {
	for _, c := range cs {
		if c.To.Final() {
			s.release(c.Demand.ID, nil)
		}
	}
}

// demandCycle is the master's demandCycleLocked on the simulated
// cluster: hold, then hand over and launch at once (the framework claims
// immediately).
//
//nolint:gocyclo // split under issue 31 by the demandbench work; remove with the split
func (s *sim) demandCycle() {
	now := s.clock.t
	s.apply(s.book.Tick(now), nil)
	for _, d := range s.book.ByUrgency() {
		if d.State != demand.Allocating && d.State != demand.Allocated && d.State != demand.Monitoring {
			continue
		}
		spec := d.Spec()
		if d.Handed >= spec.Tasks {
			s.release(d.ID, nil) // what is left is less than a task
			continue
		}
		if s.book.Postpone(d.ID, now) {
			s.release(d.ID, func(a string) bool {
				return !slices.ContainsFunc(d.Placement, func(sl demand.Slot) bool { return sl.Agent == a })
			})
		}
		need := spec.Tasks - d.Handed
		held := map[string]int{}
		for _, sl := range d.Placement {
			if need <= 0 {
				break
			}
			want := min(sl.Unhanded(), need) // its tasks already there count
			if want == 0 {
				continue
			}
			have := units(s.alloc.Held(sl.Agent, d.ID), spec.Resources)
			if have < want {
				_, err := s.alloc.Hold(sl.Agent, d.ID, shortfall(spec.Resources, want, s.alloc.Held(sl.Agent, d.ID)))
				must(err)
				s.held(d.ID, sl.Agent)
				have = units(s.alloc.Held(sl.Agent, d.ID), spec.Resources)
				if have < want && d.Timing().StartStrict {
					for id, ags := range s.holds { // loose holds yield to a strict start
						if o, _ := s.book.Get(id); o != nil && !o.Timing().StartStrict && ags[sl.Agent] {
							s.alloc.Release(sl.Agent, id)
							delete(ags, sl.Agent)
						}
					}
					_, _ = s.alloc.Hold(sl.Agent, d.ID, shortfall(spec.Resources, want, s.alloc.Held(sl.Agent, d.ID)))
					have = units(s.alloc.Held(sl.Agent, d.ID), spec.Resources)
				}
			}
			if have = min(have, want); have > 0 {
				held[sl.Agent] = have
				need -= have
			}
		}
		if now.Before(d.Start) {
			continue
		}
		n := 0
		for _, u := range held {
			n += u
		}
		s.apply(s.book.Held(d.ID, d.Handed+n, now))
		if d.State != demand.Allocated && d.State != demand.Monitoring {
			if d.Relaxed {
				if moved, _ := s.book.Replace(d.ID, now); moved {
					s.release(d.ID, func(a string) bool {
						return !slices.ContainsFunc(d.Placement, func(sl demand.Slot) bool { return sl.Agent == a })
					})
				}
			}
			continue
		}
		e := s.entries[d.ID]
		for a, u := range held {
			o, err := s.alloc.Grant(a, d.ID, "timed", "timed", scale(spec.Resources, u))
			must(err)
			_ = o
			d.Hand(a, u)
			for range u {
				s.launch("timed", "timed", a, spec.Resources, e.actual, d.ID, e.cpus)
				s.live[d.ID]++
			}
		}
		if d.State == demand.Allocated {
			s.apply(s.book.Claim(d.ID, now))
		}
		if end := now.Add(e.length); !d.End.IsZero() && end.After(d.End) {
			s.book.Plan().Extend(d.ID, end) // tasks handed late run past the booking
		}
	}
	for _, d := range s.book.ByUrgency() { // what loose demands freed goes to strict starts first
		if !d.Timing().StartStrict {
			break
		}
		if d.State != demand.Allocating {
			continue
		}
		spec := d.Spec()
		for _, sl := range d.Placement {
			if units(s.alloc.Held(sl.Agent, d.ID), spec.Resources) < sl.Tasks {
				_, err := s.alloc.Hold(sl.Agent, d.ID, shortfall(spec.Resources, sl.Tasks, s.alloc.Held(sl.Agent, d.ID)))
				must(err)
				s.held(d.ID, sl.Agent)
			}
		}
	}
}

func (s *sim) drfCycle() {
	filler := resources.MustParse("cpus:1;mem:4096")
	for _, o := range s.alloc.Allocate() {
		left := o.Resources
		if o.FrameworkID == "timed" {
			for len(s.queue) > 0 {
				p := s.queue[0]
				per := p.e.per()
				if !left.Contains(per) {
					break
				}
				left = left.Subtract(per)
				if _, ok := s.started[p.e.id]; !ok {
					s.started[p.e.id] = s.clock.t
				}
				s.launch("timed", "timed", o.AgentID, per, p.e.actual, p.e.id, p.e.cpus)
				if p.left--; p.left == 0 {
					s.queue = s.queue[1:]
				}
			}
		} else {
			for left.Contains(filler) {
				left = left.Subtract(filler)
				s.launch(o.FrameworkID, o.Role, o.AgentID, filler, time.Duration(5+s.rng.IntN(int(*lead/time.Minute)-5))*time.Minute, "", 1)
			}
		}
		if !left.IsEmpty() {
			refuse := time.Duration(0)
			must(s.alloc.RecoverRole(o.FrameworkID, o.Role, o.AgentID, left, &refuse))
		}
	}
}

//nolint:gocyclo // split under issue 31 by the demandbench work; remove with the split
func run(planned bool, tr []*entry) result {
	s := newSim(planned)
	res := result{demandsFinished: map[string]int{}, demandsFailedReason: map[string]int{}}
	var planTimes, planCPU []time.Duration
	next := 0
	var used, capacity float64
	end := t0.Add(28 * time.Hour)
	byStart := slices.Clone(tr)
	sort.Slice(byStart, func(i, j int) bool { return byStart[i].start.Before(byStart[j].start) })
	nextStart := 0
	for ; !s.clock.t.After(end); s.clock.t = s.clock.t.Add(*step) {
		now := s.clock.t
		s.endTasks()
		if planned {
			for next < len(tr) && !tr[next].submit.After(now) {
				e := tr[next]
				next++
				res.submitted++
				s.entries[e.id] = e
				spec, err := demand.ParseSpec(e.doc())
				must(err)
				// As the master does before Submit (not timed: the master
				// walks its demands' tasks only, the simulation every task).
				s.refreshOwn()
				begin, cpu0 := time.Now(), threadCPU()
				_, cs, err := s.book.Submit(e.submit, []*demand.Spec{spec})
				planTimes = append(planTimes, time.Since(begin))
				planCPU = append(planCPU, threadCPU()-cpu0)
				if err != nil {
					res.demandsFailedReason["refused: "+err.Error()[:20]]++
					continue
				}
				s.apply(cs, nil)
			}
			s.refreshOwn()
			s.demandCycle()
		} else {
			for nextStart < len(byStart) && !byStart[nextStart].start.After(now) {
				e := byStart[nextStart]
				nextStart++
				res.submitted++
				s.queue = append(s.queue, &pending{e: e, left: e.tasks})
				s.left[e.id] = e.tasks
			}
		}
		if !planned {
			if len(s.queue) > 0 {
				s.alloc.Revive("timed")
			} else {
				s.alloc.Suppress("timed")
			}
		}
		s.drfCycle()
		if now.After(t0.Add(2*time.Hour)) && now.Before(t0.Add(22*time.Hour)) { // steady state
			busy := 0
			for _, t := range s.tasks {
				busy += t.cpus
			}
			used += float64(busy)
			capacity += float64(s.total)
		}
	}
	res.utilization = used / capacity
	if planned {
		for _, d := range s.book.List() {
			e := s.entries[d.ID]
			acc := len(d.History) == 0 || d.History[0].To != demand.Failed
			if acc {
				res.accepted++
			}
			if d.State == demand.Failed {
				res.demandsFailedReason[string(d.Reason)]++
			} else {
				res.demandsFinished[d.State.String()]++
			}
			if e.strict && acc {
				res.strictAccepted++
				if d.State == demand.Finished && (e.deadline.IsZero() || !d.EndedAt.After(e.deadline)) {
					res.strictMet++
				}
			}
			if !e.strict && !d.AllocatedAt.IsZero() {
				res.looseAllocated++
				want := e.start
				if e.orderBy != "" {
					want = d.Start
				}
				res.looseDelay += max(0, d.AllocatedAt.Sub(want))
			}
		}
		slices.Sort(planTimes)
		res.planP50 = planTimes[len(planTimes)/2]
		res.planP99 = planTimes[len(planTimes)*99/100]
		res.planMax = planTimes[len(planTimes)-1]
		slices.Sort(planCPU)
		res.cpuP50, res.cpuP99 = planCPU[len(planCPU)/2], planCPU[len(planCPU)*99/100]
	} else {
		res.accepted = res.submitted // DRF admits everything
		for _, e := range tr {
			st, ok := s.started[e.id]
			fin, done := s.done[e.id]
			if e.strict {
				res.strictAccepted++
				if ok && done && !st.After(e.start.Add(e.window)) && (e.deadline.IsZero() || !fin.After(e.deadline)) {
					res.strictMet++
				}
			} else if ok {
				res.looseAllocated++
				res.looseDelay += max(0, st.Sub(e.start))
			}
		}
	}
	return res
}

func main() {
	flag.Parse()
	// The planner runs on this thread: its CPU time (threadCPU) does not
	// count the time other processes of a shared machine take from it,
	// which its wall time does.
	runtime.LockOSThread()
	tr := trace(rand.New(rand.NewPCG(*seed, 3)))
	fmt.Printf("demandbench: %d agents x cpus:32, %d demands over a simulated day (step %s, lead %s, loose lead %s), %d untimed DRF frameworks filling the rest\n",
		*nAgents, len(tr), *step, *lead, *looseLd, fillers)
	w0 := time.Now()
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		must(err)
		must(pprof.StartCPUProfile(f))
	}
	p := run(true, tr)
	pprof.StopCPUProfile()
	w1 := time.Now()
	b := run(false, tr)
	w2 := time.Now()
	pct := func(a, b int) float64 {
		if b == 0 {
			return 0
		}
		return 100 * float64(a) / float64(b)
	}
	mean := func(d time.Duration, n int) time.Duration {
		if n == 0 {
			return 0
		}
		return (d / time.Duration(n)).Round(time.Second)
	}
	fmt.Printf("\n%-44s %14s %14s\n", "", "planned", "plain DRF")
	fmt.Printf("%-44s %13.1f%% %13.1f%%\n", "acceptance rate", pct(p.accepted, p.submitted), pct(b.accepted, b.submitted))
	fmt.Printf("%-44s %13.1f%% %13.1f%%\n", "deadline met, accepted strict demands", pct(p.strictMet, p.strictAccepted), pct(b.strictMet, b.strictAccepted))
	fmt.Printf("%-44s %14s %14s\n", "mean start delay, loose demands", mean(p.looseDelay, p.looseAllocated), mean(b.looseDelay, b.looseAllocated))
	fmt.Printf("%-44s %13.1f%% %13.1f%%\n", "cluster utilization (cpus busy, 2h-22h)", 100*p.utilization, 100*b.utilization)
	fmt.Printf("%-44s %14s %14s\n", "planner time per submitted demand p50", p.planP50, "-")
	fmt.Printf("%-44s %14s %14s\n", "planner time per submitted demand p99", p.planP99, "-")
	fmt.Printf("%-44s %14s %14s\n", "planner time per submitted demand max", p.planMax, "-")
	fmt.Printf("%-44s %14s %14s\n", "planner CPU time per demand p50", p.cpuP50, "-")
	fmt.Printf("%-44s %14s %14s\n", "planner CPU time per demand p99", p.cpuP99, "-")
	fmt.Printf("%-44s %14s %14s\n", "simulation wall time", w1.Sub(w0).Round(time.Millisecond), w2.Sub(w1).Round(time.Millisecond))
	fmt.Printf("\nplanned outcomes: %v; failed: %v\n", p.demandsFinished, p.demandsFailedReason)
	fmt.Printf("strict accepted %d (met %d) of %d submitted; loose allocated %d\n", p.strictAccepted, p.strictMet, p.submitted, p.looseAllocated)
}

func (s *sim) held(id, agent string) {
	if s.holds[id] == nil {
		s.holds[id] = map[string]bool{}
	}
	s.holds[id][agent] = true
}

// release gives back demand id's holds (on the agents which selects; nil:
// all).
func (s *sim) release(id string, which func(string) bool) {
	for a := range s.holds[id] {
		if which == nil || which(a) {
			s.alloc.Release(a, id)
			delete(s.holds[id], a)
		}
	}
}

func units(r, per resources.Resources) int {
	n := -1
	for _, p := range per {
		k := int(r.Scalar(p.Name) / p.Scalar)
		if n < 0 || k < n {
			n = k
		}
	}
	return max(n, 0)
}

func shortfall(per resources.Resources, n int, held resources.Resources) resources.Resources {
	out := make(resources.Resources, 0, len(per))
	for _, p := range per {
		p.Scalar = max(0, p.Scalar*resources.Value(n)-held.Scalar(p.Name))
		out = append(out, p)
	}
	return out
}

func scale(per resources.Resources, n int) resources.Resources {
	out := make(resources.Resources, 0, len(per))
	for _, p := range per {
		p.Scalar *= resources.Value(n)
		out = append(out, p)
	}
	return out
}

// refreshOwn is the master's refreshDemandOwnLocked on the simulated
// cluster: what the demands' own tasks have per agent, so that the plan's
// load function (drfLoad, installed in newSim) sees DRF's share alone.
func (s *sim) refreshOwn() {
	clear(s.own)
	for _, t := range s.tasks {
		if t.demand != "" && t.end.After(s.clock.t) {
			s.own[t.agent] = s.own[t.agent].Add(t.res)
		}
	}
}

// drfLoad is the master's drfLoadLocked.
func (s *sim) drfLoad(agent string) resources.Resources {
	load := s.alloc.Allocated(agent)
	if u := s.own[agent]; len(u) > 0 && load.Contains(u) {
		load = load.Subtract(u)
	}
	return load
}
