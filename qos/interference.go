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
	// Alpha is the EWMA weight of a new quiet sample in the baseline
	// once warmed up (during the warm-up the baseline is the median of
	// the samples); default 0.1.
	Alpha float64
	// Warmup is the number of quiet samples before a baseline is trusted;
	// their median starts it; default 10.
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
	// Persist is the number of degraded observations (each a new report
	// or sample of the victim) among the last Persist+1 before the first
	// correction, the latest one degraded; default 2 (2 of the last 3).
	// Zero or one: the first degraded observation corrects.
	Persist int
	// FreezeHold is the minimum time at the FREEZE level before the first
	// KILL (a frozen disk writer's dirty pages keep flushing for a while);
	// default 5 s. Never shorter than Cooldown.
	FreezeHold time.Duration
	// Improvement: past FREEZE, an escalation (the kill level, each KILL)
	// waits while the worst signal keeps improving — its value over its
	// threshold dropped by at least this fraction since the last step or
	// check; default 0.2. Zero disables the check.
	Improvement float64
	// ActiveCPU (cpus) and ActiveStall (fraction of time stalled on io or
	// memory, PSI some) are the activity over the last monitor interval at
	// or above which a revocable container counts as active; only active
	// containers are corrected. Defaults 0.05 and 0.05. Both zero: every
	// revocable container counts as active.
	ActiveCPU, ActiveStall float64
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
// once one has been degraded on Persist of the last Persist+1 observations,
// escalates one step per cool-down — THROTTLE every active revocable
// container, then FREEZE them, then (after FreezeHold, and only while the
// signal stops improving) KILL them one at a time, most active first
// (youngest first when activity is unknown). A revocable container is
// active when it used cpu, or stalled on io or memory, over the last
// monitor interval (a frozen one keeps the activity it had when frozen; one
// with fewer than two samples counts as active); idle ones are never
// corrected. When every victim has stayed healthy for RecoverAfter it
// steps back down (THAW, then UNTHROTTLE). Baselines are learned only
// while no correction is in force and the signal is not degraded; while
// revocable work is active, only from values at or below the exit
// threshold (the hysteresis band may be interference). Every
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

	suspect   bool      // the last round saw a value in the hysteresis band (Pending)
	recent    []bool    // the last Persist+1 observations at LevelNone: degraded?
	lastStamp time.Time // time of the last observation counted in recent
	ref       float64   // worst value/threshold at the last step or check past FREEZE
	frozeAt   time.Time // when the FREEZE level was entered
	frozenAct map[string]activity
}

// activity is a revocable container's use over the last monitor interval.
type activity struct {
	known  bool    // two samples with cpu figures
	active bool    // at or above the activity thresholds (or unknown)
	cpu    float64 // cpus
	stall  float64 // fraction of time stalled on io + memory (PSI some)
}

func (a activity) score() float64 { return a.cpu + a.stall }

type baseline struct {
	mean float64
	n    int
	warm []float64 // the samples of the warm-up, until it ends
}

// learn adds a quiet sample v: during the warm-up the baseline is the
// median of the samples so far (one noisy sample does not set it, as it
// would the first value of an EWMA), then an EWMA with weight alpha.
func (b *baseline) learn(v, alpha float64, warmup int) {
	b.n++
	if b.n > warmup {
		b.mean += alpha * (v - b.mean)
		return
	}
	b.warm = append(b.warm, v)
	s := slices.Clone(b.warm)
	slices.Sort(s)
	if b.mean = s[len(s)/2]; len(s)%2 == 0 {
		b.mean = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	if b.n == warmup {
		b.warm = nil
	}
}

var (
	_ Controller = (*Interference)(nil)
	_ Pender     = (*Interference)(nil)
)

// Levels of the graded response (Interference.Level).
const (
	LevelNone = iota
	LevelThrottle
	LevelFreeze
	LevelKill
)

// NewInterference is the interference factory. Options: enter-factor,
// exit-factor, alpha, warmup, cooldown, recover-after, throttle-fraction,
// min-quota, persist, freeze-hold, improvement, active-cpu, active-stall,
// and floor-<signal> (e.g. floor-runqueue-p99=0.002).
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
		Persist:          opts.int("persist", 2, &errs),
		FreezeHold:       opts.duration("freeze-hold", 5*time.Second, &errs),
		Improvement:      opts.float("improvement", 0.2, &errs),
		ActiveCPU:        opts.float("active-cpu", 0.05, &errs),
		ActiveStall:      opts.float("active-stall", 0.05, &errs),
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
	case c.Persist < 0 || c.FreezeHold < 0 || c.Improvement < 0 || c.Improvement >= 1 || c.ActiveCPU < 0 || c.ActiveStall < 0:
		return nil, fmt.Errorf("interference controller: need persist ≥ 0, freeze-hold ≥ 0, 0 ≤ improvement < 1, active-cpu ≥ 0, active-stall ≥ 0: %w", ErrInvalidOption)
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
		frozenAct: map[string]activity{},
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

// stamp is the time of the observation behind signal sig of c: when the
// application measured its latency, else the sample's time.
func stamp(c *monitor.ContainerUsage, sig string) time.Time {
	if al := c.Latest.AppLatency; sig == SignalAppLatency && al != nil && !al.Measured.IsZero() {
		return al.Measured
	}
	return c.Latest.Timestamp
}

// activityOf returns c's activity over its last monitor interval.
func (ic *Interference) activityOf(c *monitor.ContainerUsage) activity {
	if a, ok := ic.frozenAct[c.ID]; ok && ic.frozen[c.ID] {
		return a
	}
	off := ic.cfg.ActiveCPU == 0 && ic.cfg.ActiveStall == 0
	var p []monitor.Statistics
	if c.History != nil {
		p = c.History.Last(2)
	}
	if len(p) < 2 || !p[0].HasCPU || !p[1].HasCPU {
		return activity{active: true}
	}
	prev, cur := &p[0], &p[1]
	dt := cur.Timestamp.Sub(prev.Timestamp)
	if dt <= 0 {
		return activity{active: true}
	}
	a := activity{known: true}
	if cur.CPUUsageNanos >= prev.CPUUsageNanos {
		a.cpu = float64(cur.CPUUsageNanos-prev.CPUUsageNanos) / float64(dt)
	}
	if prev.HasPressure && cur.HasPressure {
		a.stall = max(0, float64(cur.IOPressure.SomeTotal-prev.IOPressure.SomeTotal)/float64(dt)) +
			max(0, float64(cur.MemPressure.SomeTotal-prev.MemPressure.SomeTotal)/float64(dt))
	}
	a.active = off || (ic.cfg.ActiveCPU > 0 && a.cpu >= ic.cfg.ActiveCPU) || (ic.cfg.ActiveStall > 0 && a.stall >= ic.cfg.ActiveStall)
	return a
}

// Corrections implements Controller. The round's time is u.Timestamp.
// A round is three phases (ladder.go): observe the usage (signals against
// baselines, which revocable work is correctable), step the ladder with
// the step function of the current level (which may move it one level, or
// kill), and bring every correctable container to the level in force.
func (ic *Interference) Corrections(_ context.Context, u monitor.Usage) ([]Correction, error) {
	o := ic.observe(&u)
	out, done := ladder[ic.level](ic, &o)
	if done {
		return out, nil
	}
	return append(out, ic.bring(&o)...), nil
}

// prune forgets the state of containers absent from u.
func (ic *Interference) prune(u *monitor.Usage) {
	live := make(map[string]bool, len(u.Containers))
	for i := range u.Containers {
		live[u.Containers[i].ID] = true
	}
	for id := range ic.baselines {
		if !live[id] {
			delete(ic.baselines, id)
		}
	}
	for _, m := range []map[string]bool{ic.throttled, ic.frozen, ic.killed} {
		for id := range m {
			if !live[id] {
				delete(m, id)
			}
		}
	}
	for id := range ic.frozenAct {
		if !ic.frozen[id] {
			delete(ic.frozenAct, id)
		}
	}
}

// correctable returns the revocable containers that may be corrected —
// not being killed, and frozen or active — most active first, and the
// activity of every revocable container not being killed.
func (ic *Interference) correctable(u *monitor.Usage) ([]*monitor.ContainerUsage, map[string]activity) {
	acts := map[string]activity{}
	be := slices.DeleteFunc(youngestRevocable(u), func(c *monitor.ContainerUsage) bool {
		if ic.killed[c.ID] {
			return true
		}
		a := ic.activityOf(c)
		acts[c.ID] = a
		return !a.active && !ic.frozen[c.ID]
	})
	slices.SortStableFunc(be, func(x, y *monitor.ContainerUsage) int {
		ax, ay := acts[x.ID], acts[y.ID]
		switch {
		case ax.known != ay.known:
			if ax.known {
				return -1
			}
			return 1
		case ax.score() > ay.score():
			return -1
		case ax.score() < ay.score():
			return 1
		}
		return 0 // youngest first, from youngestRevocable
	})
	return be, acts
}

// Pending implements Pender: with no correction in force, a degradation
// has been observed that the next observations may confirm, or the last
// round saw a value in the hysteresis band (above the exit threshold)
// while revocable work is active — maybe the start of one.
func (ic *Interference) Pending() bool {
	return ic.level == LevelNone && (ic.suspect || slices.Contains(ic.recent, true))
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
