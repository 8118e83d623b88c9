package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/isolator/cgroups"
	"github.com/brimnode/brim/monitor"
	"github.com/brimnode/brim/pressure"
)

// fullScope is a ScopeReader whose parent is at 95 % of its limit.
type fullScope struct{}

func (fullScope) ParentMemory() (cgroups.ScopeMemory, error) {
	return cgroups.ScopeMemory{Used: 950 << 20, Limit: 1000 << 20}, nil
}

// newGuardedAgent is a recovered agent on rt whose memory guard sees its
// scope always under pressure (fullScope); its loops start with
// a.over.start.
func newGuardedAgent(t *testing.T, rt *fakeRuntime) *Agent {
	t.Helper()
	a, err := New(Options{
		StateDir: t.TempDir(), Runtime: rt,
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
	if err := a.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestMemoryGuardEvictsThroughAgent: the memory guard the agent runs ends
// a revocable container through the agent, so its exit carries
// CONTAINER_PREEMPTED and the "evicted: memory pressure" message that the
// task runner puts on the task status; the non-revocable container stays.
func TestMemoryGuardEvictsThroughAgent(t *testing.T) {
	ctx := context.Background()
	a := newGuardedAgent(t, newFakeRuntime(t.TempDir()))
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
	if got.Exit == nil || got.Exit.Reason != ReasonPreempted || !strings.HasPrefix(got.Exit.Message, "evicted: memory pressure") {
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

// TestMemoryGuardGoesOnPastAStuckVictim: an evicted container that does
// not exit (SIGKILL cannot end a process in uninterruptible sleep) holds
// the memory guard at most evictExitWait, not the agent's whole kill
// bound (30 s): while the node stays short of memory the guard then
// evicts the next revocable container, and leaves the stuck one, listed
// as Stopping, alone. Before, the guard waited 30 s in the first
// eviction while nothing freed memory.
func TestMemoryGuardGoesOnPastAStuckVictim(t *testing.T) {
	ctx := context.Background()
	rt := newFakeRuntime(t.TempDir())
	a := newGuardedAgent(t, rt)
	// The first container killed stays (stuck); any later kill ends its
	// container at once.
	rt.heldKills = make(chan string, 4)
	stuck := make(chan string, 1)
	done := make(chan struct{})
	go func() { // owned by the test: ends with done
		first := true
		for {
			select {
			case id := <-rt.heldKills:
				if first {
					first = false
					stuck <- id
					continue
				}
				rt.finish(id, &ExitStatus{Code: 137, Signal: 9, Reason: "killed"})
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() { close(done) })
	a.over.start(a) // the first estimate; the guard starts
	var ids []string
	for range 2 {
		c, err := a.Launch(ctx, Spec{Command: []string{"x"}, Resources: Resources{MilliCPUs: 200, MemMiB: 100}, Revocable: true})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	var first string
	select {
	case first = <-stuck:
	case <-time.After(10 * time.Second):
		t.Fatal("the guard evicted nothing within 10 s")
	}
	t.Cleanup(func() { rt.finish(first, &ExitStatus{Code: 137, Signal: 9, Reason: "killed"}) })
	next := ids[0]
	if next == first {
		next = ids[1]
	}
	// Well under the agent's 30 s kill bound, well over evictExitWait.
	wctx, cancel := context.WithTimeout(ctx, 3*evictExitWait)
	defer cancel()
	got, err := a.Wait(wctx, next)
	if err != nil {
		t.Fatalf("the other revocable container while the first evicted one is stuck: %v (the guard waited on the stuck one)", err)
	}
	if got.Exit == nil || got.Exit.Reason != ReasonPreempted {
		t.Fatalf("the other container's exit = %+v, want evicted", got.Exit)
	}
	if c, err := a.Get(first); err != nil || c.State != StateRunning {
		t.Fatalf("the stuck container: %+v, %v; want still listed, running", c, err)
	}
	infos, err := a.Containers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range infos {
		if c.ID == first && !c.Stopping {
			t.Errorf("the stuck container is listed without Stopping: %+v", c)
		}
	}
}
