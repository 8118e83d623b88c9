package estimator

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/brimnode/brim/monitor"
)

// UsageConfig configures the usage estimator. See NewUsage for the options
// and the formula.
type UsageConfig struct {
	Window        time.Duration // history considered; default 5m
	Percentile    float64       // of each container's cpu usage; default 95
	MemPercentile float64       // of each container's working set; default 100 (max)
	Margin        float64       // safety margin, fraction of the non-revocable allocation; default 0.1
	Cap           float64       // upper bound, fraction of the node's total; default 0.5
	MinSamples    int           // below this a container is predicted at its allocation; default 10
	Recent        int           // samples whose mean also bounds the prediction from below; default 3
	Memory        bool          // also estimate memory; default true
}

// Usage estimates slack from the history of the non-revocable containers:
// for each resource,
//
//	slack = A − P − margin·A,  offer = max(0, min(slack, cap·total) − R)
//
// where A is the non-revocable allocation, P the sum over non-revocable
// containers of their predicted usage (a high percentile of their usage
// over the window, or the mean of the last Recent samples if higher, so a
// container that turns busy shrinks the estimate within Recent samples
// rather than (1 − percentile/100) × window; the allocation itself for a
// container with fewer than MinSamples samples), total the node's total and R the revocable
// resources already allocated. Memory uses the working set and, by
// default, the window's maximum. Hysteresis on what is forwarded is the
// Forwarder's job.
type Usage struct {
	cfg UsageConfig
}

var _ Estimator = (*Usage)(nil)

// NewUsage is the usage factory. Options: window (duration), percentile,
// mem-percentile (0–100), margin, cap (fractions 0–1), min-samples,
// recent (samples; 0 disables), memory (bool).
func NewUsage(opts Options, _ *slog.Logger) (Estimator, error) {
	r := opts.Reader()
	c := UsageConfig{
		Window:        r.Duration("window", 5*time.Minute),
		Percentile:    r.Float("percentile", 95),
		MemPercentile: r.Float("mem-percentile", 100),
		Margin:        r.Float("margin", 0.1),
		Cap:           r.Float("cap", 0.5),
		MinSamples:    r.Int("min-samples", 10),
		Recent:        r.Int("recent", 3),
		Memory:        r.Bool("memory", true),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("usage estimator: %w", err)
	}
	return NewUsageWith(c)
}

// NewUsageWith returns a usage estimator for c (zero fields are not
// defaulted); errors wrap ErrInvalidOption.
func NewUsageWith(c UsageConfig) (*Usage, error) {
	switch {
	case c.Window <= 0:
		return nil, fmt.Errorf("usage estimator: window %s: %w", c.Window, ErrInvalidOption)
	case c.Percentile <= 0 || c.Percentile > 100 || c.MemPercentile <= 0 || c.MemPercentile > 100:
		return nil, fmt.Errorf("usage estimator: percentiles must be in (0, 100]: %w", ErrInvalidOption)
	case c.Margin < 0 || c.Margin >= 1 || c.Cap < 0 || c.Cap > 1:
		return nil, fmt.Errorf("usage estimator: margin must be in [0, 1) and cap in [0, 1]: %w", ErrInvalidOption)
	case c.MinSamples < 2 || c.Recent < 0:
		return nil, fmt.Errorf("usage estimator: min-samples must be ≥ 2 and recent ≥ 0: %w", ErrInvalidOption)
	}
	return &Usage{cfg: c}, nil
}

// Estimate implements Estimator.
func (e *Usage) Estimate(_ context.Context, u monitor.Usage) (Estimate, error) {
	now := u.Timestamp
	var cpuA, cpuP, memA, memP float64
	var terms []Term
	for i := range u.Containers {
		c := &u.Containers[i]
		if c.Revocable {
			continue
		}
		alloc := float64(c.Limits.MilliCPUs) / 1000
		memAlloc := float64(c.Limits.MemoryBytes) / mib
		cpuA += alloc
		memA += memAlloc
		samples := c.History.Samples()
		if now.IsZero() && len(samples) > 0 {
			now = samples[len(samples)-1].Timestamp
		}
		cpus, mems := series(samples, now.Add(-e.cfg.Window))
		if len(cpus) < e.cfg.MinSamples-1 {
			cpuP += alloc
			memP += memAlloc
			terms = append(terms, Term{Name: "predicted cpus " + c.ID, Value: alloc, Unit: "cpus",
				Note: fmt.Sprintf("allocation: only %d samples (< %d)", len(samples), e.cfg.MinSamples)})
			continue
		}
		pc := Percentile(cpus, e.cfg.Percentile)
		pm := Percentile(mems, e.cfg.MemPercentile) / mib
		how := fmt.Sprintf("p%g of %d rates over %s", e.cfg.Percentile, len(cpus), e.cfg.Window)
		if k := min(e.cfg.Recent, len(cpus)); k > 0 {
			if m := mean(cpus[len(cpus)-k:]); m > pc {
				pc, how = m, fmt.Sprintf("mean of the last %d rates (above the p%g over %s)", k, e.cfg.Percentile, e.cfg.Window)
			}
			if m := mean(mems[max(0, len(mems)-k):]) / mib; m > pm {
				pm = m
			}
		}
		cpuP += pc
		memP += pm
		terms = append(terms, Term{Name: "predicted cpus " + c.ID, Value: round3(pc), Unit: "cpus",
			Note: fmt.Sprintf("%s (allocation %g)", how, alloc)})
	}
	rev := u.Allocated(true)
	cpuR, memR := float64(rev.MilliCPUs)/1000, float64(rev.MemoryBytes)/mib
	totalCPU, totalMem := float64(u.Total.MilliCPUs)/1000, float64(u.Total.MemoryBytes)/mib

	cpuOffer, cpuTerms := e.formula("cpus", "cpus", cpuA, cpuP, totalCPU, cpuR)
	terms = append(cpuTerms, terms...)
	memOffer := 0.0
	if e.cfg.Memory {
		var memTerms []Term
		memOffer, memTerms = e.formula("mem", "MiB", memA, memP, totalMem, memR)
		terms = append(terms, memTerms...)
	}
	memOffer = math.Floor(memOffer) // whole MiB
	return Estimate{
		Revocable: revocable(cpuOffer, memOffer),
		Explanation: Explanation{
			Estimator: "usage",
			Summary: fmt.Sprintf("offer cpus %.3f = max(0, min(%.3f − p%g usage %.3f − margin %.3f, cap %.3f) − revocable allocated %.3f); offer mem %.0f MiB",
				cpuOffer, cpuA, e.cfg.Percentile, cpuP, e.cfg.Margin*cpuA, e.cfg.Cap*totalCPU, cpuR, memOffer),
			Terms: terms,
		},
	}, nil
}

func (e *Usage) formula(name, unit string, a, p, total, r float64) (float64, []Term) {
	margin := e.cfg.Margin * a
	slack := max(0, a-p-margin)
	capv := e.cfg.Cap * total
	offer := max(0, min(slack, capv)-r)
	return round3(offer), []Term{
		{Name: name + " non-revocable allocation (A)", Value: round3(a), Unit: unit},
		{Name: name + " predicted usage (P)", Value: round3(p), Unit: unit, Note: "sum over non-revocable containers"},
		{Name: name + " margin", Value: round3(margin), Unit: unit, Note: fmt.Sprintf("%g × A", e.cfg.Margin)},
		{Name: name + " slack", Value: round3(slack), Unit: unit, Note: "max(0, A − P − margin)"},
		{Name: name + " cap", Value: round3(capv), Unit: unit, Note: fmt.Sprintf("%g × node total %g", e.cfg.Cap, total)},
		{Name: name + " revocable allocated (R)", Value: round3(r), Unit: unit},
		{Name: name + " offer", Value: round3(offer), Unit: unit, Note: "max(0, min(slack, cap) − R)"},
	}
}

// series returns the cpu rates between consecutive samples and the memory
// working sets of the samples taken at or after since.
func series(samples []monitor.Statistics, since time.Time) (cpus, mems []float64) {
	for i := range samples {
		s := &samples[i]
		if s.Timestamp.Before(since) {
			continue
		}
		if s.HasMemory {
			ws := s.MemWorkingSet
			if ws == 0 {
				ws = s.MemUsageBytes
			}
			mems = append(mems, float64(ws))
		}
		if i > 0 && !samples[i-1].Timestamp.Before(since) {
			if r, ok := monitor.CPURate(&samples[i-1], s); ok {
				cpus = append(cpus, r)
			}
		}
	}
	return cpus, mems
}

// Percentile returns the p-th percentile (0 < p ≤ 100) of xs by linear
// interpolation between closest ranks; 0 for no values. xs is not modified.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if p >= 100 {
		return s[len(s)-1]
	}
	rank := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(rank))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (s[hi]-s[lo])*(rank-float64(lo))
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }
