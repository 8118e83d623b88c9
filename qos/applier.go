package qos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Actuator applies corrections to containers; the agent implements it over
// the containerizer. SetCPUQuota with milli = 0 restores the container's
// own cpu limit. Kill ends the container with the given reason as its
// task's terminal status reason. Methods return an error wrapping
// ErrNotFound-like sentinels of the implementation for a container that
// is gone; the Applier then forgets it.
type Actuator interface {
	SetCPUQuota(ctx context.Context, id string, milli int64) error
	Freeze(ctx context.Context, id string) error
	Thaw(ctx context.Context, id string) error
	Kill(ctx context.Context, id string, reason string) error
}

// IOActuator is an optional ability of an Actuator: limit a container's
// block io to bytesPerSec (read and write, every device it uses; cgroup v2
// io.max, v1 blkio.throttle.*), or lift the limit with 0. The Applier
// applies ThrottleIO and UnthrottleIO through it; an Actuator without it
// fails them with an error wrapping ErrNotSupported. The cgroup writes
// belong to the cgroups isolator.
type IOActuator interface {
	SetIOLimit(ctx context.Context, id string, bytesPerSec int64) error
}

// Applied is a correction as applied, for status and the agent API.
type Applied struct {
	Correction
	At  time.Time
	Err error
}

// Applier applies corrections through an Actuator and keeps the set in
// force (throttles and freezes not yet lifted). It implements the
// estimator's Blocker (no new revocable offers while a correction is in
// force) and prometheus.Collector (brim_qos_corrections_total{type,
// trigger}, brim_qos_active_corrections). Safe for concurrent use.
type Applier struct {
	act Actuator
	log *slog.Logger
	now func() time.Time
	// freezeWait bounds the wait for a freeze to complete (FreezeWait).
	freezeWait time.Duration

	mu        sync.Mutex
	throttled map[string]Correction
	ioLimited map[string]Correction
	frozen    map[string]Correction
	recent    []Applied // newest last, bounded

	total *prometheus.CounterVec
}

const recentCorrections = 64

// FreezeWait is how long Apply waits for a FREEZE to complete. A freeze
// still under way then counts as applied: the kernel stops each remaining
// task as it leaves its uninterruptible sleep, and the loop goes on.
const FreezeWait = time.Second

// NewApplier returns an applier over act. log may be nil.
func NewApplier(act Actuator, log *slog.Logger) *Applier {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Applier{
		act: act, log: log.With("component", "qos"), now: time.Now, freezeWait: FreezeWait,
		throttled: map[string]Correction{}, ioLimited: map[string]Correction{}, frozen: map[string]Correction{},
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brim_qos_corrections_total", Help: "QoS corrections applied, by type and triggering signal.",
		}, []string{"type", "trigger"}),
	}
}

// Apply applies cs in order. A failed correction is logged, recorded and
// joined into the returned error; the others are still applied. Killing a
// frozen container thaws it first (a frozen process cannot die).
func (a *Applier) Apply(ctx context.Context, cs []Correction) error {
	var errs []error
	for _, c := range cs {
		err := a.apply(ctx, c)
		a.mu.Lock()
		a.recent = append(a.recent, Applied{Correction: c, At: a.now(), Err: err})
		if n := len(a.recent); n > recentCorrections {
			a.recent = slices.Delete(a.recent, 0, n-recentCorrections)
		}
		a.mu.Unlock()
		if err != nil {
			a.log.Warn("apply correction", "correction", c.String(), "err", err)
			errs = append(errs, err)
			continue
		}
		a.total.WithLabelValues(c.Type.String(), c.Trigger.Signal).Inc()
		a.log.Info("correction applied", "type", c.Type.String(), "container", c.ContainerID,
			"signal", c.Trigger.Signal, "victim", c.Trigger.Victim, "value", c.Trigger.Value,
			"baseline", c.Trigger.Baseline, "threshold", c.Trigger.Threshold, "reason", c.Reason)
	}
	return errors.Join(errs...)
}

func (a *Applier) apply(ctx context.Context, c Correction) error {
	var err error
	switch c.Type {
	case Throttle:
		if c.CPUQuota <= 0 {
			return fmt.Errorf("throttle %s: quota %d: %w", c.ContainerID, c.CPUQuota, ErrInvalidOption)
		}
		if err = a.act.SetCPUQuota(ctx, c.ContainerID, c.CPUQuota); err == nil {
			a.mu.Lock()
			a.throttled[c.ContainerID] = c
			a.mu.Unlock()
		}
	case Unthrottle:
		if err = a.act.SetCPUQuota(ctx, c.ContainerID, 0); err == nil {
			a.mu.Lock()
			delete(a.throttled, c.ContainerID)
			a.mu.Unlock()
		}
	case ThrottleIO, UnthrottleIO:
		io, ok := a.act.(IOActuator)
		if !ok {
			return fmt.Errorf("%s %s: the actuator cannot limit io: %w", strings.ToLower(c.Type.String()), c.ContainerID, ErrNotSupported)
		}
		limit := c.IOBytesPerSec
		if c.Type == UnthrottleIO {
			limit = 0
		} else if limit <= 0 {
			return fmt.Errorf("throttle io %s: limit %d B/s: %w", c.ContainerID, limit, ErrInvalidOption)
		}
		if err = io.SetIOLimit(ctx, c.ContainerID, limit); err == nil {
			a.mu.Lock()
			if c.Type == ThrottleIO {
				a.ioLimited[c.ContainerID] = c
			} else {
				delete(a.ioLimited, c.ContainerID)
			}
			a.mu.Unlock()
		}
	case Freeze:
		fctx, cancel := context.WithTimeout(ctx, a.freezeWait)
		err = a.act.Freeze(fctx, c.ContainerID)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			// Still freezing: a task in an uninterruptible sleep (a
			// writer in an fsync) stops as it leaves it; the kernel
			// finishes the freeze on its own. Waiting for it held the
			// whole QoS loop — 6.6 s behind an io-throttled 64 MiB
			// fsync in the colocation experiment.
			a.log.Info("freeze under way: tasks in an uninterruptible sleep stop as they leave it",
				"container", c.ContainerID, "waited", a.freezeWait.String())
			err = nil
		}
		if err == nil {
			a.mu.Lock()
			a.frozen[c.ContainerID] = c
			a.mu.Unlock()
		}
	case Thaw:
		if err = a.act.Thaw(ctx, c.ContainerID); err == nil {
			a.mu.Lock()
			delete(a.frozen, c.ContainerID)
			a.mu.Unlock()
		}
	case Kill:
		a.mu.Lock()
		_, frozen := a.frozen[c.ContainerID]
		a.mu.Unlock()
		if frozen {
			if err := a.act.Thaw(ctx, c.ContainerID); err != nil {
				return fmt.Errorf("thaw %s before kill: %w", c.ContainerID, err)
			}
		}
		if err = a.act.Kill(ctx, c.ContainerID, ReasonPreempted); err == nil {
			a.Forget(c.ContainerID)
		}
	default:
		return fmt.Errorf("apply %s to %s: %w", c.Type, c.ContainerID, ErrInvalidOption)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", strings.ToLower(c.Type.String()), c.ContainerID, err)
	}
	return nil
}

// Forget drops the corrections of a container that has gone away.
func (a *Applier) Forget(id string) {
	a.mu.Lock()
	delete(a.throttled, id)
	delete(a.ioLimited, id)
	delete(a.frozen, id)
	a.mu.Unlock()
}

// Active returns the corrections in force (throttles, io throttles, then
// freezes, by container ID).
func (a *Applier) Active() []Correction {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Correction, 0, len(a.throttled)+len(a.ioLimited)+len(a.frozen))
	for _, m := range []map[string]Correction{a.throttled, a.ioLimited, a.frozen} {
		ids := make([]string, 0, len(m))
		for id := range m {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			out = append(out, m[id])
		}
	}
	return out
}

// Recent returns the last corrections applied (up to 64), oldest first.
func (a *Applier) Recent() []Applied {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.recent)
}

// Blocking implements the estimator's Blocker: a description of the
// corrections in force, or "" when none is (a slow start's do not count).
func (a *Applier) Blocking() string {
	// A slow start's limits admit work; they do not answer interference
	// (and idle revocable work stays parked: offers would stop for good).
	act := slices.DeleteFunc(a.Active(), slowStarted)
	if len(act) == 0 {
		return ""
	}
	parts := make([]string, len(act))
	for i, c := range act {
		parts[i] = c.Type.String() + " " + c.ContainerID + " (" + c.Trigger.Signal + ")"
	}
	return fmt.Sprintf("%d correction(s) in force: %s", len(act), strings.Join(parts, ", "))
}

var descActive = prometheus.NewDesc("brim_qos_active_corrections", "Corrections in force, by type.", []string{"type"}, nil)

// Describe implements prometheus.Collector.
func (a *Applier) Describe(ch chan<- *prometheus.Desc) {
	a.total.Describe(ch)
	ch <- descActive
}

// Collect implements prometheus.Collector.
func (a *Applier) Collect(ch chan<- prometheus.Metric) {
	a.total.Collect(ch)
	a.mu.Lock()
	nt, ni, nf := len(a.throttled), len(a.ioLimited), len(a.frozen)
	a.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descActive, prometheus.GaugeValue, float64(nt), Throttle.String())
	ch <- prometheus.MustNewConstMetric(descActive, prometheus.GaugeValue, float64(ni), ThrottleIO.String())
	ch <- prometheus.MustNewConstMetric(descActive, prometheus.GaugeValue, float64(nf), Freeze.String())
}
