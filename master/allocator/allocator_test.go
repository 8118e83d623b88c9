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

// Seed 001, question 4 and the filter: a declined agent goes to the other
// framework while the filter lasts and comes back after it.
func TestDeclineFilter(t *testing.T) {
	a, clk := newTest(t, Options{})
	addAgents(t, a, 1, "cpus:4;mem:4096")
	addFramework(t, a, "f1", "r")
	addFramework(t, a, "f2", "r")
	o := a.Allocate()
	if len(o) != 1 || o[0].FrameworkID != "f1" {
		t.Fatalf("first cycle: %+v, want one offer to f1", o)
	}
	refuse := 10 * time.Second
	must(t, a.Recover("f1", o[0].AgentID, o[0].Resources, &refuse))
	o = a.Allocate()
	if len(o) != 1 || o[0].FrameworkID != "f2" {
		t.Fatalf("after f1 declined: %+v, want the agent offered to f2", o)
	}
	zero := time.Duration(0)
	must(t, a.Recover("f2", o[0].AgentID, o[0].Resources, &zero))
	clk.Advance(5 * time.Second)
	o = a.Allocate()
	if len(o) != 1 || o[0].FrameworkID != "f2" {
		t.Fatalf("filter still active: %+v, want f2 again", o)
	}
	must(t, a.Recover("f2", o[0].AgentID, o[0].Resources, &zero))
	clk.Advance(5 * time.Second)
	o = a.Allocate()
	if len(o) != 1 || o[0].FrameworkID != "f1" {
		t.Fatalf("filter expired: %+v, want f1 back", o)
	}
	// The default filter (nil refuse) is Options.DefaultRefuse = 5 s.
	must(t, a.Recover("f1", o[0].AgentID, o[0].Resources, nil))
	if o = a.Allocate(); len(o) != 1 || o[0].FrameworkID != "f2" {
		t.Fatalf("default filter: %+v, want f2", o)
	}
}

// A filter covers only what was refused: more resources get through.
func TestFilterOnlyCoversRefused(t *testing.T) {
	a, _ := newTest(t, Options{})
	addAgents(t, a, 1, "cpus:4;mem:4096")
	addFramework(t, a, "f1", "r")
	o := a.Allocate()
	part := resources.MustParse("cpus:1;mem:1024")
	must(t, a.Recover("f1", o[0].AgentID, part, nil))
	if o := a.Allocate(); len(o) != 0 {
		t.Fatalf("refused part re-offered: %+v", o)
	}
	// A task ends: more is free than what was refused.
	zero := time.Duration(0)
	must(t, a.Recover("f1", o[0].AgentID, resources.MustParse("cpus:3;mem:3072"), &zero))
	if o := a.Allocate(); len(o) != 1 || !o[0].Resources.Equal(resources.MustParse("cpus:4;mem:4096")) {
		t.Fatalf("offer after task end: %+v, want the whole agent", o)
	}
}

func TestReviveClearsFilters(t *testing.T) {
	a, _ := newTest(t, Options{})
	addAgents(t, a, 1, "cpus:4;mem:4096")
	addFramework(t, a, "f1", "r")
	o := a.Allocate()
	hour := time.Hour
	must(t, a.Recover("f1", o[0].AgentID, o[0].Resources, &hour))
	if o := a.Allocate(); len(o) != 0 {
		t.Fatalf("filtered agent offered: %+v", o)
	}
	a.Revive("f1")
	if o := a.Allocate(); len(o) != 1 {
		t.Fatalf("after revive: %d offers, want 1", len(o))
	}
}

func TestSuppress(t *testing.T) {
	a, _ := newTest(t, Options{})
	addAgents(t, a, 4, "cpus:1;mem:1024")
	addFramework(t, a, "f1", "r")
	addFramework(t, a, "f2", "r")
	a.Suppress("f1")
	if got := countByFramework(a.Allocate()); got["f1"] != 0 || got["f2"] != 4 {
		t.Fatalf("suppressed f1: %v, want all 4 agents to f2", got)
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

// A quota guarantee is met before fair sharing, and headroom for it is
// held back from other roles.
func TestQuotaGuaranteeFirst(t *testing.T) {
	a, _ := newTest(t, Options{})
	addAgents(t, a, 10, "cpus:1;mem:1024")
	must(t, a.SetWeight("big", 1000))
	must(t, a.SetQuota("q", Quota{Guarantee: resources.MustParse("cpus:4;mem:4096")}))
	addFramework(t, a, "big", "big")
	addFramework(t, a, "q", "q")
	offers := a.Allocate()
	q := sum(offers, func(o Offer) bool { return o.Role == "q" })
	if !q.Contains(resources.MustParse("cpus:4;mem:4096")) {
		t.Fatalf("q got %v, want at least its guarantee cpus:4;mem:4096", q)
	}
	if all := sum(offers, nil); !all.Equal(resources.MustParse("cpus:10;mem:10240")) {
		t.Fatalf("cycle offered %v, want the whole cluster", all)
	}
}

// Headroom: with the quota role's framework absent, other roles do not get
// what the guarantee needs.
func TestQuotaHeadroom(t *testing.T) {
	a, _ := newTest(t, Options{})
	addAgents(t, a, 10, "cpus:1;mem:1024")
	must(t, a.SetQuota("q", Quota{Guarantee: resources.MustParse("cpus:4;mem:4096")}))
	addFramework(t, a, "other", "other")
	got := sum(a.Allocate(), nil)
	if !got.Equal(resources.MustParse("cpus:6;mem:6144")) {
		t.Fatalf("other got %v, want cpus:6;mem:6144 (4 held back for q)", got)
	}
}

func TestQuotaLimit(t *testing.T) {
	a, _ := newTest(t, Options{})
	addAgents(t, a, 10, "cpus:1;mem:1024")
	must(t, a.SetQuota("capped", Quota{Limit: resources.MustParse("cpus:3.5")}))
	addFramework(t, a, "f", "capped")
	got := sum(a.Allocate(), nil)
	if got.CPUs() != resources.FromFloat(3.5) {
		t.Fatalf("capped role got %v, want cpus 3.5", got)
	}
	if err := a.SetQuota("x", Quota{Guarantee: resources.MustParse("cpus:2"), Limit: resources.MustParse("cpus:1")}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("guarantee above limit: %v, want ErrInvalid", err)
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

func TestMinAllocatable(t *testing.T) {
	a, _ := newTest(t, Options{})
	must(t, a.AddAgent(AgentInfo{ID: "tiny", Total: resources.MustParse("cpus:0.005;mem:16")}, nil))
	must(t, a.AddAgent(AgentInfo{ID: "memonly", Total: resources.MustParse("mem:64")}, nil))
	addFramework(t, a, "f", "r")
	o := a.Allocate()
	if len(o) != 1 || o[0].AgentID != "memonly" {
		t.Fatalf("offers %+v, want only memonly (cpus:0.01 OR mem:32)", o)
	}
}

func TestReserveUnreserve(t *testing.T) {
	a, _ := newTest(t, Options{})
	must(t, a.AddAgent(AgentInfo{ID: "a", Total: resources.MustParse("cpus:4;mem:4096"), Revocable: resources.MustParse("cpus:1")}, nil))
	if err := a.Reserve("a", "db", "ops", resources.MustParse("cpus:8")); !errors.Is(err, ErrInsufficient) {
		t.Fatalf("over-reserve: %v, want ErrInsufficient", err)
	}
	rev := resources.MustParse("cpus:1")
	rev[0].Revocable = true
	if err := a.Reserve("a", "db", "ops", rev); !errors.Is(err, ErrRevocable) {
		t.Fatalf("reserve revocable: %v, want ErrRevocable", err)
	}
	if err := a.Reserve("nope", "db", "ops", resources.MustParse("cpus:1")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown agent: %v, want ErrNotFound", err)
	}
	must(t, a.Reserve("a", "db", "ops", resources.MustParse("cpus:2;mem:1024")))
	addFramework(t, a, "web", "web")
	o := a.Allocate()
	if len(o) != 1 || !o[0].Resources.Equal(resources.MustParse("cpus:2;mem:3072")) {
		t.Fatalf("web offered %+v, want only the unreserved rest", o)
	}
	addFramework(t, a, "db", "db")
	o = a.Allocate()
	want, _ := resources.MustParse("cpus:2;mem:1024").Reserve("db", "ops")
	if len(o) != 1 || o[0].FrameworkID != "db" || !o[0].Resources.Equal(want) {
		t.Fatalf("db offered %+v, want %v", o, want)
	}
	// Allocated reservations cannot be unreserved; free ones can.
	if err := a.Unreserve("a", want); !errors.Is(err, ErrInsufficient) {
		t.Fatalf("unreserve allocated: %v, want ErrInsufficient", err)
	}
	zero := time.Duration(0)
	must(t, a.Recover("db", "a", want, &zero))
	must(t, a.Unreserve("a", want))
	must(t, a.RemoveFramework("db"))
	zero = 0
	must(t, a.Recover("web", "a", resources.MustParse("cpus:2;mem:3072"), &zero))
	if o := a.Allocate(); len(o) != 1 || !o[0].Resources.Equal(resources.MustParse("cpus:4;mem:4096")) {
		t.Fatalf("after unreserve: %+v, want the whole agent to web", o)
	}
}

func TestRecoverErrors(t *testing.T) {
	a, _ := newTest(t, Options{})
	addAgents(t, a, 1, "cpus:4;mem:4096")
	addFramework(t, a, "f", "r")
	o := a.Allocate()
	if err := a.Recover("f", o[0].AgentID, resources.MustParse("cpus:5"), nil); !errors.Is(err, ErrInsufficient) {
		t.Fatalf("recover more than held: %v, want ErrInsufficient", err)
	}
	if err := a.Recover("g", o[0].AgentID, o[0].Resources, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown framework: %v, want ErrNotFound", err)
	}
	if err := a.AddFramework(FrameworkInfo{ID: "f", Roles: []string{"r"}}, nil); !errors.Is(err, ErrExist) {
		t.Fatalf("duplicate framework: %v, want ErrExist", err)
	}
	if err := a.AddAgent(AgentInfo{ID: o[0].AgentID}, nil); !errors.Is(err, ErrExist) {
		t.Fatalf("duplicate agent: %v, want ErrExist", err)
	}
}

// Usage reported by an agent before its framework re-registers is held,
// then claimed by the framework.
func TestFailoverUsage(t *testing.T) {
	a, _ := newTest(t, Options{})
	must(t, a.AddAgent(AgentInfo{ID: "a", Total: resources.MustParse("cpus:4;mem:4096;ports:[31000-32000]")},
		map[string]resources.Resources{"f": resources.MustParse("cpus:1;mem:1024;ports:[31000-31000]")}))
	addFramework(t, a, "g", "r")
	o := a.Allocate()
	if len(o) != 1 || !o[0].Resources.Equal(resources.MustParse("cpus:3;mem:3072;ports:[31001-32000]")) {
		t.Fatalf("g offered %+v, want what f does not use", o)
	}
	addFramework(t, a, "f", "r")
	shares := a.FrameworkShares()
	if shares[0].FrameworkID != "f" || shares[0].Allocated.CPUs() != resources.FromInt(1) {
		t.Fatalf("shares %+v: f should hold its reported usage", shares)
	}
	zero := time.Duration(0)
	must(t, a.Recover("f", "a", resources.MustParse("cpus:1;mem:1024;ports:[31000-31000]"), &zero))
	must(t, a.RemoveFramework("g"))
	if o := a.Allocate(); len(o) != 1 || !o[0].Resources.Equal(resources.MustParse("cpus:4;mem:4096;ports:[31000-32000]")) {
		t.Fatalf("after recover: %+v, want the whole agent", o)
	}
}

func TestRemoveAgentAndShares(t *testing.T) {
	a, _ := newTest(t, Options{})
	addAgents(t, a, 4, "cpus:1;mem:1024")
	addFramework(t, a, "f", "r")
	a.Allocate()
	if s := a.Shares(); len(s) != 1 || s[0].Share != 1 {
		t.Fatalf("shares %+v, want r at 1", s)
	}
	must(t, a.RemoveAgent("agent-00000"))
	if s := a.Shares(); s[0].Share != 1 || s[0].Allocated.CPUs() != resources.FromInt(3) {
		t.Fatalf("after removal: %+v, want share 1 of 3 cpus", s)
	}
	if err := a.RemoveAgent("agent-00000"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("remove twice: %v", err)
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

// A framework in two roles is offered in both; RecoverRole returns what it
// holds in the named one.
func TestMultiRoleFramework(t *testing.T) {
	a, _ := newTest(t, Options{})
	must(t, a.AddAgent(AgentInfo{ID: "a", Total: resources.MustParse("cpus:2;mem:2048;cpus(db):1;mem(db):512")}, nil))
	addFramework(t, a, "f", "web", "db")
	offers := a.Allocate()
	roles := map[string]resources.Resources{}
	for _, o := range offers {
		roles[o.Role] = roles[o.Role].Add(o.Resources)
	}
	if !roles["db"].Reserved("db").Equal(resources.MustParse("cpus(db):1;mem(db):512")) {
		t.Fatalf("offers by role %v: db reservation should go to role db", roles)
	}
	zero := time.Duration(0)
	for role, res := range roles {
		must(t, a.RecoverRole("f", role, "a", res, &zero))
	}
	for _, s := range a.FrameworkShares() {
		if !s.Allocated.IsEmpty() {
			t.Fatalf("%s/%s still holds %v", s.FrameworkID, s.Role, s.Allocated)
		}
	}
	if err := a.RecoverRole("f", "nope", "a", nil, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown role: %v, want ErrNotFound", err)
	}
}

// A new revocable estimate keeps dynamic reservations and takes back only
// the revocable allocations that no longer fit.
func TestUpdateRevocable(t *testing.T) {
	a, _ := newTest(t, Options{})
	must(t, a.AddAgent(AgentInfo{ID: "a", Total: resources.MustParse("cpus:4;mem:4096;ports:[31000-31009]"), Revocable: resources.MustParse("cpus:2")}, nil))
	must(t, a.Reserve("a", "db", "ops", resources.MustParse("cpus:1;mem:1024")))
	must(t, a.AddFramework(FrameworkInfo{ID: "rev", Roles: []string{"web"}, Capabilities: Capabilities{Revocable: true}}, nil))
	o := a.Allocate()
	if len(o) != 1 || o[0].Resources.Revocable().CPUs() != resources.FromInt(2) {
		t.Fatalf("offers %+v, want one with 2 revocable cpus", o)
	}
	rescinded, err := a.UpdateRevocable("a", resources.MustParse("cpus:1"))
	must(t, err)
	if len(rescinded) != 1 || !rescinded[0].Resources.Equal(revocable(resources.MustParse("cpus:2"))) {
		t.Fatalf("rescinded %+v, want the 2 revocable cpus", rescinded)
	}
	if o := a.Allocate(); len(o) != 1 || !o[0].Resources.Equal(revocable(resources.MustParse("cpus:1"))) {
		t.Fatalf("offers %+v, want the new estimate", o)
	}
	addFramework(t, a, "db", "db")
	want, _ := resources.MustParse("cpus:1;mem:1024").Reserve("db", "ops")
	if o := a.Allocate(); len(o) != 1 || !o[0].Resources.Equal(want) {
		t.Fatalf("offers %+v, want the dynamic reservation kept: %v", o, want)
	}
	if _, err := a.UpdateRevocable("nope", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown agent: %v", err)
	}
}

// Seed 000: offered-but-unanswered resources count toward the framework's
// share, so sitting on offers costs it the next agents.
func TestOutstandingOffersCountTowardShare(t *testing.T) {
	a, _ := newTest(t, Options{})
	addAgents(t, a, 4, "cpus:4;mem:4096")
	addFramework(t, a, "slow", "r")
	addFramework(t, a, "fast", "r")
	a.Suppress("fast")
	if got := countByFramework(a.Allocate()); got["slow"] != 4 {
		t.Fatalf("first cycle %v, want all 4 agents to slow", got)
	}
	a.Revive("fast")
	for i := range 3 {
		must(t, a.AddAgent(AgentInfo{ID: fmt.Sprint("new-", i), Total: resources.MustParse("cpus:4;mem:4096")}, nil))
	}
	// slow has not answered its 4 offers: every new agent goes to fast.
	if got := countByFramework(a.Allocate()); got["fast"] != 3 || got["slow"] != 0 {
		t.Fatalf("second cycle %v, want the 3 new agents to fast", got)
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
