package master_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/master/api"

	"github.com/brimnode/brim/master"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
)

// waitState polls the master's State until ok holds (30 s at most).
func waitState(t *testing.T, m *master.Master, what string, ok func(master.State) bool) master.State {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := m.State()
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: state %+v", what, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readCheckpoint reads the agent's checkpoint of task id's status
// updates (t1.json, or t1.HASH.json for a task of a framework).
func readCheckpoint(agentDir, id string) ([]byte, error) {
	files, _ := filepath.Glob(filepath.Join(agentDir, "masterlink", "updates", id+"*.json"))
	if len(files) != 1 {
		return nil, fmt.Errorf("checkpoints of %s: %v", id, files)
	}
	return os.ReadFile(files[0])
}

// waitAcknowledged waits until the agent at agentDir has every update of
// task id acknowledged (its checkpoint holds nothing pending).
func waitAcknowledged(t *testing.T, agentDir, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := readCheckpoint(agentDir, id)
		if err == nil && !strings.Contains(string(b), "pending") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent never saw %s's acknowledgement: %s %v", id, b, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func completedTask(st master.State, fw, id string) *api.TaskState {
	for i, ts := range st.CompletedTasks {
		if ts.ID == id && (fw == "" || ts.FrameworkID == fw) {
			return &st.CompletedTasks[i]
		}
	}
	return nil
}

// TestFinishedTaskNotResurrected (issue 14): a task that finished and
// whose end its framework acknowledged goes to /state's completed tasks;
// after a master restart the agent still reports it (its container is
// there), and the master keeps it in the history — before, it adopted it
// as a live task of a framework that is gone, /state listed it, and its ID
// stayed in use (a new launch with it was refused).
func TestFinishedTaskNotResurrected(t *testing.T) {
	open := storeOpener(t)
	store := open()
	c := newClusterAt(t, master.Options{Store: store}, "127.0.0.1:0")
	addr := c.addr
	r := newFakeRunner()
	code := 0
	r.autoExit = &code
	agentDir := t.TempDir()
	c.startAgent(agentDir, r)
	f := c.startFramework("fw")
	launch(t, f, f.nextOffers(t)[0], "t1", "cpus:1;mem:128")
	f.expectStates(t, "t1", pb.TaskState_TASK_STAGING, pb.TaskState_TASK_STARTING, pb.TaskState_TASK_RUNNING, pb.TaskState_TASK_FINISHED)
	fwID := f.d.FrameworkID()
	st := waitState(t, c.m, "t1 completed", func(st master.State) bool { return len(st.Tasks) == 0 && completedTask(st, fwID, "t1") != nil })
	if ts := completedTask(st, fwID, "t1"); ts.State != "FINISHED" || ts.ExitCode == nil || *ts.ExitCode != 0 {
		t.Fatalf("completed t1: %+v", ts)
	}
	// The agent has the acknowledgement checkpointed: nothing pending.
	waitAcknowledged(t, agentDir, "t1")
	c.stop()
	store.Close()

	c2 := newClusterAt(t, master.Options{Store: open()}, addr)
	waitAgents(t, c2.m, 1)
	st = c2.m.State()
	for _, ts := range st.Tasks {
		t.Errorf("task %s (%s) resurrected after the restart", ts.ID, ts.State)
	}
	if ts := completedTask(st, fwID, "t1"); ts == nil || ts.State != "FINISHED" {
		t.Errorf("t1 not in the completed history after the restart: %+v", st.CompletedTasks)
	}
	// Its ID is free: another framework launches a task with it.
	f2 := c2.startFramework("fw2")
	launch(t, f2, f2.nextOffers(t)[0], "t1", "cpus:1;mem:128")
	f2.expectStates(t, "t1", pb.TaskState_TASK_STAGING, pb.TaskState_TASK_STARTING, pb.TaskState_TASK_RUNNING, pb.TaskState_TASK_FINISHED)
}

// TestUnacknowledgedEndDeliveredAfterRestart: a task that ended while the
// master was down is adopted, its end delivered to its framework once,
// and after the acknowledgement it is in the completed history.
func TestUnacknowledgedEndDeliveredAfterRestart(t *testing.T) {
	open := storeOpener(t)
	store := open()
	c := newClusterAt(t, master.Options{Store: store}, "127.0.0.1:0")
	addr := c.addr
	r := newFakeRunner()
	c.startAgent(t.TempDir(), r)
	f := c.startFramework("fw")
	launch(t, f, f.nextOffers(t)[0], "t1", "cpus:1;mem:128")
	f.expectStates(t, "t1", pb.TaskState_TASK_STAGING, pb.TaskState_TASK_STARTING, pb.TaskState_TASK_RUNNING)
	fwID := f.d.FrameworkID()
	c.stop()
	store.Close()
	if err := r.finish("t1", 4); err != nil { // ends while the master is down
		t.Fatal(err)
	}
	c2 := newClusterAt(t, master.Options{Store: open()}, addr)
	for {
		st := f.nextUpdate(t)
		if st.TaskId == "t1" && st.State == pb.TaskState_TASK_FAILED {
			break
		}
	}
	st := waitState(t, c2.m, "t1 completed", func(st master.State) bool { return len(st.Tasks) == 0 && completedTask(st, fwID, "t1") != nil })
	if ts := completedTask(st, fwID, "t1"); ts.State != "FAILED" {
		t.Fatalf("completed t1: %+v", ts)
	}
	if err := f.d.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestCompletedHistoryBounded: the history keeps the newest
// MaxCompletedTasks tasks.
func TestCompletedHistoryBounded(t *testing.T) {
	c := newCluster(t, master.Options{MaxCompletedTasks: 2})
	r := newFakeRunner()
	code := 0
	r.autoExit = &code
	c.startAgent(t.TempDir(), r)
	f := c.startFramework("fw")
	for _, id := range []string{"a", "b", "c"} {
		launch(t, f, f.nextOffers(t)[0], id, "cpus:1;mem:128")
		f.expectStates(t, id, pb.TaskState_TASK_STAGING, pb.TaskState_TASK_STARTING, pb.TaskState_TASK_RUNNING, pb.TaskState_TASK_FINISHED)
		waitState(t, c.m, id+" completed", func(st master.State) bool { return completedTask(st, "", id) != nil })
	}
	st := c.m.State()
	if len(st.CompletedTasks) != 2 || st.CompletedTasks[0].ID != "b" || st.CompletedTasks[1].ID != "c" {
		t.Fatalf("completed %+v, want b and c", st.CompletedTasks)
	}
}

// TestCompletedTaskKeepsItsEndAfterRestart (issue 30): a task whose end
// its framework acknowledged keeps its reason, message and exit code in
// the completed history across a master restart: the agent reports them
// with the ended task when it re-registers. Before, the history after a
// restart had the state alone.
func TestCompletedTaskKeepsItsEndAfterRestart(t *testing.T) {
	open := storeOpener(t)
	store := open()
	c := newClusterAt(t, master.Options{Store: store}, "127.0.0.1:0")
	addr := c.addr
	r := newFakeRunner()
	code := 3
	r.autoExit = &code
	agentDir := t.TempDir()
	c.startAgent(agentDir, r)
	f := c.startFramework("fw")
	launch(t, f, f.nextOffers(t)[0], "t1", "cpus:1;mem:128")
	f.expectStates(t, "t1", pb.TaskState_TASK_STAGING, pb.TaskState_TASK_STARTING, pb.TaskState_TASK_RUNNING, pb.TaskState_TASK_FAILED)
	fwID := f.d.FrameworkID()
	waitState(t, c.m, "t1 completed", func(st master.State) bool { return completedTask(st, fwID, "t1") != nil })
	waitAcknowledged(t, agentDir, "t1")
	c.stop()
	store.Close()

	c2 := newClusterAt(t, master.Options{Store: open()}, addr)
	st := waitState(t, c2.m, "t1 in the history again", func(st master.State) bool { return completedTask(st, fwID, "t1") != nil })
	ts := completedTask(st, fwID, "t1")
	if ts.State != "FAILED" || ts.Reason != "COMMAND_EXITED" || ts.Message != "command exited with code 3" || ts.ExitCode == nil || *ts.ExitCode != 3 {
		t.Fatalf("t1 after the restart: state %s reason %q message %q exit code %v, want FAILED COMMAND_EXITED \"command exited with code 3\" 3",
			ts.State, ts.Reason, ts.Message, ts.ExitCode)
	}
}
