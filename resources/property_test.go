package resources

import (
	"math/rand/v2"
	"testing"
)

// gen builds random Resources, deliberately not normalized (duplicate keys,
// unsorted, empty roles, adjacent ranges), from small alphabets so that keys
// collide often. Ports come from [portBase, portBase+60] and set items from
// items, so a caller can make two values disjoint.
type gen struct {
	rng      *rand.Rand
	portBase uint64
	items    []string
}

func (g gen) resources() Resources {
	n := g.rng.IntN(7)
	out := make(Resources, 0, n)
	for range n {
		var e Resource
		switch g.rng.IntN(4) {
		case 0, 1:
			e = Resource{Name: []string{"cpus", "mem"}[g.rng.IntN(2)], Scalar: Value(g.rng.IntN(5000))}
		case 2:
			e = Resource{Name: "ports", Type: Ranges}
			for range g.rng.IntN(4) {
				b := g.portBase + uint64(g.rng.IntN(50))
				e.Ranges = append(e.Ranges, Range{b, b + uint64(g.rng.IntN(10))})
			}
		case 3:
			e = Resource{Name: "disks", Type: Set}
			for range g.rng.IntN(4) {
				e.Set = append(e.Set, g.items[g.rng.IntN(len(g.items))])
			}
		}
		switch g.rng.IntN(5) {
		case 0:
			e.Role = "" // reads as "*"
		case 1:
			e.Role = "*"
			e.Revocable = true
		case 2:
			e.Role = "r1"
		case 3:
			e.Role = "r2"
			e.Reservation = &Reservation{Principal: []string{"p1", "p2"}[g.rng.IntN(2)]}
		default:
			e.Role = "*"
		}
		out = append(out, e)
	}
	return out
}

func newGens(seed uint64) (a, b gen) {
	rng := rand.New(rand.NewPCG(seed, 42))
	return gen{rng, 0, []string{"a", "b", "c"}}, gen{rng, 1000, []string{"x", "y", "z"}}
}

const propertyRuns = 3000

func TestProperties(t *testing.T) {
	ga, gb := newGens(1)
	for i := range propertyRuns {
		a, b, c := ga.resources(), gb.resources(), ga.resources()
		fail := func(what string, got any) {
			t.Helper()
			t.Fatalf("run %d: %s\na = %#v\nb = %#v\nc = %#v\ngot %v", i, what, a, b, c, got)
		}
		sum := a.Add(b)
		if !sum.isNormalized() {
			fail("a+b not normalized", sum)
		}
		// b's ranges and set items are disjoint from a's, so subtraction
		// undoes addition exactly.
		if got := sum.Subtract(b); !got.Equal(a) {
			fail("a+b-b != a", got)
		}
		if !sum.Contains(a) || !sum.Contains(b) {
			fail("a+b does not contain a and b", sum)
		}
		if got := b.Add(a); !got.Equal(sum) {
			fail("a+b != b+a", got)
		}
		if x, y := a.Add(b).Add(c), a.Add(b.Add(c)); !x.Equal(y) {
			fail("(a+b)+c != a+(b+c)", [2]Resources{x, y})
		}
		diff := a.Subtract(c)
		if !diff.isNormalized() {
			fail("a-c not normalized", diff)
		}
		if !a.Contains(diff) {
			fail("a does not contain a-c", diff)
		}
		if got := diff.Add(c); !got.Contains(a) {
			fail("(a-c)+c does not contain a", got)
		}
		if a.Contains(c) {
			if got := diff.Add(c); !got.Equal(a) {
				fail("a contains c but (a-c)+c != a", got)
			}
		}
		if got := a.Subtract(a); !got.IsEmpty() {
			fail("a-a not empty", got)
		}
		if a.Contains(c) && c.Contains(a) != a.Equal(c) {
			fail("mutual containment differs from Equal", nil)
		}
		if got := MustParse(a.String()); !got.Equal(a) {
			fail("Parse(String(a)) != a", got)
		}
		if got := a.Revocable().Add(a.NonRevocable()); !got.Equal(a) {
			fail("revocable + non-revocable != a", got)
		}
		if got := a.Reserved("").Add(a.Unreserved()); !got.Equal(a) {
			fail("reserved + unreserved != a", got)
		}
		var byRole Resources
		for _, part := range a.ByRole() {
			byRole = byRole.Add(part)
		}
		if !byRole.Equal(a) {
			fail("sum of ByRole != a", byRole)
		}
		flat := a.Flatten()
		for _, name := range []string{"cpus", "mem"} {
			if flat.Scalar(name) != a.Scalar(name) {
				fail("Flatten changed the total of "+name, flat)
			}
		}
		if got := a.Unreserve(); got.Scalar("cpus") != a.Scalar("cpus") {
			fail("Unreserve changed the cpus total", got)
		}
		if err := a.normalized().Validate(); err != nil {
			fail("normalized value invalid", err)
		}
	}
}

// TestNoFloatDrift adds and removes 0.1 cpu a thousand times: with floats
// the total drifts; with Value it is exact.
func TestNoFloatDrift(t *testing.T) {
	tenth := MustParse("cpus:0.1")
	var r Resources
	for range 1000 {
		r = r.Add(tenth)
	}
	if r.CPUs() != FromInt(100) {
		t.Fatalf("1000 × 0.1 cpus = %v, want 100", r.CPUs())
	}
	for range 999 {
		r = r.Subtract(tenth)
	}
	if !r.Equal(tenth) {
		t.Fatalf("100 - 999 × 0.1 cpus = %v, want 0.1", r)
	}
}
