package qos

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/monitor"
)

// Signal names of the interference controller.
const (
	SignalCPUThrottling = "cpu-throttling" // fraction of CFS periods throttled
	SignalRunQueueP99   = "runqueue-p99"   // seconds, from the eBPF monitor
	SignalPSICPU        = "psi-cpu"        // fraction of time stalled (some), from PSI totals
	SignalPSIMemory     = "psi-memory"
	SignalPSIIO         = "psi-io"
	SignalAppLatency    = "app-latency" // seconds, p99 reported by the application
	SignalRecovered     = "recovered"
	// SignalNotCause is the trigger of the THAW and UNTHROTTLE that end a
	// failed cause test: the victim stayed degraded with every suspect
	// frozen for FreezeHold, so they were not the cause and the signal is
	// marked as noise for NoiseHold.
	SignalNotCause = "not-the-cause"
)

// Resources a signal can point at (attribution).
const (
	ResourceCPU    = "cpu"
	ResourceIO     = "io"
	ResourceMemory = "memory"
)

// signalResource is the resource each signal measures contention on;
// app-latency measures none in particular ("").
var signalResource = map[string]string{
	SignalCPUThrottling: ResourceCPU,
	SignalRunQueueP99:   ResourceCPU,
	SignalPSICPU:        ResourceCPU,
	SignalPSIMemory:     ResourceMemory,
	SignalPSIIO:         ResourceIO,
}

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
	// SLOP99, when set, is an absolute bound on the application's
	// reported p99 (app-latency): degraded above it, recovered below
	// SLOP99 × SLOExit (default 0.8), with no warm-up needed. Without it
	// app-latency uses factor × baseline like every other signal.
	SLOP99  time.Duration
	SLOExit float64
	// Warmup is the number of quiet busy samples before a baseline is
	// trusted, and the warm-up must be stable: the medians of its older
	// and newer halves within a factor Stable (default 1.5) of each other
	// (or closer than the signal's floor); otherwise it keeps sliding.
	// Default 20. Below 4 samples the stability check is skipped.
	Warmup int
	Stable float64
	// BaselineWindow is how many quiet busy samples the baseline keeps;
	// the baseline is their median (robust: one unusually fast or slow
	// window does not move it); default 60, at least Warmup.
	BaselineWindow int
	// BusyCPU is the victim's cpu use (cpus, over its last monitor
	// interval) at or above which a sample is busy — or its stall
	// fraction (PSI some, cpu + io + memory: a blocked LC); only busy samples
	// learn baselines or are compared with them, except the application's
	// own latency reports, which are busy by definition. A bursty LC's
	// idle seconds (run-queue p99 0, no stalls) would otherwise set a
	// baseline its every busy second exceeds. Default 0.05; 0: every
	// sample is busy.
	BusyCPU float64
	// Cooldown is the minimum time between two escalations (or
	// de-escalations); default 2 s.
	Cooldown time.Duration
	// RecoverAfter is how long every victim must stay healthy before one
	// step of de-escalation (the first re-admission); each re-degradation
	// after a re-admission doubles it (exponential back-off), up to
	// MaxReadmit (default the larger of 5 min and RecoverAfter); default
	// 10 s.
	RecoverAfter time.Duration
	MaxReadmit   time.Duration
	// ThrottleFraction is the throttled quota as a fraction of a revocable
	// container's allocation; default 0.2. MinQuota (mcpu) bounds it from
	// below; default 10.
	ThrottleFraction float64
	MinQuota         int64
	// IOThrottle (bytes/s), when set, makes the first step against a
	// degradation on io alone a THROTTLE_IO of the suspects to this
	// rate (through the Actuator's IOActuator) instead of a FREEZE;
	// default 0 (off).
	IOThrottle int64
	// Persist is the number of degraded observations (each a new report
	// or sample of the victim) among the last Persist+1 before the first
	// correction, the latest one degraded; default 2 (2 of the last 3).
	// Zero or one: the first degraded observation corrects.
	Persist int
	// Severe: an observation at least Severe × its threshold corrects at
	// once, without waiting for Persist (a disk flood multiplies a p99
	// many times over in its first window; noise on a busy machine stays
	// within a few thresholds). Default 5; 0 turns it off.
	Severe float64
	// FreezeHold is the cause test: with every suspect frozen for this
	// long (and the signal no longer improving), a victim still degraded
	// was not hurt by them — they are thawed and the signal marked as
	// noise for NoiseHold (default 1 min) instead of anything being
	// killed. Default 5 s.
	FreezeHold time.Duration
	NoiseHold  time.Duration
	// Relief: a freeze that brought the signal that caused it below
	// (1 - Relief) of its value at the freeze did relieve the
	// victim, though not below the exit threshold: the cause test keeps
	// the suspects frozen (a cause, at least in part) instead of thawing
	// them and marking the signal as noise. Default 0.5; 0 turns it off.
	Relief float64
	// KillAfter: a cause confirmed by a freeze (the victim recovered with
	// the suspects frozen) that re-degrades after this many re-admissions
	// is killed, most active suspect first, instead of frozen again;
	// default 3; 0 never kills.
	KillAfter int
	// Improvement: past FREEZE, the cause test waits while the worst
	// signal keeps improving — its value over its threshold dropped by at
	// least this fraction since the last step or check (a frozen disk
	// writer's dirty pages still flushing); default 0.2. Zero disables it.
	Improvement float64
	// ActiveCPU (cpus) and ActiveStall (fraction of time stalled on io or
	// memory, PSI some) are the activity over the last monitor interval at
	// or above which a revocable container counts as active; only active
	// containers are corrected. Defaults 0.05 and 0.05. Both zero: every
	// revocable container counts as active.
	ActiveCPU, ActiveStall float64
	// SlowStart, when set (with IOThrottle), admits revocable io
	// gradually: a revocable container younger than SlowStart, or idle
	// for SlowStart, is parked under IOThrottle, and the limit doubles
	// SlowStartSteps times over SlowStart of work with every victim
	// healthy, then is lifted; an LC above its exit threshold holds the
	// ramps and halves a ramping writer's limit (slowstart.go); default 0
	// (off).
	SlowStart time.Duration
	// BestEffortCPUIdle says that best-effort (revocable) containers run
	// in cpu.idle (SCHED_IDLE) groups, as the cgroups isolator makes them
	// where the kernel has cpu.idle: on cpu-like signals (run-queue,
	// cpu PSI, throttling) such work does not compete at the victim's
	// priority and is never a suspect. Default true.
	BestEffortCPUIdle bool
}

// DefaultFloors are the default absolute floors per signal.
var DefaultFloors = map[string]float64{
	SignalCPUThrottling: 0.1,
	SignalRunQueueP99:   0.001,
	SignalPSICPU:        0.1,
	SignalPSIMemory:     0.1,
	SignalPSIIO:         0.1,
	SignalAppLatency:    0.0005,
}

// Interference protects every non-revocable (latency-critical) container:
// it compares each of its busy signals with the container's own baseline
// (or the app-latency with an absolute SLO) and, once one has been
// degraded on Persist of the last Persist+1 observations, attributes it to
// the revocable containers that compete on the signal's resource (the
// suspects) and escalates one step per cool-down — THROTTLE them (for cpu
// signals), then FREEZE them. With every suspect frozen for FreezeHold the
// cause is tested: a victim still degraded was not hurt by them, and they
// are thawed and the signal marked as noise; a victim that recovers
// confirms the cause, and the suspects are re-admitted (THAW, then
// UNTHROTTLE) after RecoverAfter, doubled after each re-degradation. Only
// a confirmed cause that re-degrades after KillAfter re-admissions is
// killed, one container at a time. With SlowStart, new or long-idle
// revocable work starts with its io parked and ramps up while the
// victims stay healthy (slowstart.go). Not safe for concurrent use.
type Interference struct {
	cfg InterferenceConfig
	log *slog.Logger // Debug: every round that saw a degradation or had corrections in force; nil: none

	baselines map[string]map[string]*baseline // victim → signal → baseline
	noise     map[string]noiseMark            // victim/signal → marked as noise

	level         int // 0 none, 1 throttled, 2 frozen, 3 killing
	lastChange    time.Time
	healthySince  time.Time
	degradedSince time.Time // start of the current run of degraded observations
	cause         Trigger
	onset         Trigger // the degradation behind the first correction since the ladder last left none; cleared by a step down
	blame         string  // how the suspects of the last step were chosen
	throttled     map[string]bool
	ioThrottled   map[string]bool
	ioCause       bool // the throttle level limits io (IOThrottle), not cpu
	frozen        map[string]bool
	killed        map[string]bool // until they leave the usage
	suspects      map[string]bool // the revocable containers blamed in this episode
	// cleared are the containers at work and not blamed when this
	// episode's first correction was made: a later round that finds no
	// competitor does not blame them (attribute).
	cleared map[string]bool

	suspect   bool      // the last round saw a value in the hysteresis band (Pending)
	recent    []bool    // the last Persist+1 observations at LevelNone: degraded?
	lastStamp time.Time // time of the last observation counted in recent
	ref       float64   // worst value/threshold at the last step or check past FREEZE
	relief    bool      // the freeze in force relieved its cause: no cause test undoes it
	frozeAt   time.Time // when the last suspect was frozen
	frozenAct map[string]activity
	ramps     map[string]*ramp     // revocable containers in their slow start
	seen      map[string]bool      // revocable containers seen by a round
	idleSince map[string]time.Time // revocable containers idle since, not ramping
	// readmitted containers (thawed by a step down) keep the activity
	// they had before their freeze until they have two samples after the
	// thaw: a re-degradation right after a re-admission is then blamed
	// on them, not on every active container (the fallback).
	readmittedAct map[string]readmission

	// The episode: from the first correction until the victims have been
	// healthy for a whole back-off with nothing in force.
	confirmed  bool // a correction ended a degradation (the cause is known)
	readmitted bool // a step down happened since the last degradation
	strikes    int  // re-degradations after a re-admission in this episode
}

// noiseMark marks a victim's signal as noise after a failed cause test:
// until then, values up to level × EnterFactor trigger nothing (level is
// the value with every suspect frozen); a value above that is a new
// degradation, not the noise the test found.
type noiseMark struct {
	until time.Time
	level float64
}

// activity is a revocable container's use over the last monitor interval.
type activity struct {
	known    bool    // two samples with cpu figures
	active   bool    // at or above the activity thresholds (or unknown)
	cpu      float64 // cpus
	io, mem  float64 // fractions of time stalled on io, memory (PSI some)
	memBytes float64 // working set
	idleCPU  bool    // runs in cpu.idle: does not compete on cpu
}

func (a activity) stall() float64 { return a.io + a.mem }

// readmission is a thawed container's activity before its freeze, and
// when it was thawed.
type readmission struct {
	act activity
	at  time.Time
}

func (a activity) score() float64 { return a.cpu + a.stall() }

// baseline is a signal's learned normal: the median of the newest quiet
// busy values (a robust statistic: one unusually fast window moves it by
// at most one rank, never to the minimum).
type baseline struct {
	vals  []float64
	n     int // values learned in all
	warm  bool
	value float64
}

// learn adds a quiet busy value v.
func (b *baseline) learn(v float64, c *InterferenceConfig, floor float64) {
	b.n++
	b.vals = append(b.vals, v)
	if len(b.vals) > c.BaselineWindow {
		b.vals = slices.Delete(b.vals, 0, len(b.vals)-c.BaselineWindow)
	}
	b.value = medianOf(b.vals)
	if !b.warm && len(b.vals) >= c.Warmup {
		b.warm = stable(b.vals[len(b.vals)-c.Warmup:], c.Stable, floor)
	}
}

// stable reports whether the medians of the older and newer halves of
// xs are within a factor f of each other (or closer than floor); true
// for fewer than 4 values.
func stable(xs []float64, f, floor float64) bool {
	if len(xs) < 4 {
		return true
	}
	a, b := medianOf(xs[:len(xs)/2]), medianOf(xs[len(xs)/2:])
	lo, hi := min(a, b), max(a, b)
	return hi-lo <= floor || hi <= lo*f
}

func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
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

// levelNames name the levels in logs.
var levelNames = [...]string{LevelNone: "none", LevelThrottle: "throttle", LevelFreeze: "freeze", LevelKill: "kill"}

// NewInterference is the interference factory. Options: enter-factor,
// exit-factor, slo-p99 (a duration), slo-exit, warmup, stable,
// baseline-window, busy-cpu, cooldown, recover-after, max-readmit,
// throttle-fraction, min-quota, io-throttle, persist, freeze-hold, noise-hold,
// kill-after, improvement, active-cpu, active-stall, be-cpu-idle, slow-start, and
// floor-<signal> (e.g. floor-runqueue-p99=0.002).
func NewInterference(opts Options, log *slog.Logger) (Controller, error) {
	r := opts.Reader()
	if _, ok := opts["alpha"]; ok {
		r.Fail(fmt.Errorf("option alpha: removed, the baseline is the median of baseline-window quiet busy samples: %w", ErrInvalidOption))
	}
	c := InterferenceConfig{
		EnterFactor:       r.Float("enter-factor", 2),
		ExitFactor:        r.Float("exit-factor", 1.3),
		SLOP99:            r.Duration("slo-p99", 0),
		SLOExit:           r.Float("slo-exit", 0.8),
		Warmup:            r.Int("warmup", 20),
		Stable:            r.Float("stable", 1.5),
		BaselineWindow:    r.Int("baseline-window", 60),
		BusyCPU:           r.Float("busy-cpu", 0.05),
		Cooldown:          r.Duration("cooldown", 2*time.Second),
		RecoverAfter:      r.Duration("recover-after", 10*time.Second),
		MaxReadmit:        r.Duration("max-readmit", 0),
		ThrottleFraction:  r.Float("throttle-fraction", 0.2),
		MinQuota:          int64(r.Int("min-quota", 10)),
		IOThrottle:        int64(r.Float("io-throttle", 0)),
		Persist:           r.Int("persist", 2),
		Severe:            r.Float("severe", 5),
		FreezeHold:        r.Duration("freeze-hold", 5*time.Second),
		NoiseHold:         r.Duration("noise-hold", time.Minute),
		Relief:            r.Float("relief", 0.5),
		KillAfter:         r.Int("kill-after", 3),
		Improvement:       r.Float("improvement", 0.2),
		ActiveCPU:         r.Float("active-cpu", 0.05),
		ActiveStall:       r.Float("active-stall", 0.05),
		BestEffortCPUIdle: r.Bool("be-cpu-idle", true),
		SlowStart:         r.Duration("slow-start", 0),
		Floors:            map[string]float64{},
	}
	for s, f := range DefaultFloors {
		c.Floors[s] = r.Float("floor-"+s, f)
	}
	if _, ok := opts["max-readmit"]; !ok {
		c.MaxReadmit = max(5*time.Minute, c.RecoverAfter)
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("interference controller: %w", err)
	}
	ic, err := NewInterferenceWith(c)
	if err != nil {
		return nil, err
	}
	ic.log = log
	return ic, nil
}

// NewInterferenceWith returns an interference controller for c; errors
// wrap ErrInvalidOption.
func NewInterferenceWith(c InterferenceConfig) (*Interference, error) {
	for _, check := range [...]func() string{c.badSignals, c.badEscalation, c.badRelief} {
		if need := check(); need != "" {
			return nil, fmt.Errorf("interference controller: %s: %w", need, ErrInvalidOption)
		}
	}
	if c.Floors == nil {
		c.Floors = DefaultFloors
	}
	return &Interference{
		cfg:         c,
		baselines:   map[string]map[string]*baseline{},
		noise:       map[string]noiseMark{},
		throttled:   map[string]bool{},
		ioThrottled: map[string]bool{},
		frozen:      map[string]bool{},
		killed:      map[string]bool{},
		suspects:    map[string]bool{},
		cleared:     map[string]bool{},
		frozenAct:   map[string]activity{},
		ramps:       map[string]*ramp{},
		seen:        map[string]bool{},
		idleSince:   map[string]time.Time{},

		readmittedAct: map[string]readmission{},
	}, nil
}

// badSignals returns what c's signal settings need ("" when they are
// valid): factors, warm-up, baseline window, SLO, busy threshold.
func (c *InterferenceConfig) badSignals() string {
	switch {
	case c.EnterFactor <= 1 || c.ExitFactor < 1 || c.ExitFactor > c.EnterFactor:
		return "need 1 ≤ exit-factor ≤ enter-factor, enter-factor > 1"
	case c.Warmup < 1 || c.BaselineWindow < c.Warmup || c.Stable < 1:
		return "need warmup ≥ 1, baseline-window ≥ warmup, stable ≥ 1"
	case c.SLOP99 < 0 || c.SLOExit <= 0 || c.SLOExit > 1 || c.BusyCPU < 0:
		return "need slo-p99 ≥ 0, 0 < slo-exit ≤ 1, busy-cpu ≥ 0"
	}
	return ""
}

// badEscalation returns what c's escalation settings need ("" when
// they are valid): the throttle, persistence, holds, kills, improvement
// and activity thresholds.
func (c *InterferenceConfig) badEscalation() string {
	switch {
	case c.ThrottleFraction <= 0 || c.ThrottleFraction > 1 || c.MinQuota < 1:
		return "need 0 < throttle-fraction ≤ 1, min-quota ≥ 1"
	case c.Persist < 0 || c.FreezeHold < 0 || c.NoiseHold < 0 || c.KillAfter < 0 || c.Improvement < 0 || c.Improvement >= 1 || c.ActiveCPU < 0 || c.ActiveStall < 0:
		return "need persist, freeze-hold, noise-hold, kill-after ≥ 0, 0 ≤ improvement < 1, active-cpu ≥ 0, active-stall ≥ 0"
	}
	return ""
}

// badRelief returns what c's io limits and step-down settings need (""
// when they are valid): io throttle, slow start, relief, severity and
// re-admission.
func (c *InterferenceConfig) badRelief() string {
	switch {
	case c.IOThrottle < 0 || c.SlowStart < 0:
		return "need io-throttle ≥ 0, slow-start ≥ 0"
	case c.SlowStart > 0 && c.IOThrottle == 0:
		return "slow-start limits io: it needs io-throttle (the rate it starts from)"
	case c.Relief < 0 || c.Relief >= 1:
		return "need 0 ≤ relief < 1"
	case c.Severe != 0 && c.Severe <= 1:
		return "need severe > 1 (or 0: off)"
	case c.RecoverAfter < 0 || c.MaxReadmit < c.RecoverAfter:
		return "need 0 ≤ recover-after ≤ max-readmit"
	}
	return ""
}

// IOThrottle is the rate (bytes/s) of the THROTTLE_IO corrections this
// controller may send (io-throttle=; 0: none): the agent checks at start
// that it can apply them.
func (ic *Interference) IOThrottle() int64 { return ic.cfg.IOThrottle }

// Level returns the current level of the graded response (LevelNone…).
func (ic *Interference) Level() int { return ic.level }

// Strikes returns the re-degradations after a re-admission in the current
// episode (each doubles the next re-admission's wait).
func (ic *Interference) Strikes() int { return ic.strikes }

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
			out[SignalPSIIO] = max(0, float64(cur.IOPressure.SomeTotal-prev.IOPressure.SomeTotal)/float64(dt))
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

// busy reports whether victim c was busy over its last monitor interval:
// it used at least BusyCPU cpus, or it was stalled (PSI some, cpu + io +
// memory) at least BusyCPU of the time — an LC blocked by interference
// wants to run even though it uses little cpu. Unknown use counts as busy.
func (ic *Interference) busy(c *monitor.ContainerUsage) bool {
	if ic.cfg.BusyCPU <= 0 || c.History == nil {
		return true
	}
	p := c.History.Last(2)
	if len(p) < 2 {
		return true
	}
	prev, cur := &p[0], &p[1]
	r, ok := monitor.CPURate(prev, cur)
	if !ok || r >= ic.cfg.BusyCPU {
		return true
	}
	if dt := cur.Timestamp.Sub(prev.Timestamp); dt > 0 && prev.HasPressure && cur.HasPressure {
		stall := cur.CPUPressure.SomeTotal - prev.CPUPressure.SomeTotal +
			cur.IOPressure.SomeTotal - prev.IOPressure.SomeTotal +
			cur.MemPressure.SomeTotal - prev.MemPressure.SomeTotal
		return float64(stall)/float64(dt) >= ic.cfg.BusyCPU
	}
	return false
}

// stamp is the time of the observation behind signal sig of c: when the
// application measured its latency, else the sample's time.
func stamp(c *monitor.ContainerUsage, sig string) time.Time {
	if al := c.Latest.AppLatency; sig == SignalAppLatency && al != nil && !al.Measured.IsZero() {
		return al.Measured
	}
	return c.Latest.Timestamp
}

// thresholds returns signal sig's enter and exit thresholds for baseline
// b, and whether they can be trusted yet.
func (ic *Interference) thresholds(sig string, b *baseline) (enter, exit float64, trusted bool) {
	if sig == SignalAppLatency && ic.cfg.SLOP99 > 0 {
		slo := ic.cfg.SLOP99.Seconds()
		return slo, slo * ic.cfg.SLOExit, true
	}
	f := ic.cfg.Floors[sig]
	return max(b.value*ic.cfg.EnterFactor, b.value+f), max(b.value*ic.cfg.ExitFactor, b.value+f), b.warm
}

// activityOf returns c's activity over its last monitor interval.
func (ic *Interference) activityOf(c *monitor.ContainerUsage) activity {
	if a, ok := ic.frozenAct[c.ID]; ok && ic.frozen[c.ID] {
		return a
	}
	var p []monitor.Statistics
	if c.History != nil {
		p = c.History.Last(2)
	}
	if r, ok := ic.readmittedAct[c.ID]; ok {
		if len(p) < 2 || !p[0].Timestamp.After(r.at) {
			return r.act // no activity measured wholly since the thaw yet
		}
		delete(ic.readmittedAct, c.ID)
	}
	idle := ic.cfg.BestEffortCPUIdle && c.Limits.Class == isolator.BestEffort
	off := ic.cfg.ActiveCPU == 0 && ic.cfg.ActiveStall == 0
	if len(p) < 2 || !p[0].HasCPU || !p[1].HasCPU {
		return activity{active: true, idleCPU: idle}
	}
	prev, cur := &p[0], &p[1]
	dt := cur.Timestamp.Sub(prev.Timestamp)
	if dt <= 0 {
		return activity{active: true, idleCPU: idle}
	}
	a := activity{known: true, idleCPU: idle}
	if cur.CPUUsageNanos >= prev.CPUUsageNanos {
		a.cpu = float64(cur.CPUUsageNanos-prev.CPUUsageNanos) / float64(dt)
	}
	if prev.HasPressure && cur.HasPressure {
		a.io = max(0, float64(cur.IOPressure.SomeTotal-prev.IOPressure.SomeTotal)/float64(dt))
		a.mem = max(0, float64(cur.MemPressure.SomeTotal-prev.MemPressure.SomeTotal)/float64(dt))
	}
	if cur.HasMemory {
		a.memBytes = float64(cur.MemWorkingSet)
		if a.memBytes == 0 {
			a.memBytes = float64(cur.MemUsageBytes)
		}
	}
	a.active = off || (ic.cfg.ActiveCPU > 0 && a.cpu >= ic.cfg.ActiveCPU) || (ic.cfg.ActiveStall > 0 && a.stall() >= ic.cfg.ActiveStall)
	return a
}

// competes reports whether a (an active revocable container) competes
// with a victim on resource r: cpu at the victim's priority (not in
// cpu.idle), io or memory stalls, or, for memory, the largest working set
// (hog). Unknown activity competes on everything.
func (ic *Interference) competes(a activity, r string, hog bool) bool {
	if !a.known {
		return true
	}
	// Competing takes real use even where activity is off (zero
	// thresholds): the defaults then.
	cpuThr, stallThr := ic.cfg.ActiveCPU, ic.cfg.ActiveStall
	if cpuThr == 0 {
		cpuThr = 0.05
	}
	if stallThr == 0 {
		stallThr = 0.05
	}
	cpu := !a.idleCPU && a.cpu >= cpuThr
	io := a.io >= stallThr
	mem := a.mem >= stallThr || hog
	switch r {
	case ResourceCPU:
		return cpu
	case ResourceIO:
		return io
	case ResourceMemory:
		return mem
	}
	return cpu || io || mem
}

// attribute returns the suspects among be for a degradation on the
// resources rs (none: any resource), most active first: the containers
// that compete on one of them; a phrase saying how they were chosen; and
// whether they are the fallback (nobody competes: every container).
// For an unattributed degradation (rs empty) with no competitor, every
// correctable container is a suspect (the cause test then tells).
func (ic *Interference) attribute(be []*monitor.ContainerUsage, acts map[string]activity, rs []string) ([]*monitor.ContainerUsage, string, bool) {
	hog, top := "", 0.0
	for _, c := range be {
		if a := acts[c.ID]; a.known && a.memBytes > top {
			hog, top = c.ID, a.memBytes
		}
	}
	var out []*monitor.ContainerUsage
	for _, c := range be {
		a := acts[c.ID]
		if len(rs) == 0 && ic.competes(a, "", false) {
			out = append(out, c)
			continue
		}
		for _, r := range rs {
			if ic.competes(a, r, c.ID == hog) {
				out = append(out, c)
				break
			}
		}
	}
	if len(out) == 0 && slices.Contains(rs, ResourceCPU) {
		// Nothing runs at the victim's priority, yet it waits for a
		// cpu: the kernel threads that serve io and reclaim memory
		// (writeback, the journal, kswapd) run at that priority on
		// behalf of whoever stalls on io or memory. A disk writer in
		// cpu.idle delayed a cpu-bound LC 6-9x this way (colocation
		// experiment, no fsync in the LC) while only cpu work was
		// looked for.
		for _, c := range be {
			// (Every container here is known: one of unknown
			// activity competes on cpu too, and out is empty.)
			if a := acts[c.ID]; ic.competes(a, ResourceIO, false) || ic.competes(a, ResourceMemory, false) {
				out = append(out, c)
			}
		}
		if len(out) > 0 {
			return out, "competing for cpu through the kernel threads serving their io or memory", false
		}
	}
	switch {
	case len(rs) > 0:
		return out, "competing for " + strings.Join(rs, ", "), false
	case len(out) > 0:
		return out, "stalled on io or memory, or on cpu at its priority", false
	}
	// Nobody competes now. Work frozen or io-throttled may look idle
	// because of it (a writer whose io is throttled does little): it
	// stays a suspect, as does work that came since; work that was at work and
	// cleared when the episode's first correction was made is left
	// alone. Blaming every container instead froze cpu.idle CPU work
	// and a cache antagonist while the writer, io-throttled and out of
	// the correctable list, went on (colocation experiment: 30 % node
	// CPU in one trial).
	out = slices.DeleteFunc(slices.Clone(be), func(c *monitor.ContainerUsage) bool {
		return ic.cleared[c.ID] && !ic.underCorrection(c.ID)
	})
	if len(out) > 0 && len(out) < len(be) {
		return out, "no competitor identified: the work under correction and newcomers", true
	}
	return be, "no competitor identified: every active revocable container", true
}

// underCorrection reports whether container id is frozen or its io
// throttled: corrections that make work look idle however much it has
// to do (a cpu quota leaves room to show activity: a cpu-throttled
// container at rest is at rest).
func (ic *Interference) underCorrection(id string) bool {
	return ic.frozen[id] || ic.ioThrottled[id]
}

// Corrections implements Controller. The round's time is u.Timestamp.
// A round is three phases (ladder.go): observe the usage (signals against
// baselines, which revocable work is correctable and which of it is
// suspected), step the ladder with the step function of the current level
// (which may move it one level, kill, or end a failed cause test), and
// bring every suspect to the level in force.
func (ic *Interference) Corrections(_ context.Context, u monitor.Usage) ([]Correction, error) {
	o := ic.observe(&u)
	from := ic.level
	out, done := ladder[ic.level](ic, &o)
	if !done {
		out = append(out, ic.bring(&o)...)
	}
	out = append(out, ic.slowStart(&u, &o)...)
	ic.trace(&o, from, out)
	return out, nil
}

// trace logs, at Debug, a round that saw a degradation (also one masked
// as noise) or began with corrections in force: what was seen against
// which threshold, whom it blamed and what the ladder did — the record a
// researcher needs to tell why a correction came (or did not).
func (ic *Interference) trace(o *observation, from int, out []Correction) {
	if ic.log == nil || (o.worst == nil && !o.masked && from == LevelNone) || !ic.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	attrs := []any{"from", levelNames[from], "to", levelNames[ic.level], "corrections", len(out), "cooled", o.cooled}
	if o.masked {
		attrs = append(attrs, "masked_as_noise", true)
	}
	if w := o.worst; w != nil {
		ids := make([]string, len(o.suspects))
		for i, c := range o.suspects {
			ids[i] = c.ID
		}
		attrs = append(attrs, "victim", w.Victim, "signal", w.Signal, "value", w.Value, "baseline", w.Baseline,
			"threshold", w.Threshold, "resources", o.resources, "suspects", ids, "blame", o.blame, "recent", ic.recent)
	} else if !ic.healthySince.IsZero() {
		attrs = append(attrs, "healthy_for", o.now.Sub(ic.healthySince).Round(time.Millisecond).String(), "backoff", ic.backoff().String())
	}
	ic.log.Debug("interference round", attrs...)
}

// prune forgets the state of containers absent from u.
func (ic *Interference) prune(u *monitor.Usage) {
	live := liveIDs(u)
	keepLive(ic.baselines, live)
	for _, m := range []map[string]bool{ic.throttled, ic.ioThrottled, ic.frozen, ic.killed, ic.suspects, ic.cleared, ic.seen} {
		keepLive(m, live)
	}
	keepLive(ic.frozenAct, ic.frozen)
	keepLive(ic.readmittedAct, live)
	keepLive(ic.ramps, live)
	keepLive(ic.idleSince, live)
	for k, m := range ic.noise {
		if !u.Timestamp.Before(m.until) {
			delete(ic.noise, k)
		}
	}
}

// correctable returns the revocable containers that may be corrected —
// not being killed, and frozen or active — most active first, and the
// activity of every revocable container not being killed.
func (ic *Interference) correctable(u *monitor.Usage) ([]*monitor.ContainerUsage, map[string]activity) {
	acts := map[string]activity{}
	be := slices.DeleteFunc(youngestRevocable(u), func(c *monitor.ContainerUsage) bool {
		if ic.killed[c.ID] || c.Stopping {
			return true // being killed (by this controller, or anyone)
		}
		a := ic.activityOf(c)
		acts[c.ID] = a
		return !a.active && !ic.underCorrection(c.ID)
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

// liveIDs is the set of the containers in u.
func liveIDs(u *monitor.Usage) map[string]bool {
	live := make(map[string]bool, len(u.Containers))
	for i := range u.Containers {
		live[u.Containers[i].ID] = true
	}
	return live
}

// keepLive deletes from m every container not in live.
func keepLive[V any](m map[string]V, live map[string]bool) {
	maps.DeleteFunc(m, func(id string, _ V) bool { return !live[id] })
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
