package masterlink_test

import (
	"context"
	"testing"
	"time"

	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
)

// hangingLauncher is a runner whose launches hang before their container
// exists (Tasks shows none) until ctx ends.
type hangingLauncher struct{ started chan string }

func (r hangingLauncher) LaunchTask(ctx context.Context, t masterlink.Task) error {
	r.started <- t.ID
	<-ctx.Done()
	return ctx.Err()
}
func (hangingLauncher) KillTask(context.Context, string) error                   { return nil }
func (hangingLauncher) Tasks(context.Context) ([]masterlink.TaskSnapshot, error) { return nil, nil }

// TestReregisterLaunching is the regression test of a flake of
// TestMasterHAKill9DuringLaunches: the leader died right after sending a
// RunTask, and the agent re-registered with the new leader before the
// launch had created its container; its Register, built from the
// containers, left the task out, so the new leader did not know it (it
// acknowledged the task's updates without forwarding them, and its
// framework, told LOST or launching it again, ran it twice). A launch
// under way is registered STARTING.
func TestReregisterLaunching(t *testing.T) {
	m, addr := startScripted(t)
	p := startProxy(t, addr)
	r := hangingLauncher{started: make(chan string, 1)}
	c, err := masterlink.New(masterlink.Options{Master: p.addr(), StateDir: t.TempDir(), Resources: resources.MustParse("cpus:1;mem:128"),
		Runner: r, ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run(t, c)
	waitRegister(t, m, 30*time.Second, "first")
	m.cmds <- &pb.MasterMessage{Msg: &pb.MasterMessage_Run{Run: &pb.RunTask{Task: &pb.TaskInfo{TaskId: "t1", FrameworkId: "fw", Name: "one",
		Resources: "cpus:0.1;mem:32", Command: []string{"sleep", "60"}}}}}
	select {
	case <-r.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the RunTask was not launched")
	}
	p.set("reset") // the master is gone, and another takes over
	p.set("forward")
	reg := waitRegister(t, m, 30*time.Second, "after the cut")
	if len(reg.Tasks) != 1 {
		t.Fatalf("re-registered with %d tasks, want the launch under way: %v", len(reg.Tasks), reg.Tasks)
	}
	ts := reg.Tasks[0]
	if ts.State != pb.TaskState_TASK_STARTING || ts.Task.GetTaskId() != "t1" || ts.Task.GetFrameworkId() != "fw" ||
		ts.Task.GetResources() != "cpus:0.1;mem:32" || ts.Acknowledged {
		t.Errorf("re-registered with %v, want t1 of fw STARTING", ts)
	}
}
