package allocator

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/brimnode/brim/resources"
)

// fakeClock is a manually advanced Clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time          { return c.t }
func (c *fakeClock) Advance(d time.Duration) { c.t = c.t.Add(d) }

func newTest(t testing.TB, opts Options) (*Allocator, *fakeClock) {
	t.Helper()
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	if opts.Clock == nil {
		opts.Clock = clk
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return a, clk
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func addAgents(t testing.TB, a *Allocator, n int, total string) {
	t.Helper()
	for i := range n {
		must(t, a.AddAgent(AgentInfo{ID: fmt.Sprintf("agent-%05d", i), Total: resources.MustParse(total)}, nil))
	}
}

func addFramework(t testing.TB, a *Allocator, id string, roles ...string) {
	t.Helper()
	must(t, a.AddFramework(FrameworkInfo{ID: id, Roles: roles}, nil))
}

func countByFramework(offers []Offer) map[string]int {
	m := map[string]int{}
	for _, o := range offers {
		m[o.FrameworkID]++
	}
	return m
}

func sum(offers []Offer, keep func(Offer) bool) resources.Resources {
	var r resources.Resources
	for _, o := range offers {
		if keep == nil || keep(o) {
			r = r.Add(o.Resources)
		}
	}
	return r
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{
		{Sorter: "fifo"},
		{DefaultRefuse: -time.Second},
		{MinAllocatable: resources.MustParse("ports:[1-2]")},
	} {
		if _, err := New(o); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(%+v) = %v, want ErrInvalid", o, err)
		}
	}
}

// Seed 001, question 1: two frameworks, 10,000 agents: 5,000 each,
// alternating in the shuffled agent order.
func TestTwoFrameworksInterleave(t *testing.T) {
	a, _ := newTest(t, Options{})
	addAgents(t, a, 10000, "cpus:4;mem:8192")
	addFramework(t, a, "f1", "r")
	addFramework(t, a, "f2", "r")
	offers := a.Allocate()
	if got := countByFramework(offers); got["f1"] != 5000 || got["f2"] != 5000 {
		t.Fatalf("offers per framework = %v, want 5000 each", got)
	}
	for i := 1; i < len(offers); i++ {
		if offers[i].FrameworkID == offers[i-1].FrameworkID {
			t.Fatalf("offers %d and %d both to %s: not interleaved", i-1, i, offers[i].FrameworkID)
		}
	}
	// Every agent is offered once, whole.
	seen := map[string]bool{}
	for _, o := range offers {
		if seen[o.AgentID] {
			t.Fatalf("agent %s offered twice", o.AgentID)
		}
		seen[o.AgentID] = true
		if !o.Resources.Equal(resources.MustParse("cpus:4;mem:8192")) {
			t.Fatalf("offer %v: want the whole agent", o.Resources)
		}
	}
	if again := a.Allocate(); len(again) != 0 {
		t.Fatalf("second cycle offered %d: everything is already offered", len(again))
	}
}

// Seed 001, question 3: weights 1:2 split agents 1:2, within one agent.
func TestWeightsSplitAgents(t *testing.T) {
	for _, n := range []int{3, 30, 299, 3000} {
		a, _ := newTest(t, Options{})
		addAgents(t, a, n, "cpus:2;mem:2048")
		must(t, a.SetWeight("heavy", 2))
		addFramework(t, a, "light", "light")
		addFramework(t, a, "heavy", "heavy")
		got := countByFramework(a.Allocate())
		if got["light"]+got["heavy"] != n {
			t.Fatalf("n=%d: %v: not every agent offered", n, got)
		}
		if d := 2*got["light"] - got["heavy"]; d < -2 || d > 2 {
			t.Fatalf("n=%d: light %d heavy %d: not 1:2 within one agent", n, got["light"], got["heavy"])
		}
	}
}

// Reserved resources reach only their role; the rest of the agent goes to
// whoever comes first.
func TestReservedOnlyToRole(t *testing.T) {
	a, _ := newTest(t, Options{})
	must(t, a.SetWeight("other", 100)) // "other" sorts first everywhere
	for i := range 20 {
		must(t, a.AddAgent(AgentInfo{ID: fmt.Sprint("a", i), Total: resources.MustParse("cpus:2;mem:2048;cpus(db):2;mem(db):1024")}, nil))
	}
	addFramework(t, a, "other", "other")
	addFramework(t, a, "db", "db")
	offers := a.Allocate()
	for _, o := range offers {
		res := o.Resources.Filter(func(r resources.Resource) bool { return r.IsReserved() })
		switch o.FrameworkID {
		case "other":
			if !res.IsEmpty() {
				t.Fatalf("reserved %v offered to role other", res)
			}
		case "db":
			if !res.Equal(resources.MustParse("cpus(db):2;mem(db):1024")) {
				t.Fatalf("db offer %v: want the reservation", o.Resources)
			}
		}
	}
	if got := sum(offers, func(o Offer) bool { return o.FrameworkID == "db" }).Reserved("db"); !got.Equal(resources.MustParse("cpus(db):40;mem(db):20480")) {
		t.Fatalf("db got %v reserved, want all 20 reservations", got)
	}
}

// Revocable resources never reach a framework without the capability.
func TestRevocableOnlyWithCapability(t *testing.T) {
	a, _ := newTest(t, Options{})
	for i := range 10 {
		must(t, a.AddAgent(AgentInfo{ID: fmt.Sprint("a", i), Total: resources.MustParse("cpus:1;mem:1024"), Revocable: resources.MustParse("cpus:2;mem:512")}, nil))
	}
	addFramework(t, a, "plain", "r")
	must(t, a.AddFramework(FrameworkInfo{ID: "rev", Roles: []string{"r"}, Capabilities: Capabilities{Revocable: true}}, nil))
	offers := a.Allocate()
	for _, o := range offers {
		if o.FrameworkID == "plain" && !o.Resources.Revocable().IsEmpty() {
			t.Fatalf("revocable %v offered to plain", o.Resources.Revocable())
		}
	}
	if got := sum(offers, nil).Revocable(); got.CPUs() != resources.FromInt(20) {
		t.Fatalf("revocable offered %v, want all 20 cpus to rev", got)
	}
	// A shrinking estimate takes revocable allocations back.
	rescinded, err := a.UpdateAgent(AgentInfo{ID: "a0", Total: resources.MustParse("cpus:1;mem:1024")})
	must(t, err)
	if len(rescinded) != 1 || rescinded[0].FrameworkID != "rev" || rescinded[0].Resources.Revocable().IsEmpty() {
		t.Fatalf("rescinded %+v, want rev's revocable allocation on a0", rescinded)
	}
}

func TestOfferFilters(t *testing.T) {
	a, _ := newTest(t, Options{})
	addAgents(t, a, 6, "cpus:1;mem:1024")
	must(t, a.AddAgent(AgentInfo{ID: "big", Total: resources.MustParse("cpus:8;mem:8192")}, nil))
	must(t, a.AddFramework(FrameworkInfo{ID: "picky", Roles: []string{"r"}, OfferFilter: OfferFilter{Agents: []string{"agent-00001", "big"}}}, nil))
	must(t, a.AddFramework(FrameworkInfo{ID: "large", Roles: []string{"r"}, OfferFilter: OfferFilter{MinFree: resources.MustParse("cpus:4")}}, nil))
	addFramework(t, a, "any", "r")
	for _, o := range a.Allocate() {
		switch o.FrameworkID {
		case "picky":
			if o.AgentID != "agent-00001" && o.AgentID != "big" {
				t.Fatalf("picky offered %s", o.AgentID)
			}
		case "large":
			if o.AgentID != "big" {
				t.Fatalf("large offered %s with %v", o.AgentID, o.Resources)
			}
		}
	}
}

func TestRandomSorterGivesEveryoneAShare(t *testing.T) {
	a, _ := newTest(t, Options{Sorter: SorterRandom})
	addAgents(t, a, 3000, "cpus:1;mem:1024")
	must(t, a.SetWeight("b", 2))
	addFramework(t, a, "fa", "a")
	addFramework(t, a, "fb", "b")
	got := countByFramework(a.Allocate())
	// weight 2 wins two thirds of the draws; 3000 draws put it far from
	// both 1/2 and 1.
	if got["fa"]+got["fb"] != 3000 || got["fb"] < 1800 || got["fb"] > 2200 {
		t.Fatalf("random sorter: %v, want about 1000:2000", got)
	}
}

func TestUpdateFramework(t *testing.T) {
	a, _ := newTest(t, Options{})
	must(t, a.AddAgent(AgentInfo{ID: "a", Total: resources.MustParse("cpus:1;mem:1024"), Revocable: resources.MustParse("cpus:4")}, nil))
	addFramework(t, a, "f", "r")
	if o := a.Allocate(); len(o) != 1 || !o[0].Resources.Revocable().IsEmpty() {
		t.Fatalf("offers %+v, want no revocable", o)
	}
	must(t, a.UpdateFramework(FrameworkInfo{ID: "f", Roles: []string{"r"}, Capabilities: Capabilities{Revocable: true}}))
	if o := a.Allocate(); len(o) != 1 || o[0].Resources.Revocable().CPUs() != resources.FromInt(4) {
		t.Fatalf("offers %+v, want the revocable cpus now", o)
	}
	if err := a.UpdateFramework(FrameworkInfo{ID: "f", Roles: []string{"other"}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("role change: %v, want ErrInvalid", err)
	}
	if err := a.UpdateFramework(FrameworkInfo{ID: "g", Roles: []string{"r"}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown framework: %v, want ErrNotFound", err)
	}
}

// The same seed gives the same cycle (agent shuffle, random sorter).
func TestSeedReproducible(t *testing.T) {
	run := func() []Offer {
		a, _ := newTest(t, Options{Sorter: SorterRandom, Seed: 99})
		addAgents(t, a, 200, "cpus:1;mem:1024")
		for i := range 5 {
			addFramework(t, a, fmt.Sprint("f", i), fmt.Sprint("r", i%2))
		}
		return a.Allocate()
	}
	x, y := run(), run()
	if len(x) != len(y) {
		t.Fatalf("%d vs %d offers", len(x), len(y))
	}
	for i := range x {
		if x[i].FrameworkID != y[i].FrameworkID || x[i].AgentID != y[i].AgentID {
			t.Fatalf("offer %d: %s/%s vs %s/%s", i, x[i].FrameworkID, x[i].AgentID, y[i].FrameworkID, y[i].AgentID)
		}
	}
}
