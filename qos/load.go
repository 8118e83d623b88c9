package qos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/brimnode/brim/monitor"
)

// LoadConfig configures the load controller.
type LoadConfig struct {
	// Load5 and Load15 are the host load-average thresholds; zero disables
	// one. When both are zero, Load5 is the host's cpu count.
	Load5, Load15 float64
	// Cooldown is the minimum time between two kills (load averages lag
	// behind a kill); default 15 s.
	Cooldown time.Duration
}

// Load kills revocable containers while the host load average is above a
// threshold, like Mesos's load QoS controller, but one container per
// round (and per cool-down), youngest first. Not safe for concurrent use.
type Load struct {
	cfg      LoadConfig
	lastKill time.Time
}

var _ Controller = (*Load)(nil)

// NewLoad is the load factory. Options: load5, load15 (thresholds),
// cooldown (duration).
func NewLoad(opts Options, _ *slog.Logger) (Controller, error) {
	var errs []error
	c := LoadConfig{
		Load5:    opts.float("load5", 0, &errs),
		Load15:   opts.float("load15", 0, &errs),
		Cooldown: opts.duration("cooldown", 15*time.Second, &errs),
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("load controller: %w", err)
	}
	if c.Load5 < 0 || c.Load15 < 0 {
		return nil, fmt.Errorf("load controller: negative threshold: %w", ErrInvalidOption)
	}
	return &Load{cfg: c}, nil
}

// NewLoadWith returns a load controller for c.
func NewLoadWith(c LoadConfig) *Load { return &Load{cfg: c} }

// Corrections implements Controller.
func (l *Load) Corrections(_ context.Context, u monitor.Usage) ([]Correction, error) {
	t5, t15 := l.cfg.Load5, l.cfg.Load15
	if t5 == 0 && t15 == 0 {
		t5 = float64(max(u.Host.NumCPU, 1))
	}
	var trig Trigger
	switch {
	case t5 > 0 && u.Host.Load5 > t5:
		trig = Trigger{Signal: "load", Value: u.Host.Load5, Threshold: t5}
	case t15 > 0 && u.Host.Load15 > t15:
		trig = Trigger{Signal: "load", Value: u.Host.Load15, Threshold: t15}
	default:
		return nil, nil
	}
	if !l.lastKill.IsZero() && u.Timestamp.Sub(l.lastKill) < l.cfg.Cooldown {
		return nil, nil
	}
	victims := youngestRevocable(&u)
	if len(victims) == 0 {
		return nil, nil
	}
	l.lastKill = u.Timestamp
	return []Correction{{
		Type: Kill, ContainerID: victims[0].ID, Trigger: trig,
		Reason: fmt.Sprintf("host load %.2f above threshold %.2f: preempting the youngest revocable container", trig.Value, trig.Threshold),
	}}, nil
}
