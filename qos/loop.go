package qos

import (
	"context"
	"log/slog"
	"time"

	"github.com/brimnode/brim/internal/failrun"
	"github.com/brimnode/brim/monitor"
)

// UsageSource is what the QoS loop reads; *monitor.Monitor implements it.
type UsageSource interface {
	Usage() monitor.Usage
	Subscribe() (<-chan struct{}, func())
}

// LoopConfig configures Run.
type LoopConfig struct {
	// Interval between rounds; default 1 s. A round on a notification
	// postpones the next tick by a whole Interval (one monitor round
	// does not make two QoS rounds).
	Interval time.Duration
	// TickOnly disables event-driven rounds (a round on every monitor
	// notification: each sample and each reported application latency);
	// rounds then run on the interval only, and on Recheck.
	TickOnly bool
	// Recheck is the delay of the next round while the controller has a
	// degradation to confirm (Pender); default Interval/10.
	Recheck time.Duration
	// Switch, when set, replaces the controller between rounds (see
	// Switch.Replace).
	Switch *Switch
}

// Run is the agent's QoS loop: every Interval, on every notification of
// src unless TickOnly, and Recheck after a round whose controller has a
// degradation to confirm (Pender), it asks c for corrections on src's
// latest usage and applies them with a. A controller error is logged (the
// first of a run of failures, then at most once per Interval, and when it
// recovers) and the round yields no corrections (noop fallback);
// corrections of containers that have gone away are forgotten. With
// cfg.Switch the controller may be replaced between rounds. It returns
// ctx.Err() when ctx is done.
func Run(ctx context.Context, src UsageSource, c Controller, a *Applier, cfg LoopConfig, log *slog.Logger) error {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = cfg.Interval / 10
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
	l := &loop{c: c, a: a, log: log, fails: failrun.Logger{Every: cfg.Interval}}
	var swaps <-chan swapRequest
	if cfg.Switch != nil {
		swaps = cfg.Switch.reqs
	}
	tick := time.NewTimer(cfg.Interval)
	defer tick.Stop()
	recheck := time.NewTimer(cfg.Recheck)
	recheck.Stop()
	defer recheck.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		case <-notify:
		case <-recheck.C:
		case r := <-swaps:
			var took bool
			if l.c, took = r.take(ctx, l.c, a); !took {
				continue
			}
			// A new controller learns from the latest usage at once.
		}
		l.round(ctx, src.Usage())
		tick.Reset(cfg.Interval)
		if pender, ok := l.c.(Pender); ok && pender.Pending() {
			recheck.Reset(cfg.Recheck)
		} else {
			recheck.Stop()
		}
	}
}

// loop is Run's state: the controller's failures, for logging.
type loop struct {
	c     Controller
	a     *Applier
	log   *slog.Logger
	fails failrun.Logger // at most one failure warning per Interval
}

// round runs one QoS round on u: corrections from c, applied by a.
func (l *loop) round(ctx context.Context, u monitor.Usage) {
	l.a.Prune(&u)
	cs, err := l.c.Corrections(ctx, u)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		l.fails.Failure(l.log, "qos controller failed; no corrections this round", err, time.Now())
		return
	}
	l.fails.Success(l.log, "qos controller recovered")
	if len(cs) == 0 {
		return
	}
	// Apply logs and counts each failure; the next round retries.
	_ = l.a.Apply(ctx, cs)
}

// Prune forgets the corrections of containers absent from u.
func (a *Applier) Prune(u *monitor.Usage) {
	live := liveIDs(u)
	a.mu.Lock()
	defer a.mu.Unlock()
	keepLive(a.throttled, live)
	keepLive(a.frozen, live)
	keepLive(a.ioLimited, live)
}
