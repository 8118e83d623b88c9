package estimator

import (
	"context"
	"log/slog"
	"time"

	"github.com/brimnode/brim/monitor"
)

// UsageSource is what the estimator loop reads; *monitor.Monitor
// implements it.
type UsageSource interface {
	Usage() monitor.Usage
}

// ForwardFunc sends an estimate to the master (the agent's masterlink
// call). An error makes the next round forward again.
type ForwardFunc func(ctx context.Context, est Estimate) error

// DefaultInterval is the default check interval (Mesos's 15 s); the agent
// flag may lower it to 1 s.
const DefaultInterval = 15 * time.Second

// Run is the agent's estimator loop: every interval it estimates from
// src's latest usage and forwards the estimate when f lets it through
// (hysteresis). An estimator error is logged and answered with an empty
// estimate (offer nothing). It returns ctx.Err() when ctx is done.
func Run(ctx context.Context, src UsageSource, e Estimator, f *Forwarder, interval time.Duration, forward ForwardFunc, log *slog.Logger) error {
	if interval <= 0 {
		interval = DefaultInterval
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e = Fallback(e, log)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		est, err := e.Estimate(ctx, src.Usage())
		if err == nil && f.Decide(est, time.Now()) {
			if err := forward(ctx, est); err != nil && ctx.Err() == nil {
				log.Warn("forward estimate", "revocable", est.Revocable.String(), "err", err)
				f.Invalidate()
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
