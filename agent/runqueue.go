package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/brimnode/brim/monitor"
	"github.com/prometheus/client_golang/prometheus"
)

// SchedSignals are the scheduler signals the monitor's latest round holds
// for one container: its run-queue latency over the round's interval and
// its cumulative on-cpu time (from the run-queue source the agent was
// configured with: the eBPF monitor, or the schedstat fallback).
type SchedSignals struct {
	// Sampled is when the monitor's latest sample of the container was
	// taken (OnCPU is as of then).
	Sampled time.Time
	// RunQueue is the run-queue latency over the latest interval; nil
	// before the container was sampled twice or without a run-queue
	// source. Its Source says who measured it ("ebpf", "schedstat-mean").
	RunQueue *monitor.LatencySummary
	// OnCPU is the container's cumulative on-cpu time; HasOnCPU is false
	// when the source did not measure it (yet).
	OnCPU    time.Duration
	HasOnCPU bool
	// CPUUsageNanos is the cumulative cpu usage (cpuacct) the cgroups
	// isolator read in the same sample: OnCPU and it are comparable.
	CPUUsageNanos uint64
}

// SchedSignals returns the scheduler signals of container ref from the
// monitor's latest round (it does not sample). Errors wrap ErrNotFound,
// ErrNotSupported (the agent runs without oversubscription, so without a
// monitor) or monitor.ErrNotFound (not sampled yet: launched since the
// last round).
func (a *Agent) SchedSignals(ref string) (SchedSignals, error) {
	c, err := a.Get(ref)
	if err != nil {
		return SchedSignals{}, fmt.Errorf("scheduler signals: %w", err)
	}
	if a.over == nil {
		return SchedSignals{}, fmt.Errorf("scheduler signals of %s: %w: the agent runs without a monitor", c.ID, ErrNotSupported)
	}
	u := a.over.mon.Usage()
	cu := u.Container(c.ID)
	if cu == nil || cu.Latest.Timestamp.IsZero() {
		return SchedSignals{}, fmt.Errorf("scheduler signals of %s: %w", c.ID, monitor.ErrNotFound)
	}
	last := cu.Latest
	s := SchedSignals{Sampled: last.Timestamp, RunQueue: last.RunQueue, OnCPU: last.OnCPU, CPUUsageNanos: last.CPUUsageNanos}
	// The schedstat fallback measures on-cpu time too (it fills OnCPU
	// from the same cumulative counters); zero means none was read.
	s.HasOnCPU = last.OnCPU > 0 || last.RunQueue != nil
	return s, nil
}

// OOMReader reads the kernel's OOM kill events (the eBPF monitor's, which
// agentd adapts). ReadOOM blocks until an event, ctx's end or the
// reader's close (io.EOF).
type OOMReader interface {
	ReadOOM(ctx context.Context) (OOMEvent, error)
}

// OOMEvent is an OOM kill the kernel reported: the victim and the cgroups
// it was in, by their kernel ids.
type OOMEvent struct {
	// CgroupID is the victim's cgroup in the hierarchy the run-queue
	// monitor keys by (cpu on v1, unified on v2); MemCgroupID its memory
	// cgroup (equal to CgroupID on v2). 0: unknown.
	CgroupID, MemCgroupID uint64
	// Pid and Comm are the victim process.
	Pid  int
	Comm string
	// Time is when the kernel marked the victim.
	Time time.Time
}

// CgroupIDsFunc returns the kernel ids of the cgroup at path (absolute,
// relative to the hierarchy roots, e.g. "/brim/<id>") that an OOM event
// may name: its directory's id in the memory and cpu hierarchies on
// cgroup v1, the unified one on v2 (the directories' inode numbers).
type CgroupIDsFunc func(path string) ([]uint64, error)

// OOMKill is an OOM kill the kernel reported, attributed to a container.
type OOMKill struct {
	ContainerID, ContainerName string
	// Pid and Comm are the victim process the kernel chose.
	Pid  int
	Comm string
	// Time is when the kernel marked the victim.
	Time time.Time
}

// OOMWatcher attributes the kernel's OOM kill events (the eBPF monitor's)
// to the agent's containers through their cgroups' ids, logs each and
// keeps the latest per container. It learns the ids of new containers
// every refresh interval and on an event it cannot attribute, so that a
// container whose cgroup is gone by the time the event is read is still
// known. It is a prometheus.Collector: brim_oom_kills_total{attributed}.
type OOMWatcher struct {
	a        *Agent
	r        OOMReader
	ids      CgroupIDsFunc
	interval time.Duration
	log      *slog.Logger

	mu     sync.Mutex
	byID   map[uint64]string  // cgroup id → container ID
	known  map[string]bool    // container IDs whose ids are in byID
	last   map[string]OOMKill // container ID → its latest OOM kill
	counts *prometheus.CounterVec
}

var _ prometheus.Collector = (*OOMWatcher)(nil)

// NewOOMWatcher returns a watcher of r's events for a's containers; ids
// resolves their cgroups (the agent itself never reads cgroupfs).
// refresh is how often new containers' ids are learned (default 1 s); log
// may be nil.
func NewOOMWatcher(a *Agent, r OOMReader, ids CgroupIDsFunc, refresh time.Duration, log *slog.Logger) *OOMWatcher {
	if refresh <= 0 {
		refresh = time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &OOMWatcher{
		a: a, r: r, ids: ids, interval: refresh, log: log.With("component", "oom"),
		byID: map[uint64]string{}, known: map[string]bool{}, last: map[string]OOMKill{},
		counts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brim_oom_kills_total",
			Help: "OOM kills the kernel reported, by whether they were attributed to one of the agent's containers.",
		}, []string{"attributed"}),
	}
}

// Run reads and attributes events until ctx ends (it returns ctx.Err())
// or the reader is closed (it returns nil). Other read errors end it.
func (w *OOMWatcher) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(w.interval)
		defer t.Stop()
		for {
			w.refresh()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	for {
		ev, err := w.r.ReadOOM(ctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return fmt.Errorf("watch oom kills: %w", err)
		}
		w.handle(ev)
	}
}

// handle attributes one event.
func (w *OOMWatcher) handle(ev OOMEvent) {
	cid, ok := w.lookup(ev)
	if !ok {
		w.refresh()
		cid, ok = w.lookup(ev)
	}
	if !ok {
		w.counts.WithLabelValues("false").Inc()
		w.log.Debug("oom kill outside the agent's containers", "pid", ev.Pid, "comm", ev.Comm,
			"cgroup_id", ev.CgroupID, "mem_cgroup_id", ev.MemCgroupID)
		return
	}
	k := OOMKill{ContainerID: cid, Pid: ev.Pid, Comm: ev.Comm, Time: ev.Time}
	if c, err := w.a.Get(cid); err == nil {
		k.ContainerName = c.Name
	}
	w.mu.Lock()
	w.last[cid] = k
	w.mu.Unlock()
	w.counts.WithLabelValues("true").Inc()
	w.log.Warn("oom kill in container", "id", cid, "name", k.ContainerName, "pid", ev.Pid, "comm", ev.Comm)
}

func (w *OOMWatcher) lookup(ev OOMEvent) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cid, ok := w.byID[ev.MemCgroupID]; ok && ev.MemCgroupID != 0 {
		return cid, true
	}
	cid, ok := w.byID[ev.CgroupID]
	return cid, ok && ev.CgroupID != 0
}

// refresh learns the ids of containers not known yet and forgets those of
// containers removed from the agent.
func (w *OOMWatcher) refresh() {
	parent := w.a.opts.CgroupParent
	if parent == "" {
		return
	}
	cs := w.a.List()
	live := make(map[string]bool, len(cs))
	var todo []*Container
	w.mu.Lock()
	for _, c := range cs {
		live[c.ID] = true
		if !w.known[c.ID] {
			todo = append(todo, c)
		}
	}
	w.mu.Unlock()
	learned := map[string][]uint64{}
	for _, c := range todo {
		ids, err := w.ids(w.a.cgroupOf(c))
		if err != nil {
			w.log.Debug("cgroup ids of container", "id", c.ID, "err", err)
			if c.State == StateRunning {
				continue // retried at the next refresh
			}
			// An exited container's cgroup is gone for good.
		}
		learned[c.ID] = ids
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for cid, ids := range learned {
		for _, id := range ids {
			w.byID[id] = cid
		}
		w.known[cid] = true
	}
	for id, cid := range w.byID {
		if !live[cid] {
			delete(w.byID, id)
			delete(w.known, cid)
			delete(w.last, cid)
		}
	}
}

// Last returns the latest OOM kill attributed to container ref (by ID or
// name), ok false when there was none (or the container is unknown).
func (w *OOMWatcher) Last(ref string) (k OOMKill, ok bool) {
	c, err := w.a.Get(ref)
	if err != nil {
		return OOMKill{}, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	k, ok = w.last[c.ID]
	return k, ok
}

// Describe implements prometheus.Collector.
func (w *OOMWatcher) Describe(ch chan<- *prometheus.Desc) { w.counts.Describe(ch) }

// Collect implements prometheus.Collector.
func (w *OOMWatcher) Collect(ch chan<- prometheus.Metric) { w.counts.Collect(ch) }
