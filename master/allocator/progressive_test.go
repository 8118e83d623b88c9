package allocator

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestProgressiveFillSeedExamples(t *testing.T) {
	for _, tc := range []struct {
		name     string
		capacity []float64
		demands  [][]float64
		want     []int
	}{
		// seed 000: 9 CPUs, 18 GB; A <1 CPU, 4 GB>, B <3 CPU, 1 GB>.
		{"9cpu-18gb", []float64{9, 18}, [][]float64{{1, 4}, {3, 1}}, []int{3, 2}},
		// seed 000: 100 CPUs, 100 GB; F1 <4, 1>, F2 <1, 8>.
		{"100cpu-100gb", []float64{100, 100}, [][]float64{{4, 1}, {1, 8}}, []int{20, 10}},
		{"single user", []float64{10, 10}, [][]float64{{1, 2}}, []int{5}},
		{"zero demand", []float64{10}, [][]float64{{0}, {1}}, []int{0, 10}},
		{"no users", []float64{10}, nil, []int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ProgressiveFill(tc.capacity, tc.demands); !slices.Equal(got, tc.want) {
				t.Fatalf("ProgressiveFill = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFairSharesSeedExamples(t *testing.T) {
	got := FairShares([]float64{9, 18}, [][]float64{{1, 4}, {3, 1}})
	if math.Abs(got[0]-3) > 1e-9 || math.Abs(got[1]-2) > 1e-9 {
		t.Fatalf("FairShares = %v, want [3 2]", got)
	}
	got = FairShares([]float64{100, 100}, [][]float64{{4, 1}, {1, 8}})
	if math.Abs(got[0]-20) > 1e-9 || math.Abs(got[1]-10) > 1e-9 {
		t.Fatalf("FairShares = %v, want [20 10]", got)
	}
}

// randomInstance draws a cluster of 1-4 resources and 1-6 users with
// positive demands.
func randomInstance(r *rand.Rand) ([]float64, [][]float64) {
	k := 1 + r.IntN(4)
	n := 1 + r.IntN(6)
	capacity := make([]float64, k)
	for d := range capacity {
		capacity[d] = float64(10 + r.IntN(200))
	}
	demands := make([][]float64, n)
	for u := range demands {
		demands[u] = make([]float64, k)
		for d := range demands[u] {
			demands[u][d] = float64(1+r.IntN(40)) / 4
		}
	}
	return capacity, demands
}

const eps = 1e-7

// tasksIn is how many tasks of demand dem a bundle of resources allows.
func tasksIn(bundle, dem []float64) float64 {
	t := math.Inf(1)
	for d, x := range dem {
		if x > 0 {
			t = math.Min(t, bundle[d]/x)
		}
	}
	return t
}

func scale(v []float64, f float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x * f
	}
	return out
}

func dominantShare(bundle, capacity []float64) float64 {
	var s float64
	for d, x := range bundle {
		s = math.Max(s, x/capacity[d])
	}
	return s
}

// TestDRFProperties checks the four properties of the DRF paper on the
// continuous allocation over thousands of random instances (fixed seed).
func TestDRFProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 7))
	for i := range 5000 {
		capacity, demands := randomInstance(r)
		n := len(demands)
		tasks := FairShares(capacity, demands)
		used := make([]float64, len(capacity))
		for u := range n {
			for d, x := range demands[u] {
				used[d] += tasks[u] * x
			}
		}
		for d := range used {
			if used[d] > capacity[d]*(1+eps) {
				t.Fatalf("instance %d: resource %d over capacity: %v > %v", i, d, used[d], capacity[d])
			}
		}
		for u := range n {
			mine := scale(demands[u], tasks[u])
			// Pareto efficiency: every user is blocked by a saturated
			// resource it needs.
			blocked := false
			for d, x := range demands[u] {
				if x > 0 && used[d] >= capacity[d]*(1-eps) {
					blocked = true
				}
			}
			if !blocked {
				t.Fatalf("instance %d: user %d could get more without taking from anyone (%v of %v)", i, u, used, capacity)
			}
			// Sharing incentive: at least 1/n of its dominant resource.
			if ds := dominantShare(mine, capacity); ds < 1/float64(n)-eps {
				t.Fatalf("instance %d: user %d dominant share %v < 1/%d", i, u, ds, n)
			}
			// Envy-freeness: no other user's bundle runs more of u's tasks.
			for v := range n {
				if v == u {
					continue
				}
				if other := tasksIn(scale(demands[v], tasks[v]), demands[u]); other > tasks[u]*(1+eps)+eps {
					t.Fatalf("instance %d: user %d envies %d (%v > %v tasks)", i, u, v, other, tasks[u])
				}
			}
		}
		// Strategy-proofness: user 0 reports a distorted demand; what it
		// receives runs no more of its true tasks.
		lie := slices.Clone(demands)
		lie[0] = make([]float64, len(capacity))
		for d := range lie[0] {
			lie[0][d] = demands[0][d] * (0.25 + 1.5*r.Float64())
		}
		lied := FairShares(capacity, lie)
		if gain := tasksIn(scale(lie[0], lied[0]), demands[0]); gain > tasks[0]*(1+eps)+eps {
			t.Fatalf("instance %d: lying gains user 0 %v tasks > %v truthful", i, gain, tasks[0])
		}
	}
}

// TestProgressiveFillProperties checks the integral allocation: within
// capacity, maximal (no user's next task fits: Pareto-efficient among
// integral allocations), and no user below its dominant share by more
// than the largest single task of the others (the price of indivisible
// tasks).
func TestProgressiveFillProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 8))
	for i := range 5000 {
		capacity, demands := randomInstance(r)
		tasks := ProgressiveFill(capacity, demands)
		used := make([]float64, len(capacity))
		for u, dem := range demands {
			for d, x := range dem {
				used[d] += float64(tasks[u]) * x
			}
		}
		for d := range used {
			if used[d] > capacity[d]*(1+eps) {
				t.Fatalf("instance %d: over capacity", i)
			}
		}
		maxStep := 0.0
		for _, dem := range demands {
			maxStep = math.Max(maxStep, dominantShare(dem, capacity))
		}
		for u, dem := range demands {
			if fits(capacity, used, dem) {
				t.Fatalf("instance %d: user %d's next task still fits: not maximal", i, u)
			}
			ds := dominantShare(scale(dem, float64(tasks[u])), capacity)
			if ds < 1/float64(len(demands))-maxStep*float64(len(demands))-eps {
				t.Fatalf("instance %d: user %d dominant share %v far below 1/n", i, u, ds)
			}
		}
	}
}
