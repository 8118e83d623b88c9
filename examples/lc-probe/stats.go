package main

import (
	"math"
	"slices"
	"time"
)

// percentile returns the q-quantile (0 < q ≤ 1) of sorted by nearest rank:
// the smallest value with at least q of the values at or below it. It
// returns 0 for an empty slice.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// windowStats summarises one window of request latencies.
type windowStats struct {
	End      time.Time
	Requests int
	P50      time.Duration
	P99      time.Duration
	P999     time.Duration
	Max      time.Duration
	Mean     time.Duration
}

// summarize computes a window's figures; it sorts lat in place.
func summarize(end time.Time, lat []time.Duration) windowStats {
	w := windowStats{End: end, Requests: len(lat)}
	if len(lat) == 0 {
		return w
	}
	slices.Sort(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	w.P50, w.P99, w.P999 = percentile(lat, 0.5), percentile(lat, 0.99), percentile(lat, 0.999)
	w.Max, w.Mean = lat[len(lat)-1], sum/time.Duration(len(lat))
	return w
}

// histogram keeps every latency of a run in log-spaced buckets (2 %
// apart), so a long run's percentiles need constant memory.
type histogram struct {
	counts map[int]uint64
	n      uint64
	max    time.Duration
}

const histGrowth = 1.02

func newHistogram() *histogram { return &histogram{counts: map[int]uint64{}} }

func bucketOf(d time.Duration) int {
	if d < time.Microsecond {
		return 0
	}
	return 1 + int(math.Log(float64(d)/float64(time.Microsecond))/math.Log(histGrowth))
}

// upper returns the largest duration that falls in bucket b.
func upper(b int) time.Duration {
	if b == 0 {
		return time.Microsecond
	}
	return time.Duration(float64(time.Microsecond) * math.Pow(histGrowth, float64(b)))
}

func (h *histogram) add(d time.Duration) {
	h.counts[bucketOf(d)]++
	h.n++
	h.max = max(h.max, d)
}

// quantile returns the q-quantile by nearest rank, as the upper bound of
// its bucket (at most 2 % above the true value, never above the maximum).
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	keys := make([]int, 0, len(h.counts))
	for b := range h.counts {
		keys = append(keys, b)
	}
	slices.Sort(keys)
	var seen uint64
	for _, b := range keys {
		seen += h.counts[b]
		if seen >= rank {
			return min(upper(b), h.max)
		}
	}
	return h.max
}
