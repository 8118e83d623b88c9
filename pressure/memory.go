package pressure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/isolator/cgroups"
	"github.com/brimnode/brim/monitor"
)

// ErrInvalidConfig is returned for a configuration out of range.
var ErrInvalidConfig = errors.New("invalid pressure guard configuration")

// Source lists the node's running containers and samples one; the agent
// implements it (as monitor.Source).
type Source interface {
	Containers(ctx context.Context) ([]monitor.ContainerInfo, error)
	Usage(ctx context.Context, id string) (*isolator.Statistics, error)
}

// ScopeReader reads the memory the containers share: *cgroups.Isolator
// implements it (its parent group, or the node).
type ScopeReader interface {
	ParentMemory() (cgroups.ScopeMemory, error)
}

// Waker is an optional ability of a ScopeReader: WatchParentMemory
// reports the kernel's own memory-pressure notifications for the scope
// (*cgroups.Isolator: v1 memory.pressure_level, v2 a PSI trigger), so
// that a round runs at once rather than at the next tick. The channel
// closes when ctx ends.
type Waker interface {
	WatchParentMemory(ctx context.Context) (<-chan struct{}, error)
}

// Evictor ends a revocable container; its task's status carries message.
type Evictor interface {
	Evict(ctx context.Context, id, message string) error
}

// MemoryConfig configures a MemoryGuard. Zero fields take the defaults.
type MemoryConfig struct {
	// Interval between rounds; default 500 ms.
	Interval time.Duration
	// UsageThreshold is the fraction of the scope's limit (brim's parent
	// group's, else the node's memory) whose working set means pressure;
	// default 0.9, in (0, 1].
	UsageThreshold float64
	// StallThreshold is the fraction of a round during which some task of
	// a non-revocable container stalled on memory (PSI some) that means
	// pressure; default 0.1, in (0, 1]. Needs per-container PSI (v2, or
	// the unified directories of a hybrid host).
	StallThreshold float64
	// Cooldown is the least time between two evictions; default 1 s.
	Cooldown time.Duration
}

func (c *MemoryConfig) defaults() error {
	if c.Interval == 0 {
		c.Interval = 500 * time.Millisecond
	}
	if c.UsageThreshold == 0 {
		c.UsageThreshold = 0.9
	}
	if c.StallThreshold == 0 {
		c.StallThreshold = 0.1
	}
	if c.Cooldown == 0 {
		c.Cooldown = time.Second
	}
	switch {
	case c.Interval < 0 || c.Cooldown < 0:
		return fmt.Errorf("memory guard: negative interval %s or cooldown %s: %w", c.Interval, c.Cooldown, ErrInvalidConfig)
	case !(c.UsageThreshold > 0 && c.UsageThreshold <= 1):
		return fmt.Errorf("memory guard: usage threshold %v: want (0, 1]: %w", c.UsageThreshold, ErrInvalidConfig)
	case !(c.StallThreshold > 0 && c.StallThreshold <= 1):
		return fmt.Errorf("memory guard: stall threshold %v: want (0, 1]: %w", c.StallThreshold, ErrInvalidConfig)
	}
	return nil
}

// Eviction is one container the MemoryGuard evicted (or failed to).
type Eviction struct {
	At          time.Time
	ContainerID string
	// WorkingSet is the container's working set when it was chosen.
	WorkingSet uint64
	// Message is the reason given to its task.
	Message string
	Err     error
}

// MemoryGuard evicts revocable containers under memory pressure. Round and
// Run must not be called concurrently; Evictions is safe for concurrent
// use.
type MemoryGuard struct {
	cfg   MemoryConfig
	src   Source
	scope ScopeReader // nil: PSI only
	ev    Evictor
	log   *slog.Logger
	now   func() time.Time

	stalls stallTracker
	last   time.Time    // of the last eviction
	wakes  atomic.Int64 // rounds run on a kernel notification

	mu              sync.Mutex
	recent          []Eviction // newest last, bounded
	evicted, failed int64      // totals, for metrics
}

const recentEvictions = 32

// NewMemory returns a memory guard. scope may be nil (then only the
// non-revocable containers' PSI signals pressure). Errors wrap
// ErrInvalidConfig.
func NewMemory(cfg MemoryConfig, src Source, scope ScopeReader, ev Evictor, log *slog.Logger) (*MemoryGuard, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if src == nil || ev == nil {
		return nil, fmt.Errorf("memory guard: a source and an evictor are required: %w", ErrInvalidConfig)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &MemoryGuard{cfg: cfg, src: src, scope: scope, ev: ev, log: log.With("component", "memory-guard"), now: time.Now,
		stalls: stallTracker{last: map[string]stallSample{}}}, nil
}

// Run runs a round every Interval, and at once when the scope's kernel
// notification (Waker) fires (at most one extra round per Interval/5),
// until ctx ends; it returns ctx.Err(). A failed round is logged and the
// next one runs as usual.
func (g *MemoryGuard) Run(ctx context.Context) error {
	t := time.NewTicker(g.cfg.Interval)
	defer t.Stop()
	var wake <-chan struct{}
	if w, ok := g.scope.(Waker); ok {
		ch, err := w.WatchParentMemory(ctx)
		if err != nil {
			g.log.Info("no kernel memory-pressure notifications; polling only", "interval", g.cfg.Interval, "err", err)
		} else {
			wake = ch
		}
	}
	var (
		failing bool
		last    time.Time
	)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case _, ok := <-wake:
			if !ok {
				wake = nil
				continue
			}
			if time.Since(last) < g.cfg.Interval/5 {
				continue // a round just ran; the next tick follows
			}
			g.wakes.Add(1)
		}
		last = time.Now()
		err := g.Round(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			g.log.Warn("memory guard round failed", "err", err)
			failing = true
		case err == nil && failing:
			g.log.Info("memory guard recovered")
			failing = false
		}
	}
}

// Round looks at the node once and evicts at most one revocable
// container: when revocable work runs, and the scope's working set is at
// or above UsageThreshold of its limit, or a non-revocable container
// stalled on memory for StallThreshold of the time since the last round,
// and the last eviction is at least Cooldown ago. The victim is the
// revocable container with the largest working set.
func (g *MemoryGuard) Round(ctx context.Context) error {
	cs, err := g.src.Containers(ctx)
	if err != nil {
		return fmt.Errorf("memory guard: list containers: %w", err)
	}
	var revocable, guaranteed []monitor.ContainerInfo
	for _, c := range cs {
		if c.Revocable {
			revocable = append(revocable, c)
		} else {
			guaranteed = append(guaranteed, c)
		}
	}
	now := g.now()
	if len(revocable) == 0 {
		g.stalls.reset() // a gap in the samples is not a stall
		return nil
	}
	why, err := g.pressure(ctx, guaranteed, now)
	if why == "" || now.Sub(g.last) < g.cfg.Cooldown {
		return err
	}
	victim, ws, verr := g.largest(ctx, revocable)
	if victim == "" {
		return errors.Join(err, verr)
	}
	msg := "evicted: memory pressure (" + why + ")"
	eerr := g.ev.Evict(ctx, victim, msg)
	g.last = now
	g.record(Eviction{At: now, ContainerID: victim, WorkingSet: ws, Message: msg, Err: eerr})
	if eerr != nil {
		return errors.Join(err, fmt.Errorf("memory guard: evict %s: %w", victim, eerr))
	}
	g.log.Warn("evicted a revocable container under memory pressure", "container", victim, "working_set", ws, "why", why)
	return err
}

// pressure says why the node is under memory pressure ("" when it is not).
func (g *MemoryGuard) pressure(ctx context.Context, guaranteed []monitor.ContainerInfo, now time.Time) (string, error) {
	var errs []error
	if g.scope != nil {
		m, err := g.scope.ParentMemory()
		if err != nil {
			errs = append(errs, fmt.Errorf("memory guard: %w", err))
		} else if m.Limit > 0 && float64(m.Used) >= g.cfg.UsageThreshold*float64(m.Limit) {
			what := "containers' parent"
			if m.Node {
				what = "node"
			}
			return fmt.Sprintf("%s working set %d MiB of %d MiB ≥ %.0f %%", what, m.Used>>20, m.Limit>>20, 100*g.cfg.UsageThreshold), nil
		}
	}
	worst, frac := g.stalls.worst(ctx, g.src, guaranteed, now, memoryStall)
	if worst != "" && frac >= g.cfg.StallThreshold {
		return fmt.Sprintf("%s stalled on memory %.0f %% of the time", worst, 100*frac), errors.Join(errs...)
	}
	return "", errors.Join(errs...)
}

// largest returns the revocable container with the largest working set.
func (g *MemoryGuard) largest(ctx context.Context, revocable []monitor.ContainerInfo) (string, uint64, error) {
	var (
		best   string
		bestWS uint64
		errs   []error
	)
	for _, c := range revocable {
		if c.Stopping {
			// Being killed already (an eviction that is still exiting):
			// evicting it again frees nothing more; the next largest
			// does.
			continue
		}
		st, err := g.src.Usage(ctx, c.ID)
		if err != nil {
			errs = append(errs, fmt.Errorf("memory guard: usage of %s: %w", c.ID, err))
			continue
		}
		ws := st.MemWorkingSet
		if ws == 0 {
			ws = st.MemUsageBytes
		}
		if best == "" || ws > bestWS {
			best, bestWS = c.ID, ws
		}
	}
	return best, bestWS, errors.Join(errs...)
}

func (g *MemoryGuard) record(e Eviction) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e.Err != nil {
		g.failed++
	} else {
		g.evicted++
	}
	g.recent = append(g.recent, e)
	if n := len(g.recent); n > recentEvictions {
		g.recent = slices.Delete(g.recent, 0, n-recentEvictions)
	}
}

// Wakes returns how many rounds ran on a kernel notification rather than
// the tick.
func (g *MemoryGuard) Wakes() int64 { return g.wakes.Load() }

// Evictions returns the last evictions (up to 32), oldest first. The
// guard is also a prometheus.Collector (brim_pressure_evictions_total,
// brim_pressure_memory_wakes_total).
func (g *MemoryGuard) Evictions() []Eviction {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.recent)
}
