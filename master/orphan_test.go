package master_test

import (
	"testing"
	"time"

	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
)

// TestUnknownRunningTaskIsKilled: an agent reporting a live task the
// master does not track — nobody accounts for its resources or will end
// it — is told to kill it; the task's end is then only acknowledged.
func TestUnknownRunningTaskIsKilled(t *testing.T) {
	c := newCluster(t, master.Options{})
	r := newFakeRunner()
	c.startAgent(t.TempDir(), r)
	deadline := time.Now().Add(20 * time.Second)
	for len(c.m.State().Agents) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the agent did not register within 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.mu.Lock()
	r.tasks["ghost"] = &masterlink.TaskSnapshot{Task: masterlink.Task{ID: "ghost", FrameworkID: "fw-nobody"}, State: pb.TaskState_TASK_RUNNING}
	cl := r.client
	r.mu.Unlock()
	if err := cl.Update(masterlink.Status{TaskID: "ghost", State: pb.TaskState_TASK_RUNNING}); err != nil {
		t.Fatal(err)
	}
	for {
		r.mu.Lock()
		st := r.tasks["ghost"].State
		r.mu.Unlock()
		if st == pb.TaskState_TASK_KILLED {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task the master does not know is %s, want killed", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(c.m.State().Tasks); n != 0 {
		t.Errorf("the master tracks %d tasks, want none (it never launched or adopted one)", n)
	}
}
