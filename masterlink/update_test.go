package masterlink_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
)

// resizer is a runner that can resize: it fails resources asking for
// more than 4 cpus.
type resizer struct{ idleRunner }

func (resizer) UpdateTask(_ context.Context, _, _ string, res resources.Resources) error {
	if res.CPUs() > resources.MustParse("cpus:4").CPUs() {
		return errors.New("no room")
	}
	return nil
}

// ackNext acknowledges the next status and returns it.
func ackNext(t *testing.T, m *scriptedMaster) *pb.TaskStatus {
	t.Helper()
	st := next(t, m.statuses)
	m.acks <- &pb.StatusAck{TaskId: st.TaskId, Uuid: st.Uuid}
	return st
}

// nextFresh skips retries of already seen updates.
func nextFresh(t *testing.T, m *scriptedMaster, seen map[string]bool) *pb.TaskStatus {
	t.Helper()
	for {
		st := ackNext(t, m)
		if !seen[st.Uuid] {
			seen[st.Uuid] = true
			return st
		}
	}
}

func sendUpdate(m *scriptedMaster, task, res string) {
	m.cmds <- &pb.MasterMessage{Msg: &pb.MasterMessage_Update{Update: &pb.UpdateTask{TaskId: task, Resources: res}}}
}

// TestUpdateTaskAnswers: the client answers every resource update in the
// task's latest state (never deduplicated as a repeated state): updated
// with the resources, or failed with the runner's error; a runner that
// cannot resize fails them.
func TestUpdateTaskAnswers(t *testing.T) {
	m, addr := startScripted(t)
	c := newClientWith(t, addr, t.TempDir(), resizer{})
	run(t, c)
	seen := map[string]bool{}
	if err := c.Update(masterlink.Status{TaskID: "t1", State: pb.TaskState_TASK_RUNNING}); err != nil {
		t.Fatal(err)
	}
	nextFresh(t, m, seen)
	for range 2 { // the same update twice: answered twice
		sendUpdate(m, "t1", "cpus:2;mem:256")
		st := nextFresh(t, m, seen)
		if st.State != pb.TaskState_TASK_RUNNING || st.Reason != pb.ReasonResourcesUpdated || st.Resources != "cpus:2;mem:256" {
			t.Fatalf("answer: %s %s %q %s", st.State, st.Reason, st.Resources, st.Message)
		}
	}
	sendUpdate(m, "t1", "cpus:8;mem:256")
	st := nextFresh(t, m, seen)
	if st.State != pb.TaskState_TASK_RUNNING || st.Reason != pb.ReasonResourcesUpdateFailed || !strings.Contains(st.Message, "no room") || st.Resources != "" {
		t.Fatalf("failed answer: %s %s %q %s", st.State, st.Reason, st.Resources, st.Message)
	}
	sendUpdate(m, "t1", "cpus:lots")
	if st := nextFresh(t, m, seen); st.Reason != pb.ReasonResourcesUpdateFailed || !strings.Contains(st.Message, "cpus:lots") {
		t.Fatalf("malformed update answered %s %s", st.Reason, st.Message)
	}
}

func TestUpdateTaskWithoutUpdater(t *testing.T) {
	m, addr := startScripted(t)
	c := newClient(t, addr, t.TempDir())
	run(t, c)
	seen := map[string]bool{}
	if err := c.Update(masterlink.Status{TaskID: "t1", State: pb.TaskState_TASK_STARTING}); err != nil {
		t.Fatal(err)
	}
	nextFresh(t, m, seen)
	sendUpdate(m, "t1", "cpus:2;mem:256")
	st := nextFresh(t, m, seen)
	if st.State != pb.TaskState_TASK_STARTING || st.Reason != pb.ReasonResourcesUpdateFailed || !strings.Contains(st.Message, "cannot resize") {
		t.Fatalf("answer without an updater: %s %s %s", st.State, st.Reason, st.Message)
	}
}
