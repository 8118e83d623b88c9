package master_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/master"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"github.com/brimnode/brim/scheduler"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestStaleUpdateOfRemovedFramework (issue 30): framework a's task x
// finishes while a is disconnected, and a is removed (failover timeout)
// before it acknowledged the end; framework b then launches its own task
// x on the same agent; the agent's retry of a's FINISHED comes after
// that. It must not touch b's x: b's task stays RUNNING, b hears no end,
// nothing is killed. Before, status updates were matched by task ID: b
// was told FINISHED exit 0 for its running task, whose next update the
// master then took for an untracked live task and killed (and on the
// agent b's updates waited behind a's unacknowledged one).
//
// The agent's first retry is an hour away: its link is restarted instead,
// which resends every unacknowledged update at once, after b's launch.
func TestStaleUpdateOfRemovedFramework(t *testing.T) {
	c := newCluster(t, master.Options{})
	r := newFakeRunner()
	dir := t.TempDir()
	res := resources.MustParse("cpus:4;mem:4096")
	stop := c.startAgentRetrying(dir, r, res, time.Hour, time.Hour)
	waitAgents(t, c.m, 1)

	a := c.startFrameworkFailover("a", 200*time.Millisecond)
	launch(t, a, a.nextOffers(t)[0], "x", "cpus:1;mem:128")
	a.expectStates(t, "x", pb.TaskState_TASK_STAGING, pb.TaskState_TASK_STARTING, pb.TaskState_TASK_RUNNING)
	aID := a.d.FrameworkID()
	a.d.Close()
	waitState(t, c.m, "framework a disconnected", func(st master.State) bool {
		return len(st.Frameworks) == 1 && !st.Frameworks[0].Connected
	})
	finishTask(t, r, "x") // forwarded to nobody: unacknowledged
	waitState(t, c.m, "framework a removed", func(st master.State) bool {
		return len(st.Frameworks) == 0 && len(st.Tasks) == 0
	})

	b := c.startFramework("b")
	launch(t, b, b.nextOffers(t)[0], "x", "cpus:1;mem:128")
	b.expectStates(t, "x", pb.TaskState_TASK_STAGING, pb.TaskState_TASK_STARTING, pb.TaskState_TASK_RUNNING)
	bID := b.d.FrameworkID()

	// The agent's link comes back and resends a's end.
	stop()
	c.startAgentRetrying(dir, r, res, time.Hour, time.Hour)
	deadline := time.Now().Add(30 * time.Second)
	for pending := ""; ; time.Sleep(20 * time.Millisecond) {
		files, _ := filepath.Glob(filepath.Join(dir, "masterlink", "updates", "*.json"))
		pending = ""
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), `"pending"`) {
				pending += string(b)
			}
		}
		if pending == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("updates never acknowledged: %s", pending)
		}
	}
	st := waitState(t, c.m, "the agent back", func(st master.State) bool { return len(st.Agents) == 1 && st.Agents[0].Connected })
	if len(st.Tasks) != 1 || st.Tasks[0].FrameworkID != bID || st.Tasks[0].State != "RUNNING" {
		t.Fatalf("tasks after a's stale end arrived: %+v, want b's x RUNNING", st.Tasks)
	}
	for {
		select {
		case up := <-b.updates:
			if up.TaskId == "x" && up.State != pb.TaskState_TASK_RUNNING {
				t.Fatalf("b heard %s for its x (%s): the removed framework %s's end", up.State, up.Message, aID)
			}
			continue
		default:
		}
		break
	}
	r.mu.Lock()
	got := r.tasks["x"]
	r.mu.Unlock()
	if got.Task.FrameworkID != bID || got.State != pb.TaskState_TASK_RUNNING {
		t.Fatalf("b's x on the agent: %s of %s, want RUNNING", got.State, got.Task.FrameworkID)
	}
	if err := b.d.Kill(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	b.expectStates(t, "x", pb.TaskState_TASK_KILLED)
}

// TestRemovedFrameworkMayNotSubscribeAgain: a framework removed at the
// end of its failover timeout (its tasks killed) that comes back with its
// ID is refused with ErrFrameworkRemoved, FailedPrecondition on the wire,
// on which the SDK's Run returns rather than retrying. Before, its ID was
// subscribed as a new framework, as if its killed tasks had never been.
func TestRemovedFrameworkMayNotSubscribeAgain(t *testing.T) {
	c := newCluster(t, master.Options{})
	a := c.startFrameworkFailover("a", 200*time.Millisecond)
	<-a.subscribed
	aID := a.d.FrameworkID()
	a.d.Close()
	waitState(t, c.m, "framework a removed", func(st master.State) bool { return len(st.Frameworks) == 0 })

	d, err := scheduler.New(scheduler.Options{Master: c.addr, Name: "a", FrameworkID: aID})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = d.Run(ctx, scheduler.Callbacks{})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "failover timeout passed") {
		t.Fatalf("Run with a removed framework's ID: %v, want FailedPrecondition naming its removal", err)
	}
	if st := c.m.State(); len(st.Frameworks) != 0 {
		t.Fatalf("frameworks after the refused Subscribe: %+v", st.Frameworks)
	}
}
