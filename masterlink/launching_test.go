package masterlink_test

import (
	"context"
	"errors"
	"strings"
	"sync"
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
func (hangingLauncher) KillTask(context.Context, string, string) error           { return nil }
func (hangingLauncher) Tasks(context.Context) ([]masterlink.TaskSnapshot, error) { return nil, nil }

// startLaunching runs a client with runner r against a scripted master
// behind a proxy the test cuts, until it registered once.
func startLaunching(t *testing.T, r masterlink.TaskRunner) (*scriptedMaster, *cutProxy) {
	t.Helper()
	m, addr := startScripted(t)
	p := startProxy(t, addr)
	c, err := masterlink.New(masterlink.Options{Master: p.addr(), StateDir: t.TempDir(), Resources: resources.MustParse("cpus:1;mem:128"),
		Runner: r, ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run(t, c)
	waitRegister(t, m, 30*time.Second, "first")
	return m, p
}

// TestReregisterLaunching is the regression test of a flake of
// TestMasterHAKill9DuringLaunches: the leader died right after sending a
// RunTask, and the agent re-registered with the new leader before the
// launch had created its container; its Register, built from the
// containers, left the task out, so the new leader did not know it (it
// acknowledged the task's updates without forwarding them, and its
// framework, told LOST or launching it again, ran it twice). A launch
// under way is registered STARTING.
func TestReregisterLaunching(t *testing.T) {
	r := hangingLauncher{started: make(chan string, 1)}
	m, p := startLaunching(t, r)
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

// onceHangingLauncher hangs a task's first launch, as hangingLauncher,
// and returns at once from any other launch of it: a duplicate, which
// the agent's runner leaves as it is.
type onceHangingLauncher struct {
	hangingLauncher
	mu    sync.Mutex
	seen  map[string]bool
	dupes chan string
}

func (r *onceHangingLauncher) LaunchTask(ctx context.Context, t masterlink.Task) error {
	r.mu.Lock()
	dup := r.seen[t.ID]
	r.seen[t.ID] = true
	r.mu.Unlock()
	if dup {
		r.dupes <- t.ID
		return nil
	}
	return r.hangingLauncher.LaunchTask(ctx, t)
}

// TestReregisterLaunchingAfterDuplicate: a second RunTask of a task
// whose launch is under way does not take the first launch out of the
// next Register when it returns (it replaced the launch's record and
// removed it on return: the task was left out, as in
// TestReregisterLaunching).
func TestReregisterLaunchingAfterDuplicate(t *testing.T) {
	r := &onceHangingLauncher{hangingLauncher: hangingLauncher{started: make(chan string, 1)}, seen: map[string]bool{}, dupes: make(chan string, 1)}
	m, p := startLaunching(t, r)
	runTask := &pb.MasterMessage{Msg: &pb.MasterMessage_Run{Run: &pb.RunTask{Task: &pb.TaskInfo{TaskId: "t1", FrameworkId: "fw", Name: "one",
		Resources: "cpus:0.1;mem:32", Command: []string{"sleep", "60"}}}}}
	for _, want := range []chan string{r.started, r.dupes} {
		m.cmds <- runTask
		select {
		case <-want:
		case <-time.After(30 * time.Second):
			t.Fatal("a RunTask was not launched")
		}
	}
	time.Sleep(50 * time.Millisecond) // the duplicate's launch goroutine ends
	p.set("reset")
	p.set("forward")
	reg := waitRegister(t, m, 30*time.Second, "after the cut")
	if len(reg.Tasks) != 1 || reg.Tasks[0].Task.GetTaskId() != "t1" || reg.Tasks[0].State != pb.TaskState_TASK_STARTING {
		t.Fatalf("re-registered with %v, want t1 STARTING (its first launch is still under way)", reg.Tasks)
	}
}

// failingLauncher is a runner whose launches fail at once.
type failingLauncher struct{ hangingLauncher }

func (failingLauncher) LaunchTask(context.Context, masterlink.Task) error {
	return errors.New("make the container: no space left on device")
}

// TestLaunchFailureNamesAReason: a launch that fails is reported
// TASK_FAILED with a reason the TaskReason enum names (frameworks
// compare the wire string with it; "LAUNCH_FAILED" was sent but not in
// the enum) and the runner's error as its message.
func TestLaunchFailureNamesAReason(t *testing.T) {
	m, _ := startLaunching(t, failingLauncher{})
	m.cmds <- &pb.MasterMessage{Msg: &pb.MasterMessage_Run{Run: &pb.RunTask{Task: &pb.TaskInfo{TaskId: "t1", FrameworkId: "fw", Name: "one",
		Resources: "cpus:0.1;mem:32", Command: []string{"true"}}}}}
	st := next(t, m.statuses)
	if st.TaskId != "t1" || st.State != pb.TaskState_TASK_FAILED || !strings.Contains(st.Message, "no space left") {
		t.Fatalf("update %v, want t1 FAILED naming the launch's error", st)
	}
	if _, ok := pb.TaskReason_value[st.Reason]; !ok || st.Reason != pb.ReasonLaunchFailed {
		t.Errorf("reason %q, want %q of the TaskReason enum", st.Reason, pb.ReasonLaunchFailed)
	}
}
