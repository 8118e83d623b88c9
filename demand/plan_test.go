package demand

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/brimnode/brim/resources"
)

// TestPlanVisitsAgentsInIDOrder: agents added in any order, some
// removed before and after a scan, are scanned in ID order — a placement
// is the same whatever order the agents registered in.
func TestPlanVisitsAgentsInIDOrder(t *testing.T) {
	one := resources.MustParse("cpus:1;mem:1024")
	p := NewPlan()
	for _, id := range []string{"a5", "a1", "a4", "a2", "a3"} {
		p.SetAgent(id, one)
	}
	p.RemoveAgent("a2") // before any scan
	if got, want := p.sortedIDs(), []string{"a1", "a3", "a4", "a5"}; !slices.Equal(got, want) {
		t.Fatalf("scan order %v, want %v", got, want)
	}
	p.SetAgent("a0", one)
	p.SetAgent("a3", one) // known: not added twice
	p.RemoveAgent("a4")   // after a scan, with a new agent unsorted
	if got, want := p.sortedIDs(), []string{"a0", "a1", "a3", "a5"}; !slices.Equal(got, want) {
		t.Fatalf("scan order %v, want %v", got, want)
	}
	if err := p.CanEverFit(one, 4); err != nil {
		t.Fatalf("4 tasks of one cpu on 4 agents of one: %v", err)
	}
}

// BenchmarkPlanSetAgents: 50,000 agents with random IDs (as UUIDs are)
// join a plan, as at a new leader's re-registration storm; then one
// scan. Sorted insertion made this quadratic: 304 ms an op here, 159 ms
// with the IDs sorted once at the first scan.
func BenchmarkPlanSetAgents(b *testing.B) {
	total := resources.MustParse("cpus:16;mem:65536")
	ids := make([]string, 50000)
	for i := range ids {
		ids[i] = fmt.Sprintf("%016x", rand.Uint64())
	}
	for b.Loop() {
		p := NewPlan()
		for _, id := range ids {
			p.SetAgent(id, total)
		}
		if err := p.CanEverFit(total, 10); err != nil {
			b.Fatal(err)
		}
	}
}
