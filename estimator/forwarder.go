package estimator

import (
	"math"
	"sync"
	"time"

	"github.com/brimnode/brim/resources"
	"github.com/prometheus/client_golang/prometheus"
)

// ForwarderConfig configures the hysteresis band.
type ForwarderConfig struct {
	// Band is the relative change (of the last forwarded value) below which
	// a new estimate is not forwarded; default 0.1.
	Band float64
	// Floors are absolute changes below which a scalar is not forwarded,
	// by resource name; default cpus 0.1, mem 64 (MiB). A resource with no
	// floor uses 0.
	Floors map[string]float64
}

// Forwarder decides whether a new estimate differs enough from the last
// one forwarded to the master (hysteresis), and remembers both for the
// agent's status and `brim agent explain`. It is a prometheus.Collector
// (brim_estimator_revocable). Safe for concurrent use.
//
// An estimate is forwarded when it is the first, when a resource appears
// or disappears (goes to or from zero), or when any scalar moved by more
// than max(Band × last, floor).
type Forwarder struct {
	cfg ForwarderConfig

	mu            sync.Mutex
	current       Estimate
	currentAt     time.Time
	forwarded     Estimate
	forwardedAt   time.Time
	haveForwarded bool
	stale         bool // the last send failed: forward again
}

// NewForwarder returns a forwarder for cfg (zero fields take defaults).
func NewForwarder(cfg ForwarderConfig) *Forwarder {
	if cfg.Band <= 0 {
		cfg.Band = 0.1
	}
	if cfg.Floors == nil {
		cfg.Floors = map[string]float64{resources.CPUs: 0.1, resources.Mem: 64}
	}
	return &Forwarder{cfg: cfg}
}

// Decide records est (computed at now) and reports whether the agent must
// forward it; if so it becomes the last forwarded estimate.
func (f *Forwarder) Decide(est Estimate, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.current, f.currentAt = est, now
	if f.haveForwarded && !f.stale && !f.changed(f.forwarded.Revocable, est.Revocable) {
		return false
	}
	f.forwarded, f.forwardedAt, f.haveForwarded, f.stale = est, now, true, false
	return true
}

// Current returns the latest estimate and when it was computed.
func (f *Forwarder) Current() (Estimate, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.current, f.currentAt
}

// Forwarded returns the last forwarded estimate and when; ok is false
// before the first.
func (f *Forwarder) Forwarded() (est Estimate, at time.Time, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.forwarded, f.forwardedAt, f.haveForwarded
}

func (f *Forwarder) changed(old, cur resources.Resources) bool {
	names := map[string]bool{}
	for _, r := range old {
		if r.Type == resources.Scalar {
			names[r.Name] = true
		}
	}
	for _, r := range cur {
		if r.Type == resources.Scalar {
			names[r.Name] = true
		}
	}
	for n := range names {
		o, c := old.Scalar(n).Float64(), cur.Scalar(n).Float64()
		if (o == 0) != (c == 0) {
			return true
		}
		if math.Abs(c-o) > max(f.cfg.Band*o, f.cfg.Floors[n]) {
			return true
		}
	}
	return false
}

var descRevocable = prometheus.NewDesc("brim_estimator_revocable", "Revocable resources estimated (state=current) and last forwarded to the master (state=forwarded); mem in MiB.", []string{"resource", "state"}, nil)

// Describe implements prometheus.Collector.
func (f *Forwarder) Describe(ch chan<- *prometheus.Desc) { ch <- descRevocable }

// Collect implements prometheus.Collector.
func (f *Forwarder) Collect(ch chan<- prometheus.Metric) {
	cur, _ := f.Current()
	fwd, _, _ := f.Forwarded()
	for _, n := range []string{resources.CPUs, resources.Mem} {
		ch <- prometheus.MustNewConstMetric(descRevocable, prometheus.GaugeValue, cur.Revocable.Scalar(n).Float64(), n, "current")
		ch <- prometheus.MustNewConstMetric(descRevocable, prometheus.GaugeValue, fwd.Revocable.Scalar(n).Float64(), n, "forwarded")
	}
}

// Invalidate makes the next Decide forward whatever it is given (after a
// failed send).
func (f *Forwarder) Invalidate() {
	f.mu.Lock()
	f.stale = true
	f.mu.Unlock()
}
