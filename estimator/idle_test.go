package estimator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/monitor"
)

// at is usage at the time of the last of n one-second samples.
func at(n int, total monitor.Capacity, cs ...monitor.ContainerUsage) monitor.Usage {
	return monitor.Usage{Timestamp: t0.Add(time.Duration(n) * time.Second), Total: total, Containers: cs}
}

func offer(t *testing.T, e Estimator, u monitor.Usage) (cpus, mem float64, ex Explanation) {
	t.Helper()
	est, err := e.Estimate(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	return est.Revocable.CPUs().Float64(), est.Revocable.Mem().Float64(), est.Explanation
}

func near(a, b float64) bool { return a > b-0.0015 && a < b+0.0015 }

// TestIdleEstimator: the held-out experiment's node (2 cpus, an LC
// allocated 0.5 cpus using 0.2 — 1.2 cores idle beyond what usage lent),
// on a standalone agent: idle lends everything but the LC's predicted
// demand and a 10 % margin, follows a burst at once, lets it fade by
// half every half-life, and keeps memory at peak + 10 %.
func TestIdleEstimator(t *testing.T) {
	total := monitor.Capacity{MilliCPUs: 2000, MemoryBytes: 2048 * mib}
	e, err := NewIdle(Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	steady := repeat(0.2, 60)
	lc := container("lc", false, 500, 1024, steady, 400)
	cpus, mem, ex := offer(t, e, at(60, total, lc))
	// 2 − 0.2 − 0.2 margin = 1.6 cpus; mem 2048 − 400 × 1.1 = 1608 MiB.
	if !near(cpus, 1.6) || mem != 1608 {
		t.Fatalf("steady: cpus %v mem %v\n%s", cpus, mem, ex)
	}
	// The usage estimator lends only slack inside the LC's allocation.
	u, _ := NewUsage(Options{}, nil)
	if ucpus, _, _ := offer(t, u, at(60, total, lc)); ucpus >= 0.3 {
		t.Fatalf("usage lends %v cpus: the comparison is moot", ucpus)
	}
	// Every term of the formula is in the explanation.
	for _, name := range []string{"cpus node total", "cpus non-revocable allocation (A)", "cpus basis", "cpus predicted demand (D)",
		"cpus margin", "cpus idle", "cpus cap", "cpus revocable allocated (R)", "cpus offer", "demand cpus lc",
		"mem node total", "mem basis", "mem predicted demand (M)", "mem idle", "mem cap", "mem revocable allocated (R)", "mem offer", "demand mem lc"} {
		found := false
		for _, term := range ex.Terms {
			found = found || term.Name == name
		}
		if !found {
			t.Errorf("term %q missing from:\n%s", name, ex)
		}
	}
	if !strings.Contains(ex.String(), "halved every 30s") {
		t.Errorf("explanation does not say how the demand was predicted:\n%s", ex)
	}

	// A burst (1.5 cpus in the last second) counts at once…
	burst := container("lc", false, 500, 1024, append(repeat(0.2, 59), 1.5), 400)
	if cpus, _, ex := offer(t, e, at(60, total, burst)); !near(cpus, 0.3) {
		t.Fatalf("burst: cpus %v, want 0.3\n%s", cpus, ex)
	}
	// …and fades: 60 s (two half-lives) later it counts 1.5 / 4.
	faded := container("lc", false, 500, 1024, append(append(repeat(0.2, 59), 1.5), repeat(0.2, 60)...), 400)
	if cpus, _, ex := offer(t, e, at(120, total, faded)); !near(cpus, 2-0.375-0.2) {
		t.Fatalf("faded burst: cpus %v, want %v\n%s", cpus, 2-0.375-0.2, ex)
	}

	// Revocable work already allocated is subtracted; a container with
	// too few samples counts at its allocation.
	be := container("be", true, 1000, 512, repeat(1, 60), 500)
	young := container("young", false, 300, 256, repeat(0.1, 3), 10)
	cpus, mem, ex = offer(t, e, at(60, total, lc, be, young))
	if !near(cpus, 2-0.2-0.3-0.2-1) || mem != 2048-440-256-512 {
		t.Fatalf("with revocable and young: cpus %v mem %v\n%s", cpus, mem, ex)
	}

	// unallocated=false: only the non-revocable allocation's idle part.
	e2, err := NewIdle(Options{"unallocated": "false"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cpus, mem, ex := offer(t, e2, at(60, total, lc)); !near(cpus, 0.5-0.2-0.2) || mem != 1024-440 {
		t.Fatalf("unallocated=false: cpus %v mem %v\n%s", cpus, mem, ex)
	}
	// A peak beyond the limit counts at the limit.
	fat := container("lc", false, 500, 300, steady, 400)
	if _, mem, ex := offer(t, e, at(60, total, fat)); mem != 2048-300 {
		t.Fatalf("memory capped at the limit: mem %v\n%s", mem, ex)
	}
}

func TestIdleOptionsInvalid(t *testing.T) {
	for _, o := range []Options{{"window": "0s"}, {"half-life": "x"}, {"margin": "1"}, {"cap": "1.5"},
		{"mem-margin": "-0.1"}, {"mem-cap": "2"}, {"min-samples": "1"}, {"unallocated": "maybe"}} {
		if _, err := NewIdle(o, nil); err == nil {
			t.Errorf("%v accepted", o)
		}
	}
}
