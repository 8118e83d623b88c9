package allocator

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/brimnode/brim/resources"
)

// TestShareTiesAreExact: equal dominant shares tie, however they are
// written, and a tie goes to the older framework or role (issue 14: disk
// 60/400 read 0.15000000000000002 against cpus 12/80 = 0.15, and the newer
// framework won).
func TestShareTiesAreExact(t *testing.T) {
	for _, tc := range []struct {
		name            string
		older, newer    string // what each holds on the full agent
		olderW, newerW  float64
		olderR, newerR  string
		full, remaining string
	}{
		{name: "frameworks", older: "disk:60", newer: "cpus:12", olderR: "r", newerR: "r",
			full: "cpus:12;disk:60", remaining: "cpus:68;mem:1024;disk:340"},
		{name: "roles", older: "disk:60", newer: "cpus:12", olderR: "a", newerR: "b",
			full: "cpus:12;disk:60", remaining: "cpus:68;mem:1024;disk:340"},
		{name: "weighted roles", older: "disk:180", newer: "cpus:12", olderR: "a", newerR: "b", olderW: 3, newerW: 1,
			full: "cpus:12;disk:180", remaining: "cpus:68;mem:1024;disk:220"},
		{name: "weighted roles, other kinds", older: "cpus:36", newer: "disk:60", olderR: "a", newerR: "b", olderW: 3, newerW: 1,
			full: "cpus:36;disk:60", remaining: "cpus:44;mem:1024;disk:340"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := newTest(t, Options{})
			must(t, a.AddAgent(AgentInfo{ID: "full", Total: resources.MustParse(tc.full)}, nil))
			must(t, a.AddAgent(AgentInfo{ID: "free", Total: resources.MustParse(tc.remaining)}, nil))
			if tc.olderW > 0 {
				must(t, a.SetWeight(tc.olderR, tc.olderW))
				must(t, a.SetWeight(tc.newerR, tc.newerW))
			}
			must(t, a.AddFramework(FrameworkInfo{ID: "older", Roles: []string{tc.olderR}}, map[string]resources.Resources{"full": resources.MustParse(tc.older)}))
			must(t, a.AddFramework(FrameworkInfo{ID: "newer", Roles: []string{tc.newerR}}, map[string]resources.Resources{"full": resources.MustParse(tc.newer)}))
			offers := a.Allocate()
			if len(offers) != 1 || offers[0].FrameworkID != "older" {
				t.Fatalf("offers %+v: the free agent should go to the older framework (equal shares)", offers)
			}
		})
	}
}

// TestSharesReportedExactly: equal shares are reported as the same float.
func TestSharesReportedExactly(t *testing.T) {
	a, _ := newTest(t, Options{})
	must(t, a.AddAgent(AgentInfo{ID: "full", Total: resources.MustParse("cpus:12;disk:60")}, nil))
	must(t, a.AddAgent(AgentInfo{ID: "free", Total: resources.MustParse("cpus:68;mem:1024;disk:340")}, nil))
	must(t, a.AddFramework(FrameworkInfo{ID: "d", Roles: []string{"r"}}, map[string]resources.Resources{"full": resources.MustParse("disk:60")}))
	must(t, a.AddFramework(FrameworkInfo{ID: "c", Roles: []string{"r"}}, map[string]resources.Resources{"full": resources.MustParse("cpus:12")}))
	s := a.FrameworkShares()
	if s[0].Share != 0.15 || s[1].Share != 0.15 {
		t.Fatalf("shares %v and %v, want 0.15 both", s[0].Share, s[1].Share)
	}
}

// TestMeDRFNoResidueAfterChurn: under meDRF allocations are weighted by
// real factors; a framework that gave everything back holds exactly
// nothing (no 1e-15 left over), so it ties with a newer framework and,
// being older, comes first.
func TestMeDRFNoResidueAfterChurn(t *testing.T) {
	a, _ := newTest(t, Options{Sorter: SorterMeDRF})
	for i, score := range []float64{1, 2, 7, 0.3, 5} {
		must(t, a.AddAgent(AgentInfo{ID: string(rune('a' + i)), Total: resources.MustParse("cpus:7;mem:3001"), Score: score}, nil))
	}
	addFramework(t, a, "older", "r")
	zero := new(time.Duration)
	r := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		offers := a.Allocate()
		for _, o := range offers {
			// give back a part first, then the rest
			part := resources.MustParse("cpus:0.3;mem:17")
			if r.IntN(2) == 0 && o.Resources.Contains(part) {
				must(t, a.Recover(o.FrameworkID, o.AgentID, part, zero))
				must(t, a.Recover(o.FrameworkID, o.AgentID, o.Resources.Subtract(part), zero))
			} else {
				must(t, a.Recover(o.FrameworkID, o.AgentID, o.Resources, zero))
			}
		}
	}
	if s := a.FrameworkShares()[0].Share; s != 0 {
		t.Fatalf("share %v after giving everything back, want 0", s)
	}
	addFramework(t, a, "newer", "r")
	offers := a.Allocate()
	if len(offers) == 0 || offers[0].FrameworkID != "older" {
		t.Fatalf("first offer %+v, want the older framework's (both hold nothing)", offers)
	}
}

// TestCmpKeys checks the exact comparison against math/big-free
// reasoning: keys built from random small rationals compare as the
// rationals do, including across weights and huge values.
func TestCmpKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	weights := []float64{1, 2, 3, 0.5, 1.5, 0.1, 7, 1e-12, 1e12, math.SmallestNonzeroFloat64 * 1e10, 1e300}
	for range 200000 {
		// num/den·w with small integers, scaled by a common factor so
		// equal values are written differently.
		n1, d1 := uint64(r.IntN(50)), uint64(1+r.IntN(50))
		n2, d2 := uint64(r.IntN(50)), uint64(1+r.IntN(50))
		w1, w2 := weights[r.IntN(3)], weights[r.IntN(3)]
		s1, s2 := uint64(1+r.IntN(1<<20)), uint64(1+r.IntN(1<<20))
		k1, k2 := exactKey(n1*s1, d1*s1, w1), exactKey(n2*s2, d2*s2, w2)
		// n1/(d1 w1) vs n2/(d2 w2) with w in {1,2,3}: integers
		want := cmpInt(n1*d2*uint64(w2), n2*d1*uint64(w1))
		if got := cmpKeys(&k1, &k2); got != want {
			t.Fatalf("%d/(%d·%v) vs %d/(%d·%v): %d, want %d", n1*s1, d1*s1, w1, n2*s2, d2*s2, w2, got, want)
		}
	}
	// Extreme weights and values go through the integers.
	for _, w := range weights {
		big := uint64(1) << 62
		k1, k2 := exactKey(big-1, big, w), exactKey(big-2, big-1, w)
		if cmpKeys(&k1, &k2) != 1 || cmpKeys(&k2, &k1) != -1 || cmpKeys(&k1, &k1) != 0 {
			t.Fatalf("weight %v: (2^62-1)/2^62 must exceed (2^62-2)/(2^62-1)", w)
		}
		half, double := exactKey(1, 2, w), exactKey(2, 1, 4*w)
		if cmpKeys(&half, &double) != 0 {
			t.Fatalf("weight %v: 1/(2w) and 2/(4w) differ", w)
		}
	}
}

func cmpInt(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
