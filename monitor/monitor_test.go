package monitor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/errdefs"
	"github.com/brimnode/brim/isolator"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeSource is a Source over synthetic containers (named as a fake: it
// reaches 100 containers without creating them).
type fakeSource struct {
	mu    sync.Mutex
	infos []ContainerInfo
	stats map[string]isolator.Statistics
	gone  map[string]bool
	fail  map[string]error
}

func newFakeSource(n int) *fakeSource {
	f := &fakeSource{stats: map[string]isolator.Statistics{}, gone: map[string]bool{}, fail: map[string]error{}}
	for i := range n {
		id := fmt.Sprintf("c%03d", i)
		f.infos = append(f.infos, ContainerInfo{ID: id, Name: "task-" + id, CgroupPath: "/brim/" + id,
			Limits: isolator.Limits{MilliCPUs: 500, MemoryBytes: 64 << 20}, Revocable: i%2 == 1})
		f.stats[id] = isolator.Statistics{HasCPU: true, CPUUsageNanos: uint64(i) * 1e9, CPUPeriods: 100, CPUThrottled: 5,
			CPUThrottledTime: 50 * time.Millisecond, HasMemory: true, MemUsageBytes: 10 << 20, MemWorkingSet: 8 << 20,
			MemLimitBytes: 64 << 20, HasPids: true, Pids: 3}
	}
	return f
}

func (f *fakeSource) Containers(context.Context) ([]ContainerInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ContainerInfo(nil), f.infos...), nil
}

func (f *fakeSource) Usage(_ context.Context, id string) (*isolator.Statistics, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone[id] {
		return nil, fmt.Errorf("usage %s: %w", id, isolator.ErrNotFound)
	}
	if err := f.fail[id]; err != nil {
		return nil, err
	}
	s := f.stats[id]
	s.CPUUsageNanos += 1e8
	f.stats[id] = s
	return &s, nil
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

type rqSignal struct{}

func (rqSignal) Collect(_ context.Context, infos []ContainerInfo, stats map[string]*Statistics) error {
	if len(infos) != len(stats) {
		return errors.New("containers and stats differ")
	}
	for _, s := range stats {
		s.RunQueue = &LatencySummary{P50: time.Millisecond, P99: 5 * time.Millisecond, P999: 9 * time.Millisecond, Source: "ebpf",
			Buckets: map[float64]uint64{0.001: 3, 0.01: 9}, Count: 10, Sum: 40 * time.Millisecond}
	}
	return nil
}

func TestSample(t *testing.T) {
	src := newFakeSource(3)
	clk := &fakeClock{t: time.Unix(1000, 0)}
	m := New(src, Config{HistorySize: 4, Host: NoHost, Now: clk.now, Total: Capacity{MilliCPUs: 2000}}, nil)
	m.AddSignalSource(rqSignal{})
	ctx := context.Background()
	notify, cancel := m.Subscribe()
	defer cancel()

	for range 6 {
		clk.t = clk.t.Add(time.Second)
		if err := m.Sample(ctx); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-notify:
	default:
		t.Fatal("no notification after a round")
	}
	u := m.Usage()
	if len(u.Containers) != 3 || u.Total.MilliCPUs != 2000 {
		t.Fatalf("usage = %d containers, total %+v", len(u.Containers), u.Total)
	}
	c := u.Container("c001")
	if c == nil || !c.Revocable || c.Latest.RunQueue == nil || c.Latest.RunQueue.Source != "ebpf" {
		t.Fatalf("c001 = %+v", c)
	}
	h := c.History.Samples()
	if len(h) != 4 {
		t.Fatalf("history len = %d, want ring capacity 4", len(h))
	}
	for i := 1; i < len(h); i++ {
		r, ok := CPURate(&h[i-1], &h[i])
		if !ok || r < 0.099 || r > 0.101 {
			t.Fatalf("cpu rate %d = %v %v, want 0.1", i, r, ok)
		}
	}

	// A container that disappears is skipped silently and forgotten; one
	// that fails is reported.
	src.gone["c000"] = true
	boom := errors.New("boom")
	src.fail["c002"] = boom
	clk.t = clk.t.Add(time.Second)
	err := m.Sample(ctx)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	u = m.Usage()
	if len(u.Containers) != 1 || u.Containers[0].ID != "c001" {
		t.Fatalf("after gone/fail: %+v", u.Containers)
	}
	if _, err := m.History("c000"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("history of gone container: %v", err)
	}

	// The agent (the real Source) says a container removed since the
	// listing is not found with its own sentinel, internal/errdefs's: it
	// is skipped too, not counted as a failed sample.
	src.fail["c002"] = fmt.Errorf("stats c002: %w", errdefs.ErrContainerNotFound)
	clk.t = clk.t.Add(time.Second)
	if err := m.Sample(ctx); err != nil {
		t.Fatalf("sample with a container removed since the listing: %v", err)
	}
}

func TestReportLatency(t *testing.T) {
	src := newFakeSource(1)
	clk := &fakeClock{t: time.Unix(1000, 0)}
	m := New(src, Config{Host: NoHost, Now: clk.now, Interval: time.Second}, nil)
	ctx := context.Background()
	if err := m.ReportLatency("c000", LatencySummary{P99: time.Millisecond}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("report before first sample: %v", err)
	}
	if err := m.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	notify, cancel := m.Subscribe()
	defer cancel()
	if err := m.ReportLatency("c000", LatencySummary{P99: 7 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-notify:
	default:
		t.Fatal("ReportLatency did not notify")
	}
	if al := m.Usage().Containers[0].Latest.AppLatency; al == nil || al.P99 != 7*time.Millisecond || al.Source != "app" {
		t.Fatalf("latest app latency = %+v", al)
	}
	clk.t = clk.t.Add(time.Second)
	_ = m.Sample(ctx)
	if m.Usage().Containers[0].Latest.AppLatency == nil {
		t.Fatal("fresh report not attached to the next sample")
	}
	clk.t = clk.t.Add(5 * time.Second) // beyond the 3 s TTL
	_ = m.Sample(ctx)
	if al := m.Usage().Containers[0].Latest.AppLatency; al != nil {
		t.Fatalf("stale report still attached: %+v", al)
	}
}

func TestRing(t *testing.T) {
	for _, tc := range []struct{ capacity, pushes, want int }{
		{1, 0, 0}, {1, 3, 1}, {5, 3, 3}, {5, 5, 5}, {5, 12, 5}, {0, 2, 1},
	} {
		r := NewRing(tc.capacity)
		for i := range tc.pushes {
			r.Push(Statistics{Statistics: isolator.Statistics{CPUUsageNanos: uint64(i)}})
		}
		got := r.Samples()
		if len(got) != tc.want || r.Len() != tc.want {
			t.Fatalf("cap %d pushes %d: len %d, want %d", tc.capacity, tc.pushes, len(got), tc.want)
		}
		for i, s := range got { // oldest first, the newest pushes
			if want := uint64(tc.pushes - tc.want + i); s.CPUUsageNanos != want {
				t.Fatalf("cap %d pushes %d: sample %d = %d, want %d", tc.capacity, tc.pushes, i, s.CPUUsageNanos, want)
			}
		}
		if l, ok := r.Latest(); ok != (tc.want > 0) || (ok && l.CPUUsageNanos != uint64(tc.pushes-1)) {
			t.Fatalf("latest = %v %v", l.CPUUsageNanos, ok)
		}
		if last2 := r.Last(2); len(last2) != min(2, tc.want) {
			t.Fatalf("Last(2) len %d", len(last2))
		}
		if r.MemoryBytes() != r.Cap()*SampleSize {
			t.Fatal("memory cost")
		}
	}
	// The documented cost: 300 slots stay under 200 KiB per container.
	if c := NewRing(300).MemoryBytes(); c > 200<<10 {
		t.Fatalf("ring of 300 costs %d bytes; update the doc in ring.go", c)
	}
	t.Logf("sample slot %d bytes, 300-slot ring %d KiB", SampleSize, NewRing(300).MemoryBytes()>>10)
}

func TestThrottledFraction(t *testing.T) {
	mk := func(p, thr uint64) *Statistics {
		return &Statistics{Statistics: isolator.Statistics{HasCPU: true, CPUPeriods: p, CPUThrottled: thr}}
	}
	for _, tc := range []struct {
		a, b *Statistics
		want float64
		ok   bool
	}{
		{mk(100, 10), mk(200, 60), 0.5, true},
		{mk(100, 10), mk(100, 10), 0, false},
		{mk(100, 10), mk(50, 10), 0, false},
		{&Statistics{}, mk(200, 60), 0, false},
	} {
		got, ok := ThrottledFraction(tc.a, tc.b)
		if got != tc.want || ok != tc.ok {
			t.Fatalf("ThrottledFraction = %v %v, want %v %v", got, ok, tc.want, tc.ok)
		}
	}
}

func TestCollector(t *testing.T) {
	src := newFakeSource(2)
	m := New(src, Config{Host: NoHost}, nil)
	m.AddSignalSource(rqSignal{})
	if err := m.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := NewCollector(m)
	if err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP container_cpu_cfs_throttled_periods_total Number of throttled period intervals.
# TYPE container_cpu_cfs_throttled_periods_total counter
container_cpu_cfs_throttled_periods_total{brim_revocable="false",id="/brim/c000",name="task-c000"} 5
container_cpu_cfs_throttled_periods_total{brim_revocable="true",id="/brim/c001",name="task-c001"} 5
# HELP container_memory_working_set_bytes Current working set in bytes.
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{brim_revocable="false",id="/brim/c000",name="task-c000"} 8.388608e+06
container_memory_working_set_bytes{brim_revocable="true",id="/brim/c001",name="task-c001"} 8.388608e+06
# HELP container_cpu_usage_seconds_total Cumulative cpu time consumed in seconds.
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{brim_revocable="false",cpu="total",id="/brim/c000",name="task-c000"} 0.1
container_cpu_usage_seconds_total{brim_revocable="true",cpu="total",id="/brim/c001",name="task-c001"} 1.1
# HELP brim_monitor_source Run-queue latency sources in use (1 per source).
# TYPE brim_monitor_source gauge
brim_monitor_source{source="ebpf"} 1
# HELP brim_monitor_samples_total Sampling rounds completed by the monitor.
# TYPE brim_monitor_samples_total counter
brim_monitor_samples_total 1
`), "container_cpu_cfs_throttled_periods_total", "container_memory_working_set_bytes",
		"container_cpu_usage_seconds_total", "brim_monitor_source", "brim_monitor_samples_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c, "brim_runqueue_latency_seconds"); n != 2 {
		t.Fatalf("run-queue histograms = %d, want one per container", n)
	}
	// The registry lints clean and carries the agent's own usage.
	reg := NewRegistry(m)
	if n, err := testutil.GatherAndCount(reg, "brim_agent_cpu_seconds_total", "brim_agent_memory_bytes"); err != nil || n != 3 {
		t.Fatalf("agent self metrics: %d %v", n, err)
	}
	probs, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range probs {
		// cAdvisor's own names (container_memory_rss, …) break the unit
		// suffix rule; they are kept for compatibility.
		if !strings.HasPrefix(p.Metric, "container_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}

func TestHostSampler(t *testing.T) {
	h := NewHostSampler()
	ctx := context.Background()
	if _, err := h.Host(ctx); err != nil {
		t.Fatal(err)
	}
	hs, err := h.Host(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if hs.NumCPU < 1 || hs.MemTotalBytes == 0 || hs.CPUBusyFraction < 0 || hs.CPUBusyFraction > 1 {
		t.Fatalf("host = %+v", hs)
	}
}

// BenchmarkSample100 measures one sampling round over 100 fake containers
// (the monitor's own cost, without the cgroup reads of a real Source).
func BenchmarkSample100(b *testing.B) {
	m := New(newFakeSource(100), Config{Host: NoHost}, nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Sample(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100, "ns/container")
}

// BenchmarkHost measures one gopsutil host sample.
func BenchmarkHost(b *testing.B) {
	h := NewHostSampler()
	ctx := context.Background()
	for b.Loop() {
		if _, err := h.Host(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
