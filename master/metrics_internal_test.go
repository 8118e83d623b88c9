package master

import (
	"testing"
	"time"
)

// The figures count what happened, as plain values: one allocation
// cycle observed once, in every bucket at or above its duration.
func TestMetricsCountCycles(t *testing.T) {
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	m.allocate()
	x := m.Metrics()
	if x.Cycles.Count != 1 || x.Cycles.Counts[len(x.Cycles.Counts)-1] > 1 {
		t.Fatalf("cycles after one allocation: %+v", x.Cycles)
	}
	h := newHistogram(1, 3) // 1 s, 2 s, 4 s
	h.observe(1500 * time.Millisecond)
	if h.Counts[0] != 0 || h.Counts[1] != 1 || h.Counts[2] != 1 || h.Count != 1 || h.Sum != 1.5 {
		t.Fatalf("1.5 s in buckets 1, 2, 4 s: %+v", h)
	}
	if x.OffersMade != 0 || x.Launches != 0 || x.AgentsConnected != 0 {
		t.Fatalf("figures of an empty master: %+v", x)
	}
}
