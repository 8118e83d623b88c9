package pressure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/isolator/cgroups"
	"github.com/brimnode/brim/monitor"
)

// IOThrottler caps a container's IO until called with a zero limit;
// *cgroups.Isolator implements it.
type IOThrottler interface {
	ThrottleIO(ctx context.Context, id string, l cgroups.IOLimit) error
}

// IOConfig configures an IOGuard. Zero fields take the defaults.
type IOConfig struct {
	// Interval between rounds; default 1 s.
	Interval time.Duration
	// StallThreshold is the fraction of a round during which some task of
	// a non-revocable container stalled on IO (PSI some) that means IO
	// pressure; default 0.2, in (0, 1].
	StallThreshold float64
	// ActiveStall is the fraction of a round a revocable container's own
	// tasks stalled on IO above which it counts as doing IO (a cause);
	// default 0.05. One without PSI counts as doing IO.
	ActiveStall float64
	// Limit is the throttle; default 10 MiB/s read and write.
	Limit cgroups.IOLimit
	// RecoverAfter is how long every non-revocable container must stay
	// below StallThreshold before the throttles are lifted; default 10 s.
	RecoverAfter time.Duration
}

func (c *IOConfig) defaults() error {
	if c.Interval == 0 {
		c.Interval = time.Second
	}
	if c.StallThreshold == 0 {
		c.StallThreshold = 0.2
	}
	if c.ActiveStall == 0 {
		c.ActiveStall = 0.05
	}
	if c.Limit.IsZero() {
		c.Limit = cgroups.IOLimit{ReadBPS: 10 << 20, WriteBPS: 10 << 20}
	}
	if c.RecoverAfter == 0 {
		c.RecoverAfter = 10 * time.Second
	}
	l := c.Limit
	switch {
	case c.Interval < 0 || c.RecoverAfter < 0:
		return fmt.Errorf("io guard: negative interval %s or recover-after %s: %w", c.Interval, c.RecoverAfter, ErrInvalidConfig)
	case !(c.StallThreshold > 0 && c.StallThreshold <= 1) || !(c.ActiveStall > 0 && c.ActiveStall <= 1):
		return fmt.Errorf("io guard: stall thresholds %v, %v: want (0, 1]: %w", c.StallThreshold, c.ActiveStall, ErrInvalidConfig)
	case l.ReadBPS < 0 || l.WriteBPS < 0 || l.ReadIOPS < 0 || l.WriteIOPS < 0:
		return fmt.Errorf("io guard: negative limit %+v: %w", l, ErrInvalidConfig)
	}
	return nil
}

// IOAction is one throttle set or lifted by the IOGuard.
type IOAction struct {
	At          time.Time
	ContainerID string
	// Throttle is true when the throttle was set, false when lifted.
	Throttle bool
	// Why names the signal ("<victim> stalled on IO 35 % of the time") or
	// "recovered".
	Why string
	Err error
}

// IOGuard throttles the IO of revocable containers doing IO while a
// non-revocable container stalls on IO. Round and Run must not be called
// concurrently; Throttled and Actions are safe for concurrent use.
type IOGuard struct {
	cfg IOConfig
	src Source
	thr IOThrottler
	log *slog.Logger
	now func() time.Time

	victims, causes stallTracker
	lastBad         time.Time

	mu          sync.Mutex
	throttled   map[string]bool
	recent      []IOAction
	nSet, nLift int64 // totals, for metrics
}

// NewIO returns an IO guard. Errors wrap ErrInvalidConfig.
func NewIO(cfg IOConfig, src Source, thr IOThrottler, log *slog.Logger) (*IOGuard, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if src == nil || thr == nil {
		return nil, fmt.Errorf("io guard: a source and a throttler are required: %w", ErrInvalidConfig)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &IOGuard{cfg: cfg, src: src, thr: thr, log: log.With("component", "io-guard"), now: time.Now,
		victims: stallTracker{last: map[string]stallSample{}}, causes: stallTracker{last: map[string]stallSample{}},
		throttled: map[string]bool{}}, nil
}

// Run runs a round every Interval until ctx ends; it returns ctx.Err().
func (g *IOGuard) Run(ctx context.Context) error {
	t := time.NewTicker(g.cfg.Interval)
	defer t.Stop()
	var failing bool
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		err := g.Round(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			g.log.Warn("io guard round failed", "err", err)
			failing = true
		case err == nil && failing:
			g.log.Info("io guard recovered")
			failing = false
		}
	}
}

// Round samples the containers once: while a non-revocable container
// stalls on IO for StallThreshold of the time, every revocable container
// doing IO is throttled to Limit; once none has for RecoverAfter, every
// throttle is lifted.
func (g *IOGuard) Round(ctx context.Context) error {
	cs, err := g.src.Containers(ctx)
	if err != nil {
		return fmt.Errorf("io guard: list containers: %w", err)
	}
	var revocable, guaranteed []monitor.ContainerInfo
	live := map[string]bool{}
	for _, c := range cs {
		live[c.ID] = true
		if c.Revocable {
			revocable = append(revocable, c)
		} else {
			guaranteed = append(guaranteed, c)
		}
	}
	g.mu.Lock()
	for id := range g.throttled {
		if !live[id] {
			delete(g.throttled, id)
		}
	}
	g.mu.Unlock()
	now := g.now()
	victim, frac := g.victims.worst(ctx, g.src, guaranteed, now, ioStall)
	active := g.active(ctx, revocable, now)
	var errs []error
	if victim != "" && frac >= g.cfg.StallThreshold {
		g.lastBad = now
		why := fmt.Sprintf("%s stalled on IO %.0f %% of the time", victim, 100*frac)
		for _, id := range active {
			if g.isThrottled(id) {
				continue
			}
			if err := g.set(ctx, id, g.cfg.Limit, now, why); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	if now.Sub(g.lastBad) < g.cfg.RecoverAfter {
		return nil
	}
	for _, id := range g.Throttled() {
		if err := g.set(ctx, id, cgroups.IOLimit{}, now, "recovered"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// active returns the revocable containers doing IO: their own IO stall
// fraction is at least ActiveStall, or they have no PSI.
func (g *IOGuard) active(ctx context.Context, revocable []monitor.ContainerInfo, now time.Time) []string {
	var out []string
	seen := make(map[string]bool, len(revocable))
	for _, c := range revocable {
		seen[c.ID] = true
		st, err := g.src.Usage(ctx, c.ID)
		if err != nil {
			continue
		}
		if !st.HasPressure {
			out = append(out, c.ID)
			continue
		}
		if f, ok := g.causes.add(c.ID, st, now, ioStall); ok && f >= g.cfg.ActiveStall {
			out = append(out, c.ID)
		}
	}
	g.causes.keep(seen)
	return out
}

func (g *IOGuard) set(ctx context.Context, id string, l cgroups.IOLimit, now time.Time, why string) error {
	on := !l.IsZero()
	err := g.thr.ThrottleIO(ctx, id, l)
	g.mu.Lock()
	if err == nil || errors.Is(err, isolator.ErrNotFound) {
		if on && err == nil {
			g.throttled[id] = true
		} else {
			delete(g.throttled, id)
		}
	}
	if err == nil && on {
		g.nSet++
	} else if err == nil {
		g.nLift++
	}
	g.recent = append(g.recent, IOAction{At: now, ContainerID: id, Throttle: on, Why: why, Err: err})
	if n := len(g.recent); n > recentEvictions {
		g.recent = slices.Delete(g.recent, 0, n-recentEvictions)
	}
	g.mu.Unlock()
	if err != nil {
		return fmt.Errorf("io guard: throttle %s: %w", id, err)
	}
	verb := "throttled the io of a revocable container"
	if !on {
		verb = "lifted the io throttle of a revocable container"
	}
	g.log.Info(verb, "container", id, "why", why, "limit", fmt.Sprintf("%+v", l))
	return nil
}

func (g *IOGuard) isThrottled(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.throttled[id]
}

// Throttled returns the containers whose IO the guard throttles, sorted.
func (g *IOGuard) Throttled() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, 0, len(g.throttled))
	for id := range g.throttled {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// Actions returns the last throttles set or lifted (up to 32), oldest
// first. The guard is also a prometheus.Collector
// (brim_pressure_io_actions_total, brim_pressure_io_throttled).
func (g *IOGuard) Actions() []IOAction {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.recent)
}
