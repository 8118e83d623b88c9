package qos

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/brimnode/brim/monitor"
)

// LoadConfig configures the load controller.
type LoadConfig struct {
	// PSI is the threshold on the host's cpu pressure (some, avg10, as a
	// fraction of time: 0.5 = half the time some task waited for a cpu),
	// used when the host has PSI; default 0.5; zero: load1 instead.
	PSI float64
	// Load1 is the threshold on the 1-minute load average, used when the
	// host has no PSI (or PSI is zero); default the host's cpu count.
	Load1 float64
	// Load5 and Load15 are optional extra thresholds on the slower load
	// averages (zero: off). They lag minutes behind and carry load left
	// over from earlier work: prefer PSI or load1.
	Load5, Load15 float64
	// Cooldown is the minimum time between two kills (load averages lag
	// behind a kill); default 15 s.
	Cooldown time.Duration
	// Grace: nothing is killed until this long after the controller's
	// first round (the agent's start: the load of what ran before is
	// still in the averages); default 1 min.
	Grace time.Duration
	// ActiveCPU: only revocable containers that used at least this many
	// cpus over their last monitor interval are killed (idle work does
	// not make load; one just launched, with fewer than two samples, is
	// not active yet); default 0.05.
	ActiveCPU float64
}

// Load kills active revocable containers while the host's cpu pressure
// (PSI) or load1 is above a threshold, like Mesos's load QoS controller,
// but one container per round (and per cool-down), youngest first, and
// not during the grace period after its start. Not safe for concurrent
// use.
type Load struct {
	cfg      LoadConfig
	start    time.Time
	lastKill time.Time
}

var _ Controller = (*Load)(nil)

// NewLoad is the load factory. Options: psi (fraction), load1, load5,
// load15 (thresholds), cooldown, grace (durations), active-cpu (cpus).
func NewLoad(opts Options, _ *slog.Logger) (Controller, error) {
	r := opts.Reader()
	c := LoadConfig{
		PSI:       r.Float("psi", 0.5),
		Load1:     r.Float("load1", 0),
		Load5:     r.Float("load5", 0),
		Load15:    r.Float("load15", 0),
		Cooldown:  r.Duration("cooldown", 15*time.Second),
		Grace:     r.Duration("grace", time.Minute),
		ActiveCPU: r.Float("active-cpu", 0.05),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("load controller: %w", err)
	}
	if c.PSI < 0 || c.PSI > 1 || c.Load1 < 0 || c.Load5 < 0 || c.Load15 < 0 || c.ActiveCPU < 0 {
		return nil, fmt.Errorf("load controller: need 0 ≤ psi ≤ 1 and non-negative load and active-cpu thresholds: %w", ErrInvalidOption)
	}
	return &Load{cfg: c}, nil
}

// NewLoadWith returns a load controller for c (zero fields are not
// defaulted: zero Grace and ActiveCPU turn those rules off).
func NewLoadWith(c LoadConfig) *Load { return &Load{cfg: c} }

// trigger returns the load signal over its threshold, if any.
func (l *Load) trigger(h *monitor.HostStatistics) (Trigger, bool) {
	if l.cfg.PSI > 0 && h.HasCPUPressure {
		if v := h.CPUPressure.SomeAvg10 / 100; v > l.cfg.PSI {
			return Trigger{Signal: "host-psi-cpu", Value: v, Threshold: l.cfg.PSI}, true
		}
	} else {
		t1 := l.cfg.Load1
		if t1 == 0 {
			t1 = float64(max(h.NumCPU, 1))
		}
		if h.Load1 > t1 {
			return Trigger{Signal: "load", Value: h.Load1, Threshold: t1}, true
		}
	}
	switch {
	case l.cfg.Load5 > 0 && h.Load5 > l.cfg.Load5:
		return Trigger{Signal: "load", Value: h.Load5, Threshold: l.cfg.Load5}, true
	case l.cfg.Load15 > 0 && h.Load15 > l.cfg.Load15:
		return Trigger{Signal: "load", Value: h.Load15, Threshold: l.cfg.Load15}, true
	}
	return Trigger{}, false
}

// Corrections implements Controller.
func (l *Load) Corrections(_ context.Context, u monitor.Usage) ([]Correction, error) {
	if l.start.IsZero() {
		l.start = u.Timestamp
	}
	if u.Timestamp.Sub(l.start) < l.cfg.Grace {
		return nil, nil
	}
	trig, over := l.trigger(&u.Host)
	if !over {
		return nil, nil
	}
	if !l.lastKill.IsZero() && u.Timestamp.Sub(l.lastKill) < l.cfg.Cooldown {
		return nil, nil
	}
	victims := slices.DeleteFunc(youngestRevocable(&u), func(c *monitor.ContainerUsage) bool {
		if l.cfg.ActiveCPU <= 0 {
			return false
		}
		if c.History == nil {
			return true
		}
		p := c.History.Last(2)
		if len(p) < 2 {
			return true
		}
		r, ok := monitor.CPURate(&p[0], &p[1])
		return !ok || r < l.cfg.ActiveCPU
	})
	if len(victims) == 0 {
		return nil, nil
	}
	l.lastKill = u.Timestamp
	return []Correction{{
		Type: Kill, ContainerID: victims[0].ID, Trigger: trig,
		Reason: fmt.Sprintf("host %s %.2f above threshold %.2f: preempting the youngest active revocable container", trig.Signal, trig.Value, trig.Threshold),
	}}, nil
}
