package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/monitor"
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

	// The Stats RPC carries them.
	st, err := (&server{a: a}).Stats(ctx, &agentpb.StatsRequest{Id: c.ID})
	if err != nil {
		t.Fatal(err)
	}
	if !st.HasRunqueue || st.RunqueueSource != "ebpf" || st.RunqueueP50Nanos != int64(time.Millisecond) ||
		st.RunqueueP99Nanos != int64(2*time.Millisecond) || st.RunqueueP999Nanos != int64(3*time.Millisecond) ||
		!st.HasOnCpu || st.OnCpuNanos != int64(5*time.Second) || st.MonitorSampleUnixNano != sig.Sampled.UnixNano() {
		t.Fatalf("Stats = %+v", st)
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
	st, err = (&server{a: plain}).Stats(ctx, &agentpb.StatsRequest{Id: "lc"})
	if err != nil {
		t.Fatal(err)
	}
	if st.HasRunqueue || st.HasOnCpu || st.MonitorSampleUnixNano != 0 {
		t.Fatalf("Stats without a monitor = %+v", st)
	}
}
