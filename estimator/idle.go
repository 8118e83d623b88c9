package estimator

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/brimnode/brim/monitor"
)

// IdleConfig configures the idle estimator. See NewIdle for the options
// and Idle for the formula.
type IdleConfig struct {
	Window     time.Duration // history considered; default 5m
	HalfLife   time.Duration // decay of a cpu peak; default 30s
	Margin     float64       // cpu kept idle, fraction of the node total; default 0.1
	Cap        float64       // upper bound of the cpu offer, fraction of the node total; default 1
	MemMargin  float64       // added to each container's peak memory, fraction of it; default 0.1
	MemCap     float64       // upper bound of the memory offer, fraction of the node total; default 1
	MinSamples int           // below this a container is predicted at its allocation; default 10
	// Unallocated also lends what no non-revocable container was
	// allocated (a standalone agent's spare capacity); default true.
	// Without it only the non-revocable allocation's idle part is lent.
	Unallocated bool
	Memory      bool // also estimate memory; default true
}

// Idle lends what is really idle. CPU is compressible (revocable work runs
// in cpu.idle, which yields at once): it is lent generously — everything
// but the predicted demand of the non-revocable containers and a margin,
// including capacity nobody allocated — and the demand prediction
// follows bursts: each container's peak cpu rate over the window, decayed
// by half every HalfLife (Borg's reservation decay; a burst counts at
// once, and fades). Memory is not compressible: each container counts its
// peak working set over the window plus MemMargin (at most its limit).
//
//	D      = Σ max over samples i of rate_i · 2^(−age_i / half-life)
//	basis  = node total            (unallocated=true)
//	       = min(node total, A)    (unallocated=false; A the non-revocable allocation)
//	idle   = max(0, basis − D − margin · node total)
//	offer  = max(0, min(idle, cap · node total) − revocable allocated)
//
// and for memory, with M = Σ min(limit, p100 working set · (1 + mem-margin)):
//
//	offer  = max(0, min(basis − M, mem-cap · node total) − revocable allocated)
//
// A container with fewer than MinSamples samples counts at its allocation.
type Idle struct {
	cfg IdleConfig
}

var _ Estimator = (*Idle)(nil)

// NewIdle is the idle factory. Options: window, half-life (durations),
// margin, cap, mem-margin, mem-cap (fractions), min-samples,
// unallocated, memory (bools).
func NewIdle(opts Options, _ *slog.Logger) (Estimator, error) {
	r := opts.Reader()
	c := IdleConfig{
		Window:      r.Duration("window", 5*time.Minute),
		HalfLife:    r.Duration("half-life", 30*time.Second),
		Margin:      r.Float("margin", 0.1),
		Cap:         r.Float("cap", 1),
		MemMargin:   r.Float("mem-margin", 0.1),
		MemCap:      r.Float("mem-cap", 1),
		MinSamples:  r.Int("min-samples", 10),
		Unallocated: r.Bool("unallocated", true),
		Memory:      r.Bool("memory", true),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("idle estimator: %w", err)
	}
	return NewIdleWith(c)
}

// NewIdleWith returns an idle estimator for c (zero fields are not
// defaulted); errors wrap ErrInvalidOption.
func NewIdleWith(c IdleConfig) (*Idle, error) {
	switch {
	case c.Window <= 0 || c.HalfLife <= 0:
		return nil, fmt.Errorf("idle estimator: window and half-life must be positive: %w", ErrInvalidOption)
	case c.Margin < 0 || c.Margin >= 1 || c.MemMargin < 0:
		return nil, fmt.Errorf("idle estimator: margin must be in [0, 1) and mem-margin ≥ 0: %w", ErrInvalidOption)
	case c.Cap < 0 || c.Cap > 1 || c.MemCap < 0 || c.MemCap > 1:
		return nil, fmt.Errorf("idle estimator: cap and mem-cap must be in [0, 1]: %w", ErrInvalidOption)
	case c.MinSamples < 2:
		return nil, fmt.Errorf("idle estimator: min-samples must be ≥ 2: %w", ErrInvalidOption)
	}
	return &Idle{cfg: c}, nil
}

// Estimate implements Estimator.
func (e *Idle) Estimate(_ context.Context, u monitor.Usage) (Estimate, error) {
	now := u.Timestamp
	var cpuA, cpuD, memA, memM float64
	var perC []Term
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
		if len(samples) < e.cfg.MinSamples {
			cpuD += alloc
			memM += memAlloc
			note := fmt.Sprintf("allocation: only %d samples (< %d)", len(samples), e.cfg.MinSamples)
			perC = append(perC, Term{Name: "demand cpus " + c.ID, Value: round3(alloc), Unit: "cpus", Note: note})
			if e.cfg.Memory {
				perC = append(perC, Term{Name: "demand mem " + c.ID, Value: round3(memAlloc), Unit: "MiB", Note: note})
			}
			continue
		}
		d, how := e.peak(samples, now)
		cpuD += d
		perC = append(perC, Term{Name: "demand cpus " + c.ID, Value: round3(d), Unit: "cpus", Note: how})
		if e.cfg.Memory {
			_, mems := series(samples, now.Add(-e.cfg.Window))
			p100 := Percentile(mems, 100) / mib
			m := p100 * (1 + e.cfg.MemMargin)
			note := fmt.Sprintf("peak working set %.0f MiB over %s + %g", p100, e.cfg.Window, e.cfg.MemMargin)
			if memAlloc > 0 && m > memAlloc {
				m, note = memAlloc, note+", capped at its limit"
			}
			memM += m
			perC = append(perC, Term{Name: "demand mem " + c.ID, Value: round3(m), Unit: "MiB", Note: note})
		}
	}
	rev := u.Allocated(true)
	totalCPU, totalMem := float64(u.Total.MilliCPUs)/1000, float64(u.Total.MemoryBytes)/mib

	cpuOffer, terms := e.cpu(cpuA, cpuD, totalCPU, float64(rev.MilliCPUs)/1000)
	terms = append(terms, perC...)
	memOffer := 0.0
	if e.cfg.Memory {
		var memTerms []Term
		memOffer, memTerms = e.mem(memA, memM, totalMem, float64(rev.MemoryBytes)/mib)
		terms = append(terms, memTerms...)
	}
	memOffer = math.Floor(memOffer) // whole MiB
	return Estimate{
		Revocable: revocable(cpuOffer, memOffer),
		Explanation: Explanation{
			Estimator: "idle",
			Summary: fmt.Sprintf("offer cpus %.3f = max(0, min(%s %.3f − decayed-peak demand %.3f − margin %.3f, cap %.3f) − revocable allocated %.3f); offer mem %.0f MiB (peak + %g)",
				cpuOffer, e.basisName(), e.basis(cpuA, totalCPU), cpuD, e.cfg.Margin*totalCPU, e.cfg.Cap*totalCPU,
				float64(rev.MilliCPUs)/1000, memOffer, e.cfg.MemMargin),
			Terms: terms,
		},
	}, nil
}

// peak returns a container's predicted cpu demand: its peak rate over the
// window, each rate decayed by its age, and how it came about.
func (e *Idle) peak(samples []monitor.Statistics, now time.Time) (float64, string) {
	since := now.Add(-e.cfg.Window)
	var best, bestRate float64
	var bestAge time.Duration
	n := 0
	for i := 1; i < len(samples); i++ {
		s := &samples[i]
		if s.Timestamp.Before(since) || samples[i-1].Timestamp.Before(since) {
			continue
		}
		r, ok := monitor.CPURate(&samples[i-1], s)
		if !ok {
			continue
		}
		n++
		age := max(0, now.Sub(s.Timestamp))
		if d := r * math.Exp2(-age.Seconds()/e.cfg.HalfLife.Seconds()); d > best || n == 1 {
			best, bestRate, bestAge = d, r, age
		}
	}
	return best, fmt.Sprintf("peak %.3f cpus %s ago, halved every %s (of %d rates over %s)",
		bestRate, bestAge.Round(time.Second), e.cfg.HalfLife, n, e.cfg.Window)
}

func (e *Idle) basis(a, total float64) float64 {
	if e.cfg.Unallocated {
		return total
	}
	return min(a, total)
}

func (e *Idle) basisName() string {
	if e.cfg.Unallocated {
		return "node total"
	}
	return "non-revocable allocation"
}

func (e *Idle) cpu(a, d, total, r float64) (float64, []Term) {
	basis := e.basis(a, total)
	margin := e.cfg.Margin * total
	idle := max(0, basis-d-margin)
	capv := e.cfg.Cap * total
	offer := max(0, min(idle, capv)-r)
	return round3(offer), []Term{
		{Name: "cpus node total", Value: round3(total), Unit: "cpus"},
		{Name: "cpus non-revocable allocation (A)", Value: round3(a), Unit: "cpus"},
		{Name: "cpus basis", Value: round3(basis), Unit: "cpus", Note: e.basisName() + fmt.Sprintf(" (unallocated=%t)", e.cfg.Unallocated)},
		{Name: "cpus predicted demand (D)", Value: round3(d), Unit: "cpus", Note: "Σ decayed peaks of the non-revocable containers"},
		{Name: "cpus margin", Value: round3(margin), Unit: "cpus", Note: fmt.Sprintf("%g × node total", e.cfg.Margin)},
		{Name: "cpus idle", Value: round3(idle), Unit: "cpus", Note: "max(0, basis − D − margin)"},
		{Name: "cpus cap", Value: round3(capv), Unit: "cpus", Note: fmt.Sprintf("%g × node total", e.cfg.Cap)},
		{Name: "cpus revocable allocated (R)", Value: round3(r), Unit: "cpus"},
		{Name: "cpus offer", Value: round3(offer), Unit: "cpus", Note: "max(0, min(idle, cap) − R)"},
	}
}

func (e *Idle) mem(a, m, total, r float64) (float64, []Term) {
	basis := e.basis(a, total)
	idle := max(0, basis-m)
	capv := e.cfg.MemCap * total
	offer := max(0, min(idle, capv)-r)
	return round3(offer), []Term{
		{Name: "mem node total", Value: round3(total), Unit: "MiB"},
		{Name: "mem non-revocable allocation (A)", Value: round3(a), Unit: "MiB"},
		{Name: "mem basis", Value: round3(basis), Unit: "MiB", Note: e.basisName()},
		{Name: "mem predicted demand (M)", Value: round3(m), Unit: "MiB", Note: fmt.Sprintf("Σ peak working set × (1 + %g), at most each limit", e.cfg.MemMargin)},
		{Name: "mem idle", Value: round3(idle), Unit: "MiB", Note: "max(0, basis − M)"},
		{Name: "mem cap", Value: round3(capv), Unit: "MiB", Note: fmt.Sprintf("%g × node total", e.cfg.MemCap)},
		{Name: "mem revocable allocated (R)", Value: round3(r), Unit: "MiB"},
		{Name: "mem offer", Value: round3(offer), Unit: "MiB", Note: "max(0, min(idle, cap) − R)"},
	}
}
