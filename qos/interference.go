package qos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/brimnode/brim/monitor"
)

// Signal names of the interference controller.
const (
	SignalCPUThrottling = "cpu-throttling" // fraction of CFS periods throttled
	SignalRunQueueP99   = "runqueue-p99"   // seconds, from the eBPF monitor
	SignalPSICPU        = "psi-cpu"        // fraction of time stalled (some), from PSI totals
	SignalPSIMemory     = "psi-memory"
	SignalAppLatency    = "app-latency" // seconds, p99 reported by the application
	SignalRecovered     = "recovered"
)

// InterferenceConfig configures the interference controller. NewInterference
// fills defaults from options.
type InterferenceConfig struct {
	// EnterFactor: a signal is degraded above baseline × EnterFactor (and
	// above baseline + its floor); default 2.
	EnterFactor float64
	// ExitFactor: once corrections are in force the signal counts as
	// recovered only below baseline × ExitFactor (hysteresis); default 1.3.
	ExitFactor float64
	// Floors are the minimum absolute excess over the baseline, by signal,
	// so near-zero baselines do not trigger on noise.
	Floors map[string]float64
	// Alpha is the EWMA weight of a new quiet sample in the baseline;
	// default 0.1.
	Alpha float64
	// Warmup is the number of quiet samples before a baseline is trusted;
	// default 10.
	Warmup int
	// Cooldown is the minimum time between two escalations (or
	// de-escalations); default 3 s.
	Cooldown time.Duration
	// RecoverAfter is how long every victim must stay healthy before one
	// step of de-escalation; default 10 s.
	RecoverAfter time.Duration
	// ThrottleFraction is the throttled quota as a fraction of a revocable
	// container's allocation; default 0.2. MinQuota (mcpu) bounds it from
	// below; default 10.
	ThrottleFraction float64
	MinQuota         int64
}

// DefaultFloors are the default absolute floors per signal.
var DefaultFloors = map[string]float64{
	SignalCPUThrottling: 0.1,
	SignalRunQueueP99:   0.001,
	SignalPSICPU:        0.1,
	SignalPSIMemory:     0.1,
	SignalAppLatency:    0.0005,
}

// Interference protects every non-revocable (latency-critical) container:
// it compares each of its signals with the container's own baseline and,
// while any is degraded, escalates one step per cool-down — THROTTLE every
// revocable container, then FREEZE them, then KILL them one at a time,
// youngest first. When every victim has stayed healthy for RecoverAfter it
// steps back down (THAW, then UNTHROTTLE). Baselines are learned only
// while no correction is in force and the signal is not degraded. Every
// correction names the signal (and victim) that triggered it. Not safe for
// concurrent use.
type Interference struct {
	cfg InterferenceConfig

	baselines map[string]map[string]*baseline // victim → signal → baseline

	level        int // 0 none, 1 throttled, 2 frozen, 3 killing
	lastChange   time.Time
	healthySince time.Time
	cause        Trigger
	throttled    map[string]bool
	frozen       map[string]bool
	killed       map[string]bool // until they leave the usage
}

type baseline struct {
	mean float64
	n    int
}

var _ Controller = (*Interference)(nil)

// Levels of the graded response (Interference.Level).
const (
	LevelNone = iota
	LevelThrottle
	LevelFreeze
	LevelKill
)

// NewInterference is the interference factory. Options: enter-factor,
// exit-factor, alpha, warmup, cooldown, recover-after, throttle-fraction,
// min-quota, and floor-<signal> (e.g. floor-runqueue-p99=0.002).
func NewInterference(opts Options, _ *slog.Logger) (Controller, error) {
	var errs []error
	c := InterferenceConfig{
		EnterFactor:      opts.float("enter-factor", 2, &errs),
		ExitFactor:       opts.float("exit-factor", 1.3, &errs),
		Alpha:            opts.float("alpha", 0.1, &errs),
		Warmup:           opts.int("warmup", 10, &errs),
		Cooldown:         opts.duration("cooldown", 3*time.Second, &errs),
		RecoverAfter:     opts.duration("recover-after", 10*time.Second, &errs),
		ThrottleFraction: opts.float("throttle-fraction", 0.2, &errs),
		MinQuota:         int64(opts.int("min-quota", 10, &errs)),
		Floors:           map[string]float64{},
	}
	for s, f := range DefaultFloors {
		c.Floors[s] = opts.float("floor-"+s, f, &errs)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("interference controller: %w", err)
	}
	return NewInterferenceWith(c)
}

// NewInterferenceWith returns an interference controller for c; errors
// wrap ErrInvalidOption.
func NewInterferenceWith(c InterferenceConfig) (*Interference, error) {
	switch {
	case c.EnterFactor <= 1 || c.ExitFactor < 1 || c.ExitFactor > c.EnterFactor:
		return nil, fmt.Errorf("interference controller: need 1 ≤ exit-factor ≤ enter-factor, enter-factor > 1: %w", ErrInvalidOption)
	case c.Alpha <= 0 || c.Alpha > 1 || c.Warmup < 1:
		return nil, fmt.Errorf("interference controller: need 0 < alpha ≤ 1, warmup ≥ 1: %w", ErrInvalidOption)
	case c.ThrottleFraction <= 0 || c.ThrottleFraction > 1 || c.MinQuota < 1:
		return nil, fmt.Errorf("interference controller: need 0 < throttle-fraction ≤ 1, min-quota ≥ 1: %w", ErrInvalidOption)
	}
	if c.Floors == nil {
		c.Floors = DefaultFloors
	}
	return &Interference{
		cfg:       c,
		baselines: map[string]map[string]*baseline{},
		throttled: map[string]bool{},
		frozen:    map[string]bool{},
		killed:    map[string]bool{},
	}, nil
}

// Level returns the current level of the graded response (LevelNone…).
func (ic *Interference) Level() int { return ic.level }

// Signals returns the signals of container c in this usage snapshot, by
// name; a signal the host cannot provide is absent.
func Signals(c *monitor.ContainerUsage) map[string]float64 {
	out := map[string]float64{}
	if p := c.History.Last(2); len(p) == 2 {
		prev, cur := &p[0], &p[1]
		if f, ok := monitor.ThrottledFraction(prev, cur); ok {
			out[SignalCPUThrottling] = f
		}
		if dt := cur.Timestamp.Sub(prev.Timestamp); dt > 0 && prev.HasPressure && cur.HasPressure {
			out[SignalPSICPU] = max(0, float64(cur.CPUPressure.SomeTotal-prev.CPUPressure.SomeTotal)/float64(dt))
			out[SignalPSIMemory] = max(0, float64(cur.MemPressure.SomeTotal-prev.MemPressure.SomeTotal)/float64(dt))
		}
	}
	// Latest may carry a latency reported after the round (event-driven).
	if rq := c.Latest.RunQueue; rq != nil {
		out[SignalRunQueueP99] = rq.P99.Seconds()
	}
	if al := c.Latest.AppLatency; al != nil {
		out[SignalAppLatency] = al.P99.Seconds()
	}
	return out
}

// Corrections implements Controller. The round's time is u.Timestamp.
func (ic *Interference) Corrections(_ context.Context, u monitor.Usage) ([]Correction, error) {
	now := u.Timestamp
	live := map[string]bool{}
	var worst *Trigger
	worstRatio := 0.0
	for i := range u.Containers {
		c := &u.Containers[i]
		live[c.ID] = true
		if c.Revocable {
			continue
		}
		bs := ic.baselines[c.ID]
		if bs == nil {
			bs = map[string]*baseline{}
			ic.baselines[c.ID] = bs
		}
		for sig, v := range Signals(c) {
			b := bs[sig]
			if b == nil {
				b = &baseline{}
				bs[sig] = b
			}
			factor := ic.cfg.EnterFactor
			if ic.level > LevelNone {
				factor = ic.cfg.ExitFactor
			}
			thr := max(b.mean*factor, b.mean+ic.cfg.Floors[sig])
			if b.n >= ic.cfg.Warmup && v > thr {
				if r := v / thr; worst == nil || r > worstRatio {
					worst = &Trigger{Signal: sig, Victim: c.ID, Value: v, Baseline: b.mean, Threshold: thr}
					worstRatio = r
				}
				continue
			}
			if ic.level == LevelNone {
				if b.n == 0 {
					b.mean = v
				} else {
					b.mean += ic.cfg.Alpha * (v - b.mean)
				}
				b.n++
			}
		}
	}
	for id := range ic.baselines {
		if !live[id] {
			delete(ic.baselines, id)
		}
	}
	for id := range ic.throttled {
		if !live[id] {
			delete(ic.throttled, id)
		}
	}
	for id := range ic.frozen {
		if !live[id] {
			delete(ic.frozen, id)
		}
	}
	for id := range ic.killed {
		if !live[id] {
			delete(ic.killed, id)
		}
	}

	var out []Correction
	be := slices.DeleteFunc(youngestRevocable(&u), func(c *monitor.ContainerUsage) bool { return ic.killed[c.ID] })
	cooled := ic.lastChange.IsZero() || now.Sub(ic.lastChange) >= ic.cfg.Cooldown
	if worst != nil && len(be) == 0 && ic.level == LevelNone {
		// Nothing revocable runs: whatever hurts the victim, corrections
		// cannot help. Do not arm the response for work that arrives later.
		return nil, nil
	}
	if worst != nil {
		ic.healthySince = time.Time{}
		switch {
		case ic.level == LevelNone:
			ic.step(LevelThrottle, now, *worst)
		case cooled && ic.level < LevelKill && len(be) > 0:
			ic.step(ic.level+1, now, *worst)
		case cooled && ic.level == LevelKill && len(be) > 0:
			ic.cause, ic.lastChange = *worst, now
			c := be[0]
			delete(ic.throttled, c.ID)
			delete(ic.frozen, c.ID)
			ic.killed[c.ID] = true
			return []Correction{{Type: Kill, ContainerID: c.ID, Trigger: *worst,
				Reason: fmt.Sprintf("%s still degraded with revocable work frozen: preempting the youngest revocable container", worst.Victim)}}, nil
		}
	} else if ic.level > LevelNone {
		if ic.healthySince.IsZero() {
			ic.healthySince = now
		}
		if now.Sub(ic.healthySince) >= ic.cfg.RecoverAfter && cooled {
			rec := Trigger{Signal: SignalRecovered, Victim: ic.cause.Victim, Baseline: ic.cause.Baseline, Threshold: ic.cause.Threshold}
			if ic.level >= LevelFreeze {
				for _, id := range sortedKeys(ic.frozen) {
					out = append(out, Correction{Type: Thaw, ContainerID: id, Trigger: rec, Reason: "victims healthy: thawing"})
				}
				clear(ic.frozen)
				ic.level = LevelThrottle
			} else {
				for _, id := range sortedKeys(ic.throttled) {
					out = append(out, Correction{Type: Unthrottle, ContainerID: id, Trigger: rec, Reason: "victims healthy: lifting the throttle"})
				}
				clear(ic.throttled)
				ic.level = LevelNone
			}
			ic.lastChange, ic.healthySince = now, now
			return out, nil
		}
	}

	// Bring every revocable container to the current level (also those
	// that appeared since the last step).
	for i := len(be) - 1; i >= 0; i-- { // oldest first: stable output
		c := be[i]
		if ic.level >= LevelThrottle && !ic.throttled[c.ID] {
			q := max(int64(float64(c.Limits.MilliCPUs)*ic.cfg.ThrottleFraction), ic.cfg.MinQuota)
			out = append(out, Correction{Type: Throttle, ContainerID: c.ID, CPUQuota: q, Trigger: ic.cause,
				Reason: fmt.Sprintf("%s degraded: throttling best-effort work", ic.cause.Victim)})
			ic.throttled[c.ID] = true
		}
		if ic.level >= LevelFreeze && !ic.frozen[c.ID] {
			out = append(out, Correction{Type: Freeze, ContainerID: c.ID, Trigger: ic.cause,
				Reason: fmt.Sprintf("%s still degraded with best-effort work throttled: freezing it", ic.cause.Victim)})
			ic.frozen[c.ID] = true
		}
	}
	return out, nil
}

func (ic *Interference) step(level int, now time.Time, cause Trigger) {
	ic.level, ic.lastChange, ic.cause = min(level, LevelKill), now, cause
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
