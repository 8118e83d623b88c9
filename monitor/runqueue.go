package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/brimnode/brim/bpf"
	"github.com/prometheus/client_golang/prometheus"
)

// RunQueueReader gives cumulative per-cgroup scheduler statistics:
// *bpf.Monitor and *bpf.Fallback.
type RunQueueReader interface {
	Track(cgroupPath string) (uint64, error)
	Untrack(id uint64) error
	Read(dst map[uint64]bpf.CgroupStats) error
	Source() string
}

// RunQueueSource is a RunQueueReader its opener owns and closes.
type RunQueueSource interface {
	RunQueueReader
	Close() error
}

// SourceSchedstatMean is the LatencySummary.Source of run-queue latencies
// from the schedstat fallback: it has sums, not distributions, so P50, P99
// and P999 are all the mean wait of the interval.
const SourceSchedstatMean = bpf.SourceSchedstat + "-mean"

// OpenRunQueueSource returns the eBPF monitor loaded with opts or, when
// disableBPF is set or BPF cannot be used here, the schedstat fallback; the
// reason for falling back is logged (log may be nil). The caller closes the
// source. It fails only if neither can be opened; the error joins both
// causes (the BPF one wraps bpf.ErrNotSupported when BPF is unusable
// here). The agent's --no-bpf flag sets disableBPF; the fallback is then
// logged at Info, otherwise at Warn.
func OpenRunQueueSource(disableBPF bool, opts bpf.Options, log *slog.Logger) (RunQueueSource, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "monitor")
	var bpfErr error
	if disableBPF {
		bpfErr = errors.New("disabled by configuration")
	} else {
		m, err := bpf.Load(opts)
		if err == nil {
			log.Info("run-queue latency from eBPF", "source", m.Source())
			return m, nil
		}
		bpfErr = err
	}
	fb, err := bpf.NewFallback(opts.CgroupRoot)
	if err != nil {
		return nil, fmt.Errorf("open run-queue source: %w", errors.Join(bpfErr, err))
	}
	level := slog.LevelWarn
	if disableBPF {
		level = slog.LevelInfo
	}
	log.Log(context.Background(), level, "run-queue latency from schedstat (mean waits, no distribution)", "source", fb.Source(), "reason", bpfErr)
	return fb, nil
}

// RunQueueSignal is the SignalSource of run-queue latency and on-CPU time.
// Each round it tracks the cgroups (ContainerInfo.CgroupPath) of
// containers it has not seen, untracks those of containers gone, reads the
// cumulative counters and fills Statistics.RunQueue with the quantiles of
// the round's interval (from the second round a container is seen: the
// first has no interval), the cumulative histogram for Prometheus, and
// Statistics.OnCPU. With a reader without distributions (the schedstat
// fallback) P50, P99 and P999 are the interval's mean wait and Source says
// SourceSchedstatMean.
//
// Its metrics (Metrics) say which source is in use. Safe for concurrent
// use; it does not close the reader.
type RunQueueSignal struct {
	r      RunQueueReader
	source string // LatencySummary.Source
	hist   bool   // the reader gives distributions

	mu      sync.Mutex
	tracked map[string]trackedCgroup // container ID → cgroup
	cur     map[uint64]bpf.CgroupStats
	delta   map[uint64]bpf.CgroupStats
	iv      bpf.Interval
	seen    map[uint64]bool // ids present in the previous Read

	errs prometheus.Counter
}

type trackedCgroup struct {
	path string
	id   uint64
}

var (
	_ SignalSource         = (*RunQueueSignal)(nil)
	_ prometheus.Collector = runQueueMetrics{}

	descRQSource  = prometheus.NewDesc("brim_monitor_runqueue_source", "Run-queue latency source configured (1 for the source in use): ebpf or schedstat-mean.", []string{"source"}, nil)
	descRQTracked = prometheus.NewDesc("brim_monitor_runqueue_tracked", "Cgroups tracked by the run-queue latency source.", nil, nil)
)

// NewRunQueueSignal returns a signal source reading r (typically from
// OpenRunQueueSource).
func NewRunQueueSignal(r RunQueueReader) *RunQueueSignal {
	hist := r.Source() == bpf.SourceEBPF
	source := r.Source()
	if !hist {
		source = SourceSchedstatMean
	}
	return &RunQueueSignal{
		r:       r,
		source:  source,
		hist:    hist,
		tracked: map[string]trackedCgroup{},
		cur:     map[uint64]bpf.CgroupStats{},
		delta:   map[uint64]bpf.CgroupStats{},
		seen:    map[uint64]bool{},
		errs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "brim_monitor_runqueue_errors_total",
			Help: "Errors tracking, untracking or reading cgroups in the run-queue latency source.",
		}),
	}
}

// Source returns the LatencySummary.Source this signal reports.
func (s *RunQueueSignal) Source() string { return s.source }

// Collect implements SignalSource. Containers without a CgroupPath are
// skipped. A cgroup that cannot be tracked (gone already, no free slot:
// bpf.ErrFull) gets no RunQueue this round and is retried the next; the
// errors are joined into the returned error.
func (s *RunQueueSignal) Collect(_ context.Context, containers []ContainerInfo, stats map[string]*Statistics) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	live := make(map[string]bool, len(containers))
	for _, c := range containers {
		if c.CgroupPath == "" {
			continue
		}
		live[c.ID] = true
		if tc, ok := s.tracked[c.ID]; ok && tc.path == c.CgroupPath {
			continue
		}
		if err := s.untrackLocked(c.ID); err != nil {
			errs = append(errs, err)
		}
		id, err := s.r.Track(c.CgroupPath)
		if err != nil {
			errs = append(errs, fmt.Errorf("track container %s: %w", c.ID, err))
			continue
		}
		s.tracked[c.ID] = trackedCgroup{path: c.CgroupPath, id: id}
	}
	for cid := range s.tracked {
		if !live[cid] {
			if err := s.untrackLocked(cid); err != nil {
				errs = append(errs, err)
			}
		}
	}

	if err := s.r.Read(s.cur); err != nil {
		s.errs.Add(float64(len(errs) + 1))
		return errors.Join(append(errs, fmt.Errorf("read run-queue statistics: %w", err))...)
	}
	s.iv.Next(s.cur, s.delta)
	for cid, tc := range s.tracked {
		st := stats[cid]
		cum, ok := s.cur[tc.id]
		if st == nil || !ok {
			continue
		}
		st.OnCPU = cum.OnCPU
		if s.seen[tc.id] {
			st.RunQueue = s.summary(cum, s.delta[tc.id], st)
		}
	}
	clear(s.seen)
	for id := range s.cur {
		s.seen[id] = true
	}
	s.errs.Add(float64(len(errs)))
	return errors.Join(errs...)
}

// summary builds the interval's LatencySummary from the cumulative and
// interval statistics of one cgroup.
func (s *RunQueueSignal) summary(cum, d bpf.CgroupStats, st *Statistics) *LatencySummary {
	l := &LatencySummary{Source: s.source, Measured: st.Timestamp, Count: cum.Waits, Sum: cum.RunDelay}
	if !s.hist {
		mean := d.MeanRunDelay()
		l.P50, l.P99, l.P999 = mean, mean, mean
		return l
	}
	l.P50 = d.RunQueue.Quantile(0.5)
	l.P99 = d.RunQueue.Quantile(0.99)
	l.P999 = d.RunQueue.Quantile(0.999)
	l.Buckets = cum.RunQueue.CumulativeBuckets()
	l.Count = cum.RunQueue.Count()
	return l
}

func (s *RunQueueSignal) untrackLocked(cid string) error {
	tc, ok := s.tracked[cid]
	if !ok {
		return nil
	}
	delete(s.tracked, cid)
	delete(s.seen, tc.id)
	if err := s.r.Untrack(tc.id); err != nil && !errors.Is(err, bpf.ErrNotTracked) {
		return fmt.Errorf("untrack container %s: %w", cid, err)
	}
	return nil
}

// Tracked returns the number of cgroups tracked.
func (s *RunQueueSignal) Tracked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tracked)
}

// Metrics returns the collector of the signal's own metrics:
// brim_monitor_runqueue_source{source} (1 for the source in use, ebpf or
// schedstat-mean, whether or not any container is running),
// brim_monitor_runqueue_tracked and brim_monitor_runqueue_errors_total.
// The agent registers it next to NewCollector's.
func (s *RunQueueSignal) Metrics() prometheus.Collector { return runQueueMetrics{s} }

type runQueueMetrics struct{ s *RunQueueSignal }

func (m runQueueMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRQSource
	ch <- descRQTracked
	m.s.errs.Describe(ch)
}

func (m runQueueMetrics) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descRQSource, prometheus.GaugeValue, 1, m.s.source)
	ch <- prometheus.MustNewConstMetric(descRQTracked, prometheus.GaugeValue, float64(m.s.Tracked()))
	m.s.errs.Collect(ch)
}
