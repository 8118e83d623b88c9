package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/brimnode/brim/internal/errdefs"
	"github.com/brimnode/brim/isolator"
	"github.com/prometheus/client_golang/prometheus"
)

// Source lists the containers to monitor and samples one. The agent adapts
// the containerizer to it. Usage returns an error wrapping
// internal/errdefs.ErrContainerNotFound (as agent.ErrNotFound,
// isolator.ErrNotFound and ErrNotFound do) for a container that has gone
// away.
type Source interface {
	Containers(ctx context.Context) ([]ContainerInfo, error)
	Usage(ctx context.Context, id string) (*isolator.Statistics, error)
}

// SignalSource adds signals to the samples of one round (the eBPF monitor
// fills RunQueue and OnCPU, finding each container's cgroup through
// ContainerInfo.CgroupPath). containers are the round's live containers;
// stats is keyed by container ID. Collect must only modify the entries and
// keep neither argument.
type SignalSource interface {
	Collect(ctx context.Context, containers []ContainerInfo, stats map[string]*Statistics) error
}

// HostSource samples node-wide figures.
type HostSource interface {
	Host(ctx context.Context) (HostStatistics, error)
}

// Config configures a Monitor. Zero fields take the defaults.
type Config struct {
	// Interval between samples; default 1 s.
	Interval time.Duration
	// HistorySize is the number of samples kept per container; default 300.
	HistorySize int
	// Total is the node's total resources (reported in Usage).
	Total Capacity
	// Host samples node-wide figures; default a gopsutil sampler. Set it
	// to NoHost to sample none.
	Host HostSource
	// Signals add to each round's samples, in order.
	Signals []SignalSource
	// AppLatencyTTL is how long a reported application latency stays
	// attached to samples; default 3 × Interval.
	AppLatencyTTL time.Duration
	// Now is the clock; default time.Now (tests inject a fake).
	Now func() time.Time
}

// NoHost is a HostSource that reports nothing (for tests and benchmarks).
var NoHost HostSource = noHost{}

type noHost struct{}

func (noHost) Host(context.Context) (HostStatistics, error) { return HostStatistics{}, nil }

// Monitor samples containers and the host. Its methods are safe for
// concurrent use; Run is called once and returns when ctx is cancelled.
type Monitor struct {
	src Source
	cfg Config
	log *slog.Logger

	// sampleMu serialises rounds (Run and explicit Sample calls).
	sampleMu sync.Mutex

	mu        sync.RWMutex
	infos     []ContainerInfo
	latest    map[string]Statistics
	rings     map[string]*Ring
	host      HostStatistics
	appLat    map[string]LatencySummary
	signals   []SignalSource
	subs      map[chan struct{}]struct{}
	lastRound time.Time

	samples      prometheus.Counter
	sampleErrors prometheus.Counter
	duration     prometheus.Histogram
}

// New returns a monitor reading src. log may be nil (no logging).
func New(src Source, cfg Config, log *slog.Logger) *Monitor {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.HistorySize <= 0 {
		cfg.HistorySize = 300
	}
	if cfg.Host == nil {
		cfg.Host = NewHostSampler()
	}
	if cfg.AppLatencyTTL <= 0 {
		cfg.AppLatencyTTL = 3 * cfg.Interval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Monitor{
		src:     src,
		cfg:     cfg,
		log:     log.With("component", "monitor"),
		latest:  map[string]Statistics{},
		rings:   map[string]*Ring{},
		appLat:  map[string]LatencySummary{},
		signals: append([]SignalSource(nil), cfg.Signals...),
		subs:    map[chan struct{}]struct{}{},
		samples: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "brim_monitor_samples_total", Help: "Sampling rounds completed by the monitor.",
		}),
		sampleErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "brim_monitor_sample_errors_total", Help: "Container samples that failed (other than containers that went away).",
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "brim_monitor_sample_duration_seconds", Help: "Duration of one sampling round over all containers.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14),
		}),
	}
}

// Interval returns the sampling interval.
func (m *Monitor) Interval() time.Duration { return m.cfg.Interval }

// AddSignalSource registers s; it is called from the next round on.
func (m *Monitor) AddSignalSource(s SignalSource) {
	m.mu.Lock()
	m.signals = append(m.signals, s)
	m.mu.Unlock()
}

// Run samples every Interval until ctx is cancelled; it returns ctx.Err().
// A failed round is logged and the loop carries on.
func (m *Monitor) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		if err := m.Sample(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("sample containers", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Sample runs one sampling round: lists the containers, samples each,
// lets the signal sources add to the samples, samples the host, and
// notifies subscribers. Containers that went away between listing and
// sampling are skipped; other per-container errors are counted and joined
// into the returned error, the other containers are still recorded. Run
// calls it every Interval; the agent also calls it right after launching
// or killing a container, so the QoS loop sees new revocable work at once
// rather than at the next tick.
func (m *Monitor) Sample(ctx context.Context) error {
	m.sampleMu.Lock()
	defer m.sampleMu.Unlock()
	start := time.Now()

	infos, err := m.src.Containers(ctx)
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	now := m.cfg.Now()
	stats := make(map[string]*Statistics, len(infos))
	live := infos[:0:0]
	var errs []error
	for _, info := range infos {
		is, err := m.src.Usage(ctx, info.ID)
		if err != nil {
			// Gone since the listing: the agent's, the containerizer's
			// and the isolators' "not found" are all this one.
			if errors.Is(err, errdefs.ErrContainerNotFound) {
				continue
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			m.sampleErrors.Inc()
			errs = append(errs, fmt.Errorf("sample %s: %w", info.ID, err))
			continue
		}
		s := &Statistics{Statistics: *is}
		if s.Timestamp.IsZero() {
			s.Timestamp = now
		}
		stats[info.ID] = s
		live = append(live, info)
	}

	m.mu.RLock()
	signals := m.signals
	for id, s := range stats {
		if l, ok := m.appLat[id]; ok && now.Sub(l.Measured) <= m.cfg.AppLatencyTTL {
			s.AppLatency = &l
		}
	}
	m.mu.RUnlock()
	for _, sig := range signals {
		if err := sig.Collect(ctx, live, stats); err != nil {
			errs = append(errs, fmt.Errorf("collect signals: %w", err))
		}
	}

	host, herr := m.cfg.Host.Host(ctx)
	if herr != nil {
		errs = append(errs, fmt.Errorf("sample host: %w", herr))
	}

	m.mu.Lock()
	m.infos = live
	for id, s := range stats {
		r := m.rings[id]
		if r == nil {
			r = NewRing(m.cfg.HistorySize)
			m.rings[id] = r
		}
		r.Push(*s)
		m.latest[id] = *s
	}
	for id := range m.rings {
		if _, ok := stats[id]; !ok {
			delete(m.rings, id)
			delete(m.latest, id)
			delete(m.appLat, id)
		}
	}
	if herr == nil {
		m.host = host
	}
	m.lastRound = now
	m.notifyLocked()
	m.mu.Unlock()

	m.samples.Inc()
	m.duration.Observe(time.Since(start).Seconds())
	return errors.Join(errs...)
}

// Usage returns a snapshot of the last round. The containers' History
// rings are shared with the monitor and keep filling.
func (m *Monitor) Usage() Usage {
	m.mu.RLock()
	defer m.mu.RUnlock()
	u := Usage{
		Timestamp:  m.lastRound,
		Total:      m.cfg.Total,
		Host:       m.host,
		Containers: make([]ContainerUsage, 0, len(m.infos)),
	}
	for _, info := range m.infos {
		u.Containers = append(u.Containers, ContainerUsage{
			ContainerInfo: info,
			Latest:        m.latest[info.ID],
			History:       m.rings[info.ID],
		})
	}
	return u
}

// History returns a copy of container id's samples, oldest first, or an
// error wrapping ErrNotFound.
func (m *Monitor) History(id string) ([]Statistics, error) {
	m.mu.RLock()
	r := m.rings[id]
	m.mu.RUnlock()
	if r == nil {
		return nil, fmt.Errorf("history of %s: %w", id, ErrNotFound)
	}
	return r.Samples(), nil
}

// ReportLatency records a latency the application in container id
// measured (the agent API calls it). It is attached to the container's
// samples while fresh (Config.AppLatencyTTL) and wakes subscribers at once,
// so a QoS loop can react before the next round. It returns an error
// wrapping ErrNotFound for a container the monitor has not sampled.
func (m *Monitor) ReportLatency(id string, l LatencySummary) error {
	if l.Measured.IsZero() {
		l.Measured = m.cfg.Now()
	}
	if l.Source == "" {
		l.Source = "app"
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.latest[id]
	if !ok {
		return fmt.Errorf("report latency of %s: %w", id, ErrNotFound)
	}
	m.appLat[id] = l
	// Make the report visible in the latest sample too (event-driven QoS).
	s.AppLatency = &l
	m.latest[id] = s
	m.notifyLocked()
	return nil
}

// Subscribe returns a channel that receives a value after every round and
// every ReportLatency (coalesced: a slow reader sees one pending value),
// and a function that cancels the subscription.
func (m *Monitor) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	m.mu.Lock()
	m.subs[ch] = struct{}{}
	m.mu.Unlock()
	return ch, func() {
		m.mu.Lock()
		delete(m.subs, ch)
		m.mu.Unlock()
	}
}

func (m *Monitor) notifyLocked() {
	for ch := range m.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
