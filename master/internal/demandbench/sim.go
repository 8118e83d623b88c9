package main

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"time"

	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/master/demandplan"
	"github.com/brimnode/brim/resources"
)

// The simulated cluster: agents, frameworks and tasks are simulated
// (named so: a fake to reach 1,000 agents on one machine); the allocator
// and, in the planned modes, the planner are the master's own code.

const (
	cpusPerAgent = 32
	memPerCPU    = 4096
	fillers      = 8
)

type simClock struct{ t time.Time }

func (c *simClock) Now() time.Time { return c.t }

// task is a simulated task; it runs until end (its natural end, or its
// kill grace after a kill).
type task struct {
	id, fw, role, agent string
	res                 resources.Resources
	cpus                int
	launched, end       time.Time
	natural             time.Duration // how long it would run undisturbed
	demand              string
	preempted           bool // killed to reclaim its capacity
	killed              bool // killed at all (preempted, or its demand ended)
	idx                 int  // in the heap
}

type taskHeap []*task

func (h taskHeap) Len() int { return len(h) }
func (h taskHeap) Less(i, j int) bool {
	if !h[i].end.Equal(h[j].end) {
		return h[i].end.Before(h[j].end)
	}
	return h[i].id < h[j].id
}
func (h taskHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].idx = i; h[j].idx = j }
func (h *taskHeap) Push(x any)   { t := x.(*task); t.idx = len(*h); *h = append(*h, t) }
func (h *taskHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}

// cluster is the simulated cluster one mode runs on.
type cluster struct {
	cfg     config
	clock   *simClock
	alloc   *allocator.Allocator
	agents  []string
	total   int // cpus
	tasks   taskHeap
	byID    map[string]*task
	byAgent map[string]map[string]*task
	seq     int
	running int // cpus the live tasks use
	bg      background
	// backlog is the untimed work waiting (finite background load);
	// with an endless backlog (-bg-load 0) it stays empty and every
	// filler task draws its duration when it launches.
	backlog []time.Duration
	arrive  *rand.Rand
	rate    float64 // background tasks arriving per second
	// measured
	busy, capacity float64 // cpu·steps, 2 h–22 h
	lostCPU        float64 // cpu·s of preempted work
	lostRevCPU     float64 // of which revocable (on lent capacity)
	preempted      int
	onEnd          func(t *task) // the mode's part of a task's end
}

func newCluster(cfg config, seed uint64) *cluster {
	c := &cluster{cfg: cfg, clock: &simClock{t: t0}, byID: map[string]*task{}, byAgent: map[string]map[string]*task{},
		bg:     background{r: rand.New(rand.NewPCG(seed, 11)), median: cfg.bgMedian, sigma: cfg.bgSigma, maxD: cfg.bgMax},
		arrive: rand.New(rand.NewPCG(seed, 13))}
	a, err := allocator.New(allocator.Options{Clock: c.clock, Seed: int64(seed)})
	must(err)
	c.alloc = a
	for i := range cfg.agents {
		id := fmt.Sprintf("a%04d", i)
		must(a.AddAgent(allocator.AgentInfo{ID: id, Total: agentTotal()}, nil))
		c.agents = append(c.agents, id)
		c.byAgent[id] = map[string]*task{}
		c.total += cpusPerAgent
	}
	for i := range fillers {
		role := fmt.Sprintf("batch%d", i%cfg.bgRoles)
		must(a.AddFramework(allocator.FrameworkInfo{ID: fmt.Sprintf("filler%d", i), Roles: []string{role},
			Capabilities: allocator.Capabilities{Revocable: true}}, nil))
	}
	if cfg.bgLoad > 0 {
		c.rate = cfg.bgLoad * float64(c.total) / c.bg.mean().Seconds()
	}
	return c
}

func agentTotal() resources.Resources {
	return resources.MustParse(fmt.Sprintf("cpus:%d;mem:%d", cpusPerAgent, cpusPerAgent*memPerCPU))
}

func (c *cluster) launch(fw, role, agent string, res resources.Resources, d time.Duration, dem string, cpus int) *task {
	c.seq++
	now := c.clock.t
	t := &task{id: fmt.Sprintf("t%d", c.seq), fw: fw, role: role, agent: agent, res: res, cpus: cpus,
		launched: now, end: now.Add(d), natural: d, demand: dem}
	heap.Push(&c.tasks, t)
	c.running += cpus
	c.byID[t.id] = t
	c.byAgent[agent][t.id] = t
	return t
}

// kill ends task id after the kill grace (its natural end if sooner).
func (c *cluster) kill(id string, preempted bool) {
	t := c.byID[id]
	if t == nil || t.killed {
		return
	}
	t.killed, t.preempted = true, preempted
	if end := c.clock.t.Add(c.cfg.grace); end.Before(t.end) {
		t.end = end
		heap.Fix(&c.tasks, t.idx)
	}
}

// endTasks ends the tasks due by now: their resources go back to the
// allocator, the mode hears of it.
func (c *cluster) endTasks() {
	now := c.clock.t
	zero := time.Duration(0)
	for len(c.tasks) > 0 && !c.tasks[0].end.After(now) {
		t := heap.Pop(&c.tasks).(*task)
		c.running -= t.cpus
		delete(c.byID, t.id)
		delete(c.byAgent[t.agent], t.id)
		must(c.alloc.RecoverRole(t.fw, t.role, t.agent, t.res, &zero))
		if t.preempted {
			c.preempted++
			c.lostCPU += float64(t.cpus) * t.end.Sub(t.launched).Seconds()
			if !t.res.Revocable().IsEmpty() {
				c.lostRevCPU += float64(t.cpus) * t.end.Sub(t.launched).Seconds()
			} else if debug {
				fmt.Fprintf(os.Stderr, "preempted-nonrev age %.0f\n", t.end.Sub(t.launched).Seconds())
			}
			if t.demand == "" && c.cfg.bgLoad > 0 {
				c.backlog = append([]time.Duration{t.natural}, c.backlog...) // its framework runs it again
			}
		}
		if c.onEnd != nil {
			c.onEnd(t)
		}
	}
}

// arrivals queue the untimed work arriving this step (finite load).
func (c *cluster) arrivals() {
	if c.rate == 0 {
		return
	}
	n := poisson(c.arrive, c.rate*c.cfg.step.Seconds())
	for range n {
		c.backlog = append(c.backlog, c.bg.draw())
	}
}

func poisson(r *rand.Rand, mean float64) int {
	if mean > 30 { // normal approximation
		return max(0, int(mean+r.NormFloat64()*math.Sqrt(mean)+0.5))
	}
	l, k, p := math.Exp(-mean), 0, 1.0
	for {
		p *= r.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// nextBackground is the duration of the next untimed task, and whether
// there is one.
func (c *cluster) nextBackground() (time.Duration, bool) {
	if c.cfg.bgLoad == 0 {
		return c.bg.draw(), true
	}
	if len(c.backlog) == 0 {
		return 0, false
	}
	d := c.backlog[0]
	c.backlog = c.backlog[1:]
	return d, true
}

// The filler's task sizes, parsed once (fill runs for every offer).
var (
	unit    = resources.MustParse(fmt.Sprintf("cpus:1;mem:%d", memPerCPU))
	revUnit = resources.MustParse(fmt.Sprintf("cpus{REV}:1;mem{REV}:%d", memPerCPU))
)

// fill has a filler framework run untimed tasks of 1 cpu on what it was
// offered, revocable resources included (a task on revocable resources is
// revocable), and gives back the rest.
func (c *cluster) fill(o allocator.Offer) {
	left := o.Resources
	for _, u := range []resources.Resources{unit, revUnit} {
		for left.Contains(u) {
			d, ok := c.nextBackground()
			if !ok {
				break
			}
			left = left.Subtract(u)
			c.launch(o.FrameworkID, o.Role, o.AgentID, u, d, "", 1)
		}
	}
	c.giveBack(o, left)
}

func (c *cluster) giveBack(o allocator.Offer, left resources.Resources) {
	if !left.IsEmpty() {
		refuse := time.Duration(0)
		must(c.alloc.RecoverRole(o.FrameworkID, o.Role, o.AgentID, left, &refuse))
	}
}

// sample adds this step's busy cpus to the utilization (2 h–22 h, the
// steady part of the day).
func (c *cluster) sample() {
	now := c.clock.t
	if !now.After(t0.Add(2*time.Hour)) || !now.Before(t0.Add(22*time.Hour)) {
		return
	}
	busy := c.running
	if debug && now.Sub(t0)%time.Minute == 0 {
		for _, a := range c.agents {
			n, rev := 0, 0
			for _, t := range c.byAgent[a] {
				n += t.cpus
				if !t.res.Revocable().IsEmpty() {
					rev += t.cpus
				}
			}
			if n > cpusPerAgent {
				fmt.Fprintf(os.Stderr, "%s overcommitted %s: %d cpus busy (%d revocable), lent %s, held %s, overdraft %s\n", now.Format(time.TimeOnly), a, n, rev, c.alloc.Lent(a), c.alloc.HeldOn(a, ""), c.alloc.Overdraft(a))
			}
		}
	}
	c.busy += float64(busy)
	c.capacity += float64(c.total)
}

// The planner's view of the simulated cluster (demandplan.Cluster):
// every agent and framework is up; offers are taken within the cycle
// they are made, so none is outstanding between the planner's calls.
type simView struct{ c *cluster }

var _ demandplan.Cluster = simView{}

func (v simView) Ready(string) bool                { return true }
func (v simView) Framework(string) (bool, bool)    { return true, true }
func (v simView) Offers(string) []demandplan.Offer { return nil }
func (v simView) Tasks(agent string) []demandplan.Task {
	m := v.c.byAgent[agent]
	out := make([]demandplan.Task, 0, len(m))
	for _, t := range m {
		out = append(out, demandplan.Task{ID: t.id, Framework: t.fw, Role: t.role, Resources: t.res, Launched: t.launched})
	}
	return out
}
