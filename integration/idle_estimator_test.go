package integration

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestIdleEstimator: through a standalone agent (cpus:2, no master) the
// idle estimator lends what nobody uses — capacity nobody allocated
// included — so a 1-cpu revocable container is admitted beside a 0.5-cpu
// latency-critical one that idles (the usage estimator lent 0.18 cpus
// there: only slack inside the LC's allocation); when the LC turns busy
// the offer shrinks at once (its decayed peak follows the burst), and
// every term of the formula is in `brim agent explain`.
func TestIdleEstimator(t *testing.T) {
	a := startAgent(t, "--estimator", "idle", "--estimator-opt", "min-samples=3", "--estimator-opt", "half-life=2s",
		"--estimator-interval", "1s", "--monitor-interval", "500ms")
	lc := a.run("--cpus", "0.5", "--mem", "64", "--", "sh", "-c",
		`while [ ! -e /mnt/sandbox/busy ]; do sleep 0.1; done; while :; do :; done`)
	var idle explainOut
	eventually(t, "the idle estimate lends the unallocated cpus beside the LC", func() bool {
		idle = a.explain()
		if idle.Current == nil {
			return false
		}
		for _, term := range idle.Current.Terms {
			// The LC is in the estimate, with enough samples to be
			// predicted from its use rather than its allocation.
			if term.Name == "demand cpus "+lc && term.Value < 0.5 {
				return idle.Current.CPUs >= 1.2 && idle.Current.MemMiB > 1024
			}
		}
		return false
	})
	t.Logf("idle: %s (%s)", idle.Current.Revocable, idle.Current.Summary)
	terms := map[string]bool{}
	for _, term := range idle.Current.Terms {
		terms[term.Name] = true
	}
	for _, name := range []string{"cpus node total", "cpus basis", "cpus predicted demand (D)", "cpus margin", "cpus idle",
		"cpus revocable allocated (R)", "cpus offer", "demand cpus " + lc, "mem predicted demand (M)", "mem offer", "demand mem " + lc} {
		if !terms[name] {
			t.Errorf("explain lacks the term %q: %+v", name, idle.Current.Terms)
		}
	}
	// A revocable container of 1 cpu fits in the pool (it would not with
	// usage's 0.18 cpus, nor with noop).
	be := a.run("--revocable", "--cpus", "1", "--mem", "128", "--", "sleep", "600")
	if c := a.inspect(be); c.State != "running" {
		t.Fatalf("revocable container: %s", sprint(c))
	}

	c := a.inspect(lc)
	if err := os.WriteFile(filepath.Join(c.SandboxDir, "busy"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var busy explainOut
	eventually(t, "the estimate shrinks once the LC is busy", func() bool {
		busy = a.explain()
		return busy.Current.ComputedAt.After(start) && busy.Current.CPUs <= idle.Current.CPUs-1.2
	})
	t.Logf("busy: %s after %s (%s)", busy.Current.Revocable, time.Since(start).Round(time.Millisecond), busy.Current.Summary)
}
