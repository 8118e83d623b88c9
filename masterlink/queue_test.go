package masterlink

import (
	"context"
	"testing"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
)

type nopRunner struct{}

func (nopRunner) LaunchTask(context.Context, Task) error        { return nil }
func (nopRunner) KillTask(context.Context, string) error        { return nil }
func (nopRunner) Tasks(context.Context) ([]TaskSnapshot, error) { return nil, nil }

// TestResizeAnswersQueued: answers to resource updates take the task's
// latest state and are queued even when that state repeats; an answer for
// a task that ended, or that the client never reported, is dropped.
func TestResizeAnswersQueued(t *testing.T) {
	c, err := New(Options{Master: "127.0.0.1:1", StateDir: t.TempDir(), Runner: nopRunner{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Status{
		{TaskID: "t1", State: pb.TaskState_TASK_RUNNING},
		{TaskID: "t1", Reason: pb.ReasonResourcesUpdated, Resources: resources.MustParse("cpus:1;mem:64")},
		{TaskID: "t1", Reason: pb.ReasonResourcesUpdateFailed, Message: "no room"},
		{TaskID: "t1", State: pb.TaskState_TASK_RUNNING}, // a plain repeat: dropped
		{TaskID: "t2", State: pb.TaskState_TASK_RUNNING},
		{TaskID: "t2", State: pb.TaskState_TASK_FINISHED},
		{TaskID: "t2", Reason: pb.ReasonResourcesUpdated, Resources: resources.MustParse("cpus:1")},
		{TaskID: "never", Reason: pb.ReasonResourcesUpdateFailed},
	} {
		if err := c.Update(s); err != nil {
			t.Fatal(err)
		}
	}
	q := c.queues["t1"]
	if len(q.Pending) != 3 {
		t.Fatalf("t1 queue: %+v, want RUNNING and two answers", q.Pending)
	}
	for _, u := range q.Pending[1:] {
		if u.State != pb.TaskState_TASK_RUNNING {
			t.Fatalf("answer in state %s, want the task's latest (RUNNING)", u.State)
		}
	}
	if st := q.Pending[1].proto("t1", "a"); st.Resources != "cpus:1;mem:64" || st.Reason != pb.ReasonResourcesUpdated {
		t.Fatalf("answer on the wire: %+v", st)
	}
	if n := len(c.queues["t2"].Pending); n != 2 {
		t.Fatalf("t2 queue has %d updates, want RUNNING and FINISHED only", n)
	}
	if c.queues["never"] != nil {
		t.Fatalf("answer queued for a task never reported")
	}
	// The answers survive a restart (the resources field is checkpointed).
	c2, err := New(Options{Master: "127.0.0.1:1", StateDir: c.opts.StateDir, Runner: nopRunner{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := c2.queues["t1"].Pending[1].Resources; got != "cpus:1;mem:64" {
		t.Fatalf("checkpointed answer resources %q", got)
	}
}
