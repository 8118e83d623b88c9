package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/isolator/cgroups"
	"github.com/brimnode/brim/monitor"
	"github.com/brimnode/brim/pressure"
	"github.com/brimnode/brim/qos"
)

// fullScope is a ScopeReader whose parent is at 95 % of its limit.
type fullScope struct{}

func (fullScope) ParentMemory() (cgroups.ScopeMemory, error) {
	return cgroups.ScopeMemory{Used: 950 << 20, Limit: 1000 << 20}, nil
}

// TestMemoryGuardEvictsThroughAgent: the memory guard the agent runs ends
// a revocable container through the agent, so its exit carries
// CONTAINER_PREEMPTED and the "evicted: memory pressure" message that the
// task runner puts on the task status; the non-revocable container stays.
func TestMemoryGuardEvictsThroughAgent(t *testing.T) {
	ctx := context.Background()
	a, err := New(Options{
		StateDir: t.TempDir(), Runtime: newFakeRuntime(t.TempDir()),
		Resources: Resources{MilliCPUs: 2000, MemMiB: 1000}, CgroupParent: "/brim",
		Oversub: &Oversub{
			Host: monitor.NoHost, Estimator: fixed(t, "cpus:1;mem:500"), EstimatorName: "fixed",
			MonitorInterval: time.Hour, EstimatorInterval: time.Hour, QoSInterval: time.Hour,
			MemoryGuard: &pressure.MemoryConfig{Interval: 20 * time.Millisecond}, MemoryScope: fullScope{},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if err := a.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	a.over.start(a) // the first estimate; the guard starts
	lc, err := a.Launch(ctx, Spec{Command: []string{"x"}, Resources: Resources{MilliCPUs: 500, MemMiB: 100}})
	if err != nil {
		t.Fatal(err)
	}
	be, err := a.Launch(ctx, Spec{Command: []string{"x"}, Resources: Resources{MilliCPUs: 500, MemMiB: 100}, Revocable: true})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	got, err := a.Wait(wctx, be.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Exit == nil || got.Exit.Reason != qos.ReasonPreempted || !strings.HasPrefix(got.Exit.Message, "evicted: memory pressure") {
		t.Fatalf("evicted container's exit = %+v", got.Exit)
	}
	if c, _ := a.Get(lc.ID); c.State != StateRunning {
		t.Fatalf("non-revocable container %+v", c)
	}
	// The guard records the eviction once Evict returns, which may be just
	// after the container's exit reached Wait.
	var st Oversubscription
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, _ = a.Oversubscription()
		if len(st.Evictions) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(st.Evictions) == 0 || st.Evictions[0].ContainerID != be.ID {
		t.Fatalf("status evictions %+v", st.Evictions)
	}
}
