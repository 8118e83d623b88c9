package allocator

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/brimnode/brim/resources"
)

// The benchmark instance: simulated agents (a fake, to reach the paper's
// scale on one machine) with identical resources, frameworks spread
// round-robin over roles of weight 1..3.
const benchAgent = "cpus:16;mem:65536;disk:102400"

type benchSize struct{ agents, frameworks, roles int }

func benchSizes() []benchSize {
	var out []benchSize
	for _, ag := range []int{1000, 10000, 50000} {
		for _, fw := range []int{1, 100, 1000} {
			for _, ro := range []int{1, 100} {
				if ro > fw {
					continue
				}
				out = append(out, benchSize{ag, fw, ro})
			}
		}
	}
	return out
}

func (s benchSize) String() string {
	return fmt.Sprintf("agents=%d/frameworks=%d/roles=%d", s.agents, s.frameworks, s.roles)
}

func newBenchAllocator(b testing.TB, s benchSize) *Allocator {
	a, _ := newTest(b, Options{})
	total := resources.MustParse(benchAgent)
	for i := range s.agents {
		must(b, a.AddAgent(AgentInfo{ID: fmt.Sprintf("agent-%06d", i), Total: total}, nil))
	}
	for r := range s.roles {
		must(b, a.SetWeight(fmt.Sprint("role-", r), float64(1+r%3)))
	}
	for f := range s.frameworks {
		addFramework(b, a, fmt.Sprintf("fw-%04d", f), fmt.Sprint("role-", f%s.roles))
	}
	return a
}

// releaseAll returns every allocation to the agents, restoring the state
// before the cycle (cheaper than Recover'ing each offer).
func releaseAll(a *Allocator) {
	for _, ai := range a.live {
		ag := a.agents[ai]
		for j := range ag.allocs {
			e := ag.allocs[j]
			a.take(ag, j, &e.v, e.other)
		}
		ag.allocs = ag.allocs[:0]
	}
}

// BenchmarkCycle measures one full allocation cycle.
func BenchmarkCycle(b *testing.B) {
	for _, s := range benchSizes() {
		b.Run(s.String(), func(b *testing.B) {
			a := newBenchAllocator(b, s)
			a.Allocate() // warm the scratch buffers
			releaseAll(a)
			offers := 0
			var cpu time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				c0 := cpuTime()
				offers = len(a.Allocate())
				cpu += cpuTime() - c0
				b.StopTimer()
				releaseAll(a)
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(offers), "offers/cycle")
			b.ReportMetric(float64(offers)*float64(b.N)/b.Elapsed().Seconds(), "offers/s")
		})
	}
}

func newNaive(s benchSize) *naive {
	n := &naive{capacity: map[string]float64{}, roles: map[string]*naiveRole{}, rng: rand.New(rand.NewPCG(1, 2))}
	total := resources.MustParse(benchAgent)
	for i := range s.agents {
		ag := naiveAgent{id: fmt.Sprintf("agent-%06d", i), free: map[string]float64{}}
		for _, r := range total {
			ag.free[r.Name] = r.Scalar.Float64()
			n.capacity[r.Name] += r.Scalar.Float64()
		}
		n.agents = append(n.agents, ag)
	}
	for r := range s.roles {
		n.roles[fmt.Sprint("role-", r)] = &naiveRole{weight: float64(1 + r%3), alloc: map[string]float64{}, fws: map[string]map[string]float64{}}
	}
	for f := range s.frameworks {
		n.roles[fmt.Sprint("role-", f%s.roles)].fws[fmt.Sprintf("fw-%04d", f)] = map[string]float64{}
	}
	return n
}

func (n *naive) reset(s benchSize) {
	total := resources.MustParse(benchAgent)
	for i := range n.agents {
		for _, r := range total {
			n.agents[i].free[r.Name] = r.Scalar.Float64()
		}
	}
	for _, r := range n.roles {
		clear(r.alloc)
		for _, fw := range r.fws {
			clear(fw)
		}
	}
}

// BenchmarkNaiveCycle is the baseline on the same instances.
func BenchmarkNaiveCycle(b *testing.B) {
	for _, s := range benchSizes() {
		b.Run(s.String(), func(b *testing.B) {
			n := newNaive(s)
			offers := 0
			var cpu time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				c0 := cpuTime()
				offers = len(n.allocate())
				cpu += cpuTime() - c0
				b.StopTimer()
				n.reset(s)
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(offers), "offers/cycle")
			b.ReportMetric(float64(offers)*float64(b.N)/b.Elapsed().Seconds(), "offers/s")
		})
	}
}

// TestNaiveAgrees checks that the baseline and the allocator give the same
// number of agents to each framework on a benchmark instance, so the
// benchmark compares equal work.
func TestNaiveAgrees(t *testing.T) {
	s := benchSize{agents: 3000, frameworks: 30, roles: 7}
	a := newBenchAllocator(t, s)
	got := countByFramework(a.Allocate())
	n := newNaive(s)
	want := countByFramework(n.allocate())
	if len(want) != s.frameworks {
		t.Fatalf("naive served %d frameworks, want %d", len(want), s.frameworks)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: allocator %d agents, naive %d", id, got[id], w)
		}
	}
}

// BenchmarkCycleMixed: 50,000 agents with a revocable estimate on every
// agent and a reservation on every tenth, 1,000 frameworks in 100 roles,
// one in ten revocable-capable, quota guarantees on five roles, and every
// framework holding refusal filters on 20 agents.
func BenchmarkCycleMixed(b *testing.B) {
	a, _ := newTest(b, Options{})
	total := resources.MustParse(benchAgent)
	rev := resources.MustParse("cpus:4;mem:8192")
	for i := range 50000 {
		t := total
		if i%10 == 0 {
			t = t.Add(resources.MustParse(fmt.Sprintf("cpus(role-%d):2;mem(role-%d):4096", i%100, i%100)))
		}
		must(b, a.AddAgent(AgentInfo{ID: fmt.Sprintf("agent-%06d", i), Total: t, Revocable: rev}, nil))
	}
	for r := range 100 {
		must(b, a.SetWeight(fmt.Sprint("role-", r), float64(1+r%3)))
	}
	for r := range 5 {
		must(b, a.SetQuota(fmt.Sprint("role-", r), Quota{Guarantee: resources.MustParse("cpus:2000;mem:8000000")}))
	}
	for f := range 1000 {
		must(b, a.AddFramework(FrameworkInfo{ID: fmt.Sprintf("fw-%04d", f), Roles: []string{fmt.Sprint("role-", f%100)},
			Capabilities: Capabilities{Revocable: f%10 == 0}}, nil))
	}
	// Filters: each framework declines 20 of the agents it is offered.
	hour := time.Hour
	declined := map[string]int{}
	for _, o := range a.Allocate() {
		if declined[o.FrameworkID] < 20 {
			declined[o.FrameworkID]++
			must(b, a.Recover(o.FrameworkID, o.AgentID, o.Resources, &hour))
		}
	}
	releaseAll(a)
	offers := 0
	var cpu time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		c0 := cpuTime()
		offers = len(a.Allocate())
		cpu += cpuTime() - c0
		b.StopTimer()
		releaseAll(a)
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(offers), "offers/cycle")
	b.ReportMetric(float64(offers)*float64(b.N)/b.Elapsed().Seconds(), "offers/s")
}

// BenchmarkCycleAllDeclined: 2,000 agents, 100 frameworks, every agent
// refused by every framework with a long filter (frameworks with no work:
// Mesos's classic pathology, where each cycle walks every framework on
// every agent). idle=off is that walk; idle=on the same cycle with the
// idle-agent shortcut, O(agents).
func BenchmarkCycleAllDeclined(b *testing.B) {
	for _, noIdle := range []bool{true, false} {
		name := "idle=on"
		if noIdle {
			name = "idle=off"
		}
		b.Run(name, func(b *testing.B) {
			a := newBenchAllocator(b, benchSize{agents: 2000, frameworks: 100, roles: 10})
			a.noIdle = noIdle
			// Every framework refuses every agent for an hour.
			until := a.clock.Now().Add(time.Hour)
			for _, c := range a.clients {
				c.filters = make(map[int32]filter, len(a.live))
				for _, ai := range a.live {
					c.filters[ai] = filter{until: until, nonrev: a.agents[ai].pools[0].total}
				}
			}
			a.Allocate() // the first walk marks the agents idle
			var cpu time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				c0 := cpuTime()
				if n := len(a.Allocate()); n != 0 {
					b.Fatalf("%d offers, want none", n)
				}
				cpu += cpuTime() - c0
			}
			b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "cpu-ms/op")
		})
	}
}
