package monitor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/bpf"
	"github.com/brimnode/brim/isolator"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeRunQueue is a RunQueueReader whose cumulative counters the test sets.
type fakeRunQueue struct {
	source  string
	ids     map[string]uint64 // path → id
	tracked map[uint64]bool
	stats   map[uint64]bpf.CgroupStats
	full    bool
	readErr error
	tracks  int
}

func newFakeRunQueue(source string) *fakeRunQueue {
	return &fakeRunQueue{source: source, ids: map[string]uint64{}, tracked: map[uint64]bool{}, stats: map[uint64]bpf.CgroupStats{}}
}

func (f *fakeRunQueue) Track(path string) (uint64, error) {
	f.tracks++
	if f.full {
		return 0, fmt.Errorf("track %s: %w", path, bpf.ErrFull)
	}
	id, ok := f.ids[path]
	if !ok {
		id = uint64(len(f.ids) + 100)
		f.ids[path] = id
	}
	if !f.tracked[id] {
		f.tracked[id] = true
		f.stats[id] = bpf.CgroupStats{} // counters start at zero
	}
	return id, nil
}

func (f *fakeRunQueue) Untrack(id uint64) error {
	if !f.tracked[id] {
		return bpf.ErrNotTracked
	}
	delete(f.tracked, id)
	delete(f.stats, id)
	return nil
}

func (f *fakeRunQueue) Read(dst map[uint64]bpf.CgroupStats) error {
	if f.readErr != nil {
		return f.readErr
	}
	clear(dst)
	for id := range f.tracked {
		dst[id] = f.stats[id]
	}
	return nil
}

func (f *fakeRunQueue) Source() string { return f.source }

// wait adds n waits of d to path's cumulative counters (and its histogram
// when the fake has distributions).
func (f *fakeRunQueue) wait(path string, n int, d time.Duration) {
	id := f.ids[path]
	s := f.stats[id]
	s.Waits += uint64(n)
	s.Switches += uint64(n)
	s.RunDelay += time.Duration(n) * d
	s.OnCPU += time.Duration(n) * time.Millisecond
	if f.source == bpf.SourceEBPF {
		b := 0
		for ; b < bpf.Buckets-1 && time.Duration(1)<<(b+1) <= d; b++ {
		}
		s.RunQueue[b] += uint64(n)
	}
	f.stats[id] = s
}

func collect(t *testing.T, s *RunQueueSignal, infos []ContainerInfo) map[string]*Statistics {
	t.Helper()
	stats := map[string]*Statistics{}
	for _, c := range infos {
		stats[c.ID] = &Statistics{Statistics: isolator.Statistics{Timestamp: time.Unix(1000, 0)}}
	}
	if err := s.Collect(context.Background(), infos, stats); err != nil {
		t.Fatalf("collect: %v", err)
	}
	return stats
}

func TestRunQueueSignalEBPF(t *testing.T) {
	f := newFakeRunQueue(bpf.SourceEBPF)
	s := NewRunQueueSignal(f)
	infos := []ContainerInfo{{ID: "a", CgroupPath: "/brim/a"}, {ID: "b", CgroupPath: "/brim/b"}, {ID: "nocg"}}

	// First round: tracked, no interval yet.
	st := collect(t, s, infos)
	if st["a"].RunQueue != nil || st["b"].RunQueue != nil || s.Tracked() != 2 {
		t.Fatalf("first round: a %+v b %+v tracked %d", st["a"].RunQueue, st["b"].RunQueue, s.Tracked())
	}

	// Interval 1: a waits 10 µs mostly, with a 1% tail at 5 ms; b 100 µs.
	f.wait("/brim/a", 990, 10*time.Microsecond)
	f.wait("/brim/a", 10, 5*time.Millisecond)
	f.wait("/brim/b", 1000, 100*time.Microsecond)
	st = collect(t, s, infos)
	a, b := st["a"].RunQueue, st["b"].RunQueue
	if a == nil || b == nil || st["nocg"].RunQueue != nil {
		t.Fatalf("second round: a %+v b %+v nocg %+v", a, b, st["nocg"].RunQueue)
	}
	within2 := func(got, want time.Duration) bool { return got >= want/2 && got <= want*2 }
	if !within2(a.P50, 10*time.Microsecond) || !within2(a.P999, 5*time.Millisecond) || a.P99 < a.P50 || a.P99 > a.P999 {
		t.Errorf("a: p50 %v p99 %v p999 %v", a.P50, a.P99, a.P999)
	}
	if !within2(b.P99, 100*time.Microsecond) {
		t.Errorf("b: p99 %v", b.P99)
	}
	if a.Source != bpf.SourceEBPF || a.Count != 1000 || a.Sum != 990*10*time.Microsecond+10*5*time.Millisecond || a.Buckets == nil || !a.Measured.Equal(time.Unix(1000, 0)) {
		t.Errorf("a summary: %+v", a)
	}
	if st["a"].OnCPU != time.Second {
		t.Errorf("a on-cpu %v, want 1s", st["a"].OnCPU)
	}

	// Interval 2 holds only what happened in it: b's tail is gone.
	f.wait("/brim/b", 100, 2*time.Millisecond)
	st = collect(t, s, infos)
	if a := st["a"].RunQueue; a.P99 != 0 || a.Count != 1000 {
		t.Errorf("idle a: %+v", a)
	}
	if b := st["b"].RunQueue; !within2(b.P50, 2*time.Millisecond) || b.Count != 1100 {
		t.Errorf("b interval 2: %+v", b)
	}

	// b goes away: untracked; a stays.
	st = collect(t, s, infos[:1])
	if s.Tracked() != 1 || f.tracked[f.ids["/brim/b"]] {
		t.Fatalf("b not untracked: tracked %d", s.Tracked())
	}
	if st["a"].RunQueue == nil {
		t.Fatal("a lost its summary")
	}
}

func TestRunQueueSignalSchedstat(t *testing.T) {
	f := newFakeRunQueue(bpf.SourceSchedstat)
	s := NewRunQueueSignal(f)
	infos := []ContainerInfo{{ID: "a", CgroupPath: "/brim/a"}}
	collect(t, s, infos)
	f.wait("/brim/a", 10, 100*time.Microsecond)
	f.wait("/brim/a", 10, 300*time.Microsecond)
	a := collect(t, s, infos)["a"].RunQueue
	if a == nil || a.Source != SourceSchedstatMean || a.P50 != 200*time.Microsecond || a.P99 != a.P50 || a.P999 != a.P50 {
		t.Fatalf("schedstat summary: %+v", a)
	}
	if a.Buckets != nil || a.Count != 20 {
		t.Fatalf("schedstat has no distribution, got buckets %v count %d", a.Buckets, a.Count)
	}
}

func TestRunQueueSignalErrors(t *testing.T) {
	f := newFakeRunQueue(bpf.SourceEBPF)
	s := NewRunQueueSignal(f)
	infos := []ContainerInfo{{ID: "a", CgroupPath: "/brim/a"}}
	f.full = true
	stats := map[string]*Statistics{"a": {}}
	if err := s.Collect(context.Background(), infos, stats); !errors.Is(err, bpf.ErrFull) {
		t.Fatalf("collect with no free slot: %v", err)
	}
	if stats["a"].RunQueue != nil || s.Tracked() != 0 {
		t.Fatal("untracked container got a summary")
	}
	f.full = false // retried next round
	collect(t, s, infos)
	if s.Tracked() != 1 || f.tracks != 2 {
		t.Fatalf("not retried: tracked %d, %d track calls", s.Tracked(), f.tracks)
	}
	f.readErr = bpf.ErrClosed
	if err := s.Collect(context.Background(), infos, map[string]*Statistics{"a": {}}); !errors.Is(err, bpf.ErrClosed) {
		t.Fatalf("collect with a failing read: %v", err)
	}
	if got := testutil.ToFloat64(s.errs); got != 2 {
		t.Fatalf("errors counted %v, want 2", got)
	}
}

// TestRunQueueSignalMonitor runs the signal inside a Monitor and checks the
// exported series.
func TestRunQueueSignalMonitor(t *testing.T) {
	f := newFakeRunQueue(bpf.SourceEBPF)
	sig := NewRunQueueSignal(f)
	src := newFakeSource(2)
	m := New(src, Config{Host: NoHost, Signals: []SignalSource{sig}}, nil)
	ctx := context.Background()
	if err := m.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range src.infos {
		f.wait(c.CgroupPath, 50, 40*time.Microsecond)
	}
	if err := m.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range m.Usage().Containers {
		if rq := c.Latest.RunQueue; rq == nil || rq.P99 == 0 || rq.Source != bpf.SourceEBPF {
			t.Fatalf("%s: run queue %+v", c.ID, rq)
		}
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(m), sig.Metrics())
	want := `
# HELP brim_monitor_runqueue_source Run-queue latency source configured (1 for the source in use): ebpf or schedstat-mean.
# TYPE brim_monitor_runqueue_source gauge
brim_monitor_runqueue_source{source="ebpf"} 1
# HELP brim_monitor_runqueue_tracked Cgroups tracked by the run-queue latency source.
# TYPE brim_monitor_runqueue_tracked gauge
brim_monitor_runqueue_tracked 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "brim_monitor_runqueue_source", "brim_monitor_runqueue_tracked"); err != nil {
		t.Fatal(err)
	}
	n, err := testutil.GatherAndCount(reg, "brim_runqueue_latency_seconds")
	if err != nil || n != 2 {
		t.Fatalf("run-queue histograms: %d, %v", n, err)
	}
}
