package masterlink_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
)

// breakUpdatesDir makes every status checkpoint under dir fail (a file
// where the updates directory was, as a full disk fails the write) and
// returns the function that repairs it.
func breakUpdatesDir(t *testing.T, dir string) (repair func()) {
	t.Helper()
	updates := filepath.Join(dir, "masterlink", "updates")
	if err := os.RemoveAll(updates); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(updates, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := os.Remove(updates); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(updates, 0o700); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStatusSurvivesFailedCheckpoint (chaos seed 5005, disk-full): a
// status whose checkpoint cannot be written still reaches the master, and
// its checkpoint is written once the disk has room again, so an agent
// restarted after that still delivers it.
func TestStatusSurvivesFailedCheckpoint(t *testing.T) {
	m, addr := startScripted(t)
	dir := t.TempDir()
	c := newClient(t, addr, dir)
	repair := breakUpdatesDir(t, dir)
	if err := c.Update(masterlink.Status{TaskID: "t1", State: pb.TaskState_TASK_FAILED, Reason: "LAUNCH_FAILED", Message: "no space left on device"}); err != nil {
		t.Logf("Update: %v", err) // reported, but the update must not be lost
	}
	run(t, c)
	st := next(t, m.statuses)
	if st.TaskId != "t1" || st.State != pb.TaskState_TASK_FAILED || st.Reason != "LAUNCH_FAILED" {
		t.Fatalf("sent %s %s %s, want t1 FAILED LAUNCH_FAILED", st.TaskId, st.State, st.Reason)
	}

	// Room again: the checkpoint is written, with the update pending.
	repair()
	file := filepath.Join(dir, "masterlink", "updates", "t1.json")
	var saved struct {
		Pending []struct {
			UUID  string       `json:"uuid"`
			State pb.TaskState `json:"state"`
		} `json:"pending"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(file)
		if err == nil && json.Unmarshal(b, &saved) == nil && len(saved.Pending) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint never written after the disk had room: %v %s", err, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if saved.Pending[0].UUID != st.Uuid || saved.Pending[0].State != pb.TaskState_TASK_FAILED {
		t.Fatalf("checkpoint %+v, want the FAILED update %s", saved.Pending, st.Uuid)
	}

	// A restarted agent (a new client on the same state dir) sends it
	// again with the same UUID.
	m2, addr2 := startScripted(t)
	run(t, newClient(t, addr2, dir))
	if again := next(t, m2.statuses); again.Uuid != st.Uuid || again.State != pb.TaskState_TASK_FAILED {
		t.Fatalf("after restart sent %s %s, want %s FAILED", again.Uuid, again.State, st.Uuid)
	}
}

// TestAckSurvivesFailedCheckpoint: an acknowledgement whose checkpoint
// fails is kept in memory (the next update of the task goes out) and
// written once the disk has room.
func TestAckSurvivesFailedCheckpoint(t *testing.T) {
	m, addr := startScripted(t)
	dir := t.TempDir()
	launched := make(chan string, 1)
	c := newClientWith(t, addr, dir, launchSignal{launched})
	run(t, c)
	for _, s := range []pb.TaskState{pb.TaskState_TASK_RUNNING, pb.TaskState_TASK_FINISHED} {
		if err := c.Update(masterlink.Status{TaskID: "t1", State: s}); err != nil {
			t.Fatal(err)
		}
	}
	repair := breakUpdatesDir(t, dir)
	seen := map[string]bool{}
	if st := nextFresh(t, m, seen); st.State != pb.TaskState_TASK_RUNNING {
		t.Fatalf("first %s", st.State)
	}
	var fin *pb.TaskStatus
	for fin == nil || seen[fin.Uuid] { // skip resends of the first
		fin = next(t, m.statuses)
	}
	if fin.State != pb.TaskState_TASK_FINISHED {
		t.Fatalf("second %s", fin.State)
	}
	// The acknowledgement, then a launch on the same stream: once the
	// launch runs, the acknowledgement was handled (and its write failed).
	m.cmds <- &pb.MasterMessage{Msg: &pb.MasterMessage_Ack{Ack: &pb.StatusAck{TaskId: "t1", Uuid: fin.Uuid}}}
	m.cmds <- &pb.MasterMessage{Msg: &pb.MasterMessage_Run{Run: &pb.RunTask{Task: &pb.TaskInfo{TaskId: "t2", Resources: "cpus:0.1"}}}}
	select {
	case <-launched:
	case <-time.After(30 * time.Second):
		t.Fatal("launch after the acknowledgement never ran")
	}
	repair()
	file := filepath.Join(dir, "masterlink", "updates", "t1.json")
	deadline := time.Now().Add(30 * time.Second)
	for {
		var q struct {
			Last    pb.TaskState      `json:"last"`
			Pending []json.RawMessage `json:"pending"`
		}
		b, err := os.ReadFile(file)
		if err == nil && json.Unmarshal(b, &q) == nil && q.Last == pb.TaskState_TASK_FINISHED && len(q.Pending) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("acknowledged checkpoint never written: %v %s", err, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// launchSignal is a runner that says which task it was asked to launch.
// It holds t1, ended (a task the runner no longer holds is forgotten
// once its end is acknowledged: see TestEndedTasksForgotten).
type launchSignal struct{ launched chan<- string }

func (r launchSignal) LaunchTask(_ context.Context, t masterlink.Task) error {
	r.launched <- t.ID
	return nil
}
func (launchSignal) KillTask(context.Context, string, string) error { return nil }
func (launchSignal) Tasks(context.Context) ([]masterlink.TaskSnapshot, error) {
	return []masterlink.TaskSnapshot{{Task: masterlink.Task{ID: "t1"}, State: pb.TaskState_TASK_FINISHED}}, nil
}
