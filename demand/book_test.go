package demand

import (
	"slices"
	"testing"
	"time"

	"github.com/brimnode/brim/resources"
)

// TestBookForgetLeavesNoLiveDemand: a cycle visits the live demands only
// (Book.live, ByUrgency's kept order); a forgotten demand is in neither,
// and one submitted after it is in both.
func TestBookForgetLeavesNoLiveDemand(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	b := NewBook(Config{Lead: time.Minute}, NewPlan())
	b.Plan().SetAgent("a1", resources.MustParse("cpus:8;mem:8192"))
	submit := func(id, start string) {
		t.Helper()
		s, err := ParseSpec([]byte(`{"DemandID": "` + id + `", "Resources": "cpus:1;mem:64", "Start": {"Time": ["` + start + `", "+5m"], "Strategy": "loose"}}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.Submit(now, []*Spec{s}); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(ds []*Demand) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.ID)
		}
		return out
	}
	submit("x", "2026-11-25 10:30:00")
	submit("y", "2026-11-25 10:20:00")
	if got := ids(b.ByUrgency()); !slices.Equal(got, []string{"y", "x"}) {
		t.Fatalf("by urgency %v, want [y x]", got)
	}
	if err := b.Forget("y"); err != nil {
		t.Fatal(err)
	}
	submit("z", "2026-11-25 10:10:00")
	if got := ids(b.ByUrgency()); !slices.Equal(got, []string{"z", "x"}) {
		t.Fatalf("by urgency after forgetting y %v, want [z x]", got)
	}
	b.Tick(now.Add(time.Minute))
	if got := ids(b.live); !slices.Equal(got, []string{"x", "z"}) {
		t.Fatalf("live %v, want [x z]", got)
	}
}
