package agent

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/brimnode/brim/monitor"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeSched is a run-queue signal source giving every container fixed
// figures.
type fakeSched struct{}

func (fakeSched) Collect(_ context.Context, cs []monitor.ContainerInfo, stats map[string]*monitor.Statistics) error {
	for _, c := range cs {
		st := stats[c.ID]
		if st == nil {
			continue
		}
		st.OnCPU = 5 * time.Second
		st.RunQueue = &monitor.LatencySummary{P50: time.Millisecond, P99: 2 * time.Millisecond, P999: 3 * time.Millisecond,
			Source: "ebpf", Measured: st.Timestamp}
	}
	return nil
}

func TestSchedSignals(t *testing.T) {
	ctx := context.Background()
	a, err := New(Options{
		StateDir: t.TempDir(), Runtime: newFakeRuntime(t.TempDir()),
		Resources: Resources{MilliCPUs: 2000, MemMiB: 1000}, CgroupParent: "/brim",
		Oversub: &Oversub{
			Host: monitor.NoHost, Signals: []monitor.SignalSource{fakeSched{}},
			MonitorInterval: time.Hour, EstimatorInterval: time.Hour, QoSInterval: time.Hour,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := a.Launch(ctx, Spec{Name: "lc", Command: []string{"x"}, Resources: Resources{MilliCPUs: 100, MemMiB: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.over.mon.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	sig, err := a.SchedSignals("lc")
	if err != nil {
		t.Fatal(err)
	}
	if sig.RunQueue == nil || sig.RunQueue.P99 != 2*time.Millisecond || !sig.HasOnCPU || sig.OnCPU != 5*time.Second || sig.Sampled.IsZero() {
		t.Fatalf("SchedSignals = %+v", sig)
	}

	// The Stats RPC carries them (agentserver's TestStatsCarriesSchedSignals).
	if _, err := a.SchedSignals(c.ID); err != nil {
		t.Fatal(err)
	}

	if _, err := a.SchedSignals("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown container: %v", err)
	}

	// Without oversubscription there is no monitor: the RPC still answers,
	// without the fields.
	plain, err := New(Options{StateDir: t.TempDir(), Runtime: newFakeRuntime(t.TempDir()), Resources: Resources{MilliCPUs: 1000, MemMiB: 100}})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.Launch(ctx, Spec{Name: "lc", Command: []string{"x"}, Resources: Resources{MilliCPUs: 100, MemMiB: 10}}); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.SchedSignals("lc"); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("without oversubscription: %v", err)
	}
}

// fakeOOM hands out queued events, then blocks until ctx ends or it is
// closed.
type fakeOOM struct {
	ch     chan OOMEvent
	closed chan struct{}
}

func (f *fakeOOM) ReadOOM(ctx context.Context) (OOMEvent, error) {
	select {
	case ev := <-f.ch:
		return ev, nil
	case <-f.closed:
		return OOMEvent{}, io.EOF
	case <-ctx.Done():
		return OOMEvent{}, ctx.Err()
	}
}

func TestOOMWatcher(t *testing.T) {
	ctx := context.Background()
	a, err := New(Options{StateDir: t.TempDir(), Runtime: newFakeRuntime(t.TempDir()),
		Resources: Resources{MilliCPUs: 1000, MemMiB: 100}, CgroupParent: "/brim-x"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var ids []string
	for _, n := range []string{"hog", "sib"} {
		c, err := a.Launch(ctx, Spec{Name: n, Command: []string{"x"}, Resources: Resources{MilliCPUs: 100, MemMiB: 10}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	// Cgroup ids: memory 100+i, cpu 200+i for the i-th container.
	resolve := func(p string) ([]uint64, error) {
		for i, id := range ids {
			if p == "/brim-x/"+id {
				return []uint64{uint64(100 + i), uint64(200 + i)}, nil
			}
		}
		return nil, errors.New("no such cgroup")
	}
	r := &fakeOOM{ch: make(chan OOMEvent, 4), closed: make(chan struct{})}
	w := NewOOMWatcher(a, r, resolve, time.Hour, nil)
	r.ch <- OOMEvent{MemCgroupID: 100, CgroupID: 200, Pid: 42, Comm: "tail"} // hog, by its memory cgroup
	r.ch <- OOMEvent{MemCgroupID: 7, CgroupID: 8, Pid: 43, Comm: "other"}    // not a container
	r.ch <- OOMEvent{CgroupID: 200, Pid: 44, Comm: "tail2"}                  // hog, by its cpu cgroup
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	// Run returns nil once the reader is closed; close it after the
	// events were consumed.
	for len(r.ch) > 0 {
		time.Sleep(10 * time.Millisecond)
	}
	close(r.closed)
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	k, ok := w.Last("hog")
	if !ok || k.ContainerID != ids[0] || k.ContainerName != "hog" || k.Pid != 44 || k.Comm != "tail2" {
		t.Fatalf("Last(hog) = %+v, %v", k, ok)
	}
	if k, ok := w.Last("sib"); ok {
		t.Fatalf("sibling charged with an OOM kill: %+v", k)
	}
	if got := testutil.ToFloat64(w.counts.WithLabelValues("true")); got != 2 {
		t.Fatalf("attributed kills = %v, want 2", got)
	}
	if got := testutil.ToFloat64(w.counts.WithLabelValues("false")); got != 1 {
		t.Fatalf("unattributed kills = %v, want 1", got)
	}

	// ctx's end ends Run. (A reader still closed would end it as well,
	// whichever the select picked: open it again.)
	r.closed = make(chan struct{})
	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- w.Run(cctx) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after cancel: %v", err)
	}
}
