package allocator

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/brimnode/brim/resources"
)

func addScored(t *testing.T, a *Allocator, prefix string, n int, score float64) {
	t.Helper()
	for i := range n {
		must(t, a.AddAgent(AgentInfo{ID: fmt.Sprintf("%s-%03d", prefix, i), Total: resources.MustParse("cpus:16;mem:65536"), Score: score}, nil))
	}
}

// meDRF (seed 002, §2): each framework alternates between fast and slow
// nodes, so both get an equal number of each; under plain DRF the split
// is left to the shuffle.
func TestMeDRFAlternatesFastAndSlow(t *testing.T) {
	a, _ := newTest(t, Options{Sorter: SorterMeDRF})
	addScored(t, a, "fast", 100, 3)
	addScored(t, a, "slow", 100, 1)
	addFramework(t, a, "f1", "r")
	addFramework(t, a, "f2", "r")
	fast := map[string]int{}
	total := map[string]int{}
	for _, o := range a.Allocate() {
		total[o.FrameworkID]++
		if strings.HasPrefix(o.AgentID, "fast") {
			fast[o.FrameworkID]++
		}
	}
	for _, f := range []string{"f1", "f2"} {
		if total[f] != 100 || fast[f] < 49 || fast[f] > 51 {
			t.Fatalf("%s: %d agents, %d fast; want 100 with 50±1 fast (all: %v %v)", f, total[f], fast[f], total, fast)
		}
	}
}

// Node scores weight the dominant share: one fast node (score 3, η = 2)
// weighs as much as three slow ones (score 1, η = 2/3).
func TestMeDRFWeightsShares(t *testing.T) {
	a, _ := newTest(t, Options{Sorter: SorterMeDRF})
	addScored(t, a, "fast", 1, 3)
	addScored(t, a, "slow", 3, 1)
	addFramework(t, a, "f1", "r")
	addFramework(t, a, "f2", "r")
	got := map[string][]string{}
	for _, o := range a.Allocate() {
		got[o.FrameworkID] = append(got[o.FrameworkID], o.AgentID)
	}
	if len(got["f1"]) != 1 || got["f1"][0] != "fast-000" || len(got["f2"]) != 3 {
		t.Fatalf("offers %v: want the fast node to f1 and the three slow ones to f2", got)
	}
	for _, s := range a.FrameworkShares() {
		if math.Abs(s.Share-0.5) > 1e-9 {
			t.Fatalf("%s meDRF share %v, want 0.5", s.FrameworkID, s.Share)
		}
	}
}
