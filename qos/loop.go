package qos

import (
	"context"
	"log/slog"
	"time"

	"github.com/brimnode/brim/monitor"
)

// UsageSource is what the QoS loop reads; *monitor.Monitor implements it.
type UsageSource interface {
	Usage() monitor.Usage
	Subscribe() (<-chan struct{}, func())
}

// LoopConfig configures Run.
type LoopConfig struct {
	// Interval between rounds; default 1 s.
	Interval time.Duration
	// TickOnly disables event-driven rounds (a round on every monitor
	// notification: each sample and each reported application latency);
	// rounds then run on the interval only.
	TickOnly bool
}

// Run is the agent's QoS loop: every Interval, and on every notification
// of src unless TickOnly, it asks c for corrections on src's latest usage
// and applies them with a. A controller error is logged and the round
// yields no corrections (noop fallback); corrections of containers that
// have gone away are forgotten. It returns ctx.Err() when ctx is done.
func Run(ctx context.Context, src UsageSource, c Controller, a *Applier, cfg LoopConfig, log *slog.Logger) error {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var notify <-chan struct{}
	if !cfg.TickOnly {
		ch, cancel := src.Subscribe()
		defer cancel()
		notify = ch
	}
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-notify:
		}
		Round(ctx, src.Usage(), c, a, log)
	}
}

// Round runs one QoS round on u: corrections from c, applied by a.
func Round(ctx context.Context, u monitor.Usage, c Controller, a *Applier, log *slog.Logger) {
	a.Prune(&u)
	cs, err := c.Corrections(ctx, u)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("qos controller failed; no corrections this round", "err", err)
		}
		return
	}
	if len(cs) == 0 {
		return
	}
	// Apply logs and counts each failure; the next round retries.
	_ = a.Apply(ctx, cs)
}

// Prune forgets the corrections of containers absent from u.
func (a *Applier) Prune(u *monitor.Usage) {
	live := make(map[string]bool, len(u.Containers))
	for i := range u.Containers {
		live[u.Containers[i].ID] = true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for id := range a.throttled {
		if !live[id] {
			delete(a.throttled, id)
		}
	}
	for id := range a.frozen {
		if !live[id] {
			delete(a.frozen, id)
		}
	}
}
