package allocator

import (
	"errors"
	"testing"

	"github.com/brimnode/brim/resources"
)

// TestHoldKeepsCapacityFromDRF: held capacity is never offered; granted
// capacity is the framework's like an offer's; released capacity is
// offered again.
func TestHoldKeepsCapacityFromDRF(t *testing.T) {
	a, _ := newTest(t, Options{})
	must(t, a.AddAgent(AgentInfo{ID: "a1", Total: resources.MustParse("cpus:4;mem:4096")}, nil))
	addFramework(t, a, "drf", "r1")
	addFramework(t, a, "planned", "r2")
	got, err := a.Hold("a1", "d1", resources.MustParse("cpus:3;mem:1024"))
	must(t, err)
	if !got.Equal(resources.MustParse("cpus:3;mem:1024")) {
		t.Fatalf("held %s", got)
	}
	// A second hold gets what is left, no more.
	if got, _ := a.Hold("a1", "d2", resources.MustParse("cpus:2")); !got.Equal(resources.MustParse("cpus:1")) {
		t.Fatalf("second hold got %s, want cpus:1", got)
	}
	a.Release("a1", "d2")
	for _, o := range a.Allocate() {
		if o.Resources.CPUs() > resources.MustParse("cpus:1").CPUs() {
			t.Fatalf("offer %+v dips into the hold", o)
		}
		must(t, a.RecoverRole(o.FrameworkID, o.Role, o.AgentID, o.Resources, nil))
	}
	o, err := a.Grant("a1", "d1", "planned", "r2", resources.MustParse("cpus:2;mem:512"))
	must(t, err)
	if o.FrameworkID != "planned" || !o.Resources.Equal(resources.MustParse("cpus:2;mem:512")) {
		t.Fatalf("grant = %+v", o)
	}
	if _, err := a.Grant("a1", "d1", "planned", "r2", resources.MustParse("cpus:2")); !errors.Is(err, ErrInsufficient) {
		t.Fatalf("over-grant: %v", err)
	}
	if h := a.Held("a1", "d1"); !h.Equal(resources.MustParse("cpus:1;mem:512")) {
		t.Fatalf("held after grant = %s", h)
	}
	// The grant is the framework's: recovering it works like an offer's.
	must(t, a.RecoverRole("planned", "r2", "a1", o.Resources, nil))
	a.Release("a1", "d1")
	if h := a.Held("a1", "d1"); len(h) != 0 {
		t.Fatalf("held after release = %s", h)
	}
	if _, err := a.Hold("nope", "d1", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown agent: %v", err)
	}
	if _, err := a.Hold("a1", "d1", resources.MustParse("ports:[1-2]")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ports: %v", err)
	}
}

// TestAllocatedCountsFrameworksNotHolds: Allocated is what frameworks
// have in offers and tasks of the unreserved non-revocable pool; holds
// and revocable resources are not in it.
func TestAllocatedCountsFrameworksNotHolds(t *testing.T) {
	a, _ := newTest(t, Options{})
	must(t, a.AddAgent(AgentInfo{ID: "a1", Total: resources.MustParse("cpus:8;mem:8192"), Revocable: resources.MustParse("cpus:2")}, nil))
	addFramework(t, a, "drf", "r1")
	if got := a.Allocated("a1"); len(got) != 0 {
		t.Fatalf("allocated before any offer = %s", got)
	}
	if _, err := a.Hold("a1", "d1", resources.MustParse("cpus:3;mem:1024")); err != nil {
		t.Fatal(err)
	}
	offers := a.Allocate()
	if len(offers) != 1 {
		t.Fatalf("offers %+v", offers)
	}
	want := offers[0].Resources.Unreserved().NonRevocable()
	if got := a.Allocated("a1"); !got.Equal(want) || want.CPUs() != resources.MustParse("cpus:5").CPUs() {
		t.Fatalf("allocated = %s, want the offer's non-revocable part %s (5 cpus: 8 less the hold)", got, want)
	}
	must(t, a.RecoverRole("drf", "r1", "a1", offers[0].Resources, nil))
	if got := a.Allocated("a1"); len(got) != 0 {
		t.Fatalf("allocated after the offer came back = %s", got)
	}
	if got := a.Allocated("nope"); got != nil {
		t.Fatalf("unknown agent: %s", got)
	}
}

// TestHeldOnSumsOtherHolds: HeldOn is what the agent's holds keep, less
// the one named; frameworks' allocations are not in it.
func TestHeldOnSumsOtherHolds(t *testing.T) {
	a, _ := newTest(t, Options{})
	must(t, a.AddAgent(AgentInfo{ID: "a1", Total: resources.MustParse("cpus:8;mem:8192")}, nil))
	addFramework(t, a, "drf", "r1")
	for id, r := range map[string]string{"d1": "cpus:1;mem:100", "d2": "cpus:2;mem:200"} {
		if _, err := a.Hold("a1", id, resources.MustParse(r)); err != nil {
			t.Fatal(err)
		}
	}
	if offers := a.Allocate(); len(offers) != 1 {
		t.Fatalf("offers %+v", offers)
	}
	if got := a.HeldOn("a1", "d1"); !got.Equal(resources.MustParse("cpus:2;mem:200")) {
		t.Fatalf("HeldOn(a1, except d1) = %s, want cpus:2;mem:200", got)
	}
	if got := a.HeldOn("a1", ""); got.CPUs() != resources.MustParse("cpus:3").CPUs() {
		t.Fatalf("HeldOn(a1) = %s, want 3 cpus", got)
	}
	if got := a.HeldOn("nope", ""); got != nil {
		t.Fatalf("unknown agent: %s", got)
	}
}

// TestFreeAgents: the agents with at least the amount asked free now,
// holds, offers and tasks taken off.
func TestFreeAgents(t *testing.T) {
	a, _ := newTest(t, Options{})
	for _, id := range []string{"a1", "a2", "a3"} {
		must(t, a.AddAgent(AgentInfo{ID: id, Total: resources.MustParse("cpus:4;mem:4096")}, nil))
	}
	if _, err := a.Hold("a1", "d1", resources.MustParse("cpus:3")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Hold("a2", "d1", resources.MustParse("mem:4000")); err != nil {
		t.Fatal(err)
	}
	got, err := a.FreeAgents(resources.MustParse("cpus:2;mem:128"))
	must(t, err)
	if len(got) != 1 || !got["a3"].Equal(resources.MustParse("cpus:4;mem:4096")) {
		t.Fatalf("free agents = %v, want a3 alone, whole", got)
	}
	if f := a.Free("a1"); !f.Equal(resources.MustParse("cpus:1;mem:4096")) {
		t.Fatalf("free on a1 = %s", f)
	}
	if _, err := a.FreeAgents(resources.MustParse("ports:[1-2]")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ports: %v", err)
	}
}

// TestAppendHeldNamesOneHold: AppendHeld appends the hold it names, not
// one whose ID it is a prefix of, and leaves dst as it is for none.
func TestAppendHeldNamesOneHold(t *testing.T) {
	a, _ := newTest(t, Options{})
	must(t, a.AddAgent(AgentInfo{ID: "a1", Total: resources.MustParse("cpus:4;mem:4096")}, nil))
	_, err := a.Hold("a1", "d10", resources.MustParse("cpus:2"))
	must(t, err)
	_, err = a.Hold("a1", "d1", resources.MustParse("cpus:1"))
	must(t, err)
	buf := make(resources.Resources, 0, 4)
	if got := a.AppendHeld(buf, "a1", "d1"); !got.Equal(resources.MustParse("cpus:1")) {
		t.Fatalf("d1 = %s, want cpus:1", got)
	}
	if got := a.AppendHeld(buf, "a1", "d"); len(got) != 0 {
		t.Fatalf("d (no such hold) = %s", got)
	}
	if got := a.AppendHeld(buf, "nope", "d1"); len(got) != 0 {
		t.Fatalf("unknown agent = %s", got)
	}
}
