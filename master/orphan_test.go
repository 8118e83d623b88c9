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
	waitAgent(t, c.m, "registered", func(a master.AgentState) bool { return a.Connected })
	r.mu.Lock()
	r.tasks["ghost"] = &masterlink.TaskSnapshot{Task: masterlink.Task{ID: "ghost", FrameworkID: "fw-nobody"}, State: pb.TaskState_TASK_RUNNING}
	cl := r.client
	r.mu.Unlock()
	if err := cl.Update(masterlink.Status{TaskID: "ghost", State: pb.TaskState_TASK_RUNNING}); err != nil {
		t.Fatal(err)
	}
	r.waitKilled(t, "ghost", 20*time.Second, "on the agent, unknown to the master")
	if n := len(c.m.State().Tasks); n != 0 {
		t.Errorf("the master tracks %d tasks, want none (it never launched or adopted one)", n)
	}
}
