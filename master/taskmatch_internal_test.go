package master

import (
	"fmt"
	"slices"
	"testing"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
)

// TestTasksMatchedByFramework (issue 30): with framework b's task x
// tracked on an agent, what the agent says about framework a's task x
// never touches it — a's end (acknowledged, not applied, not forwarded),
// a's live x (killed by framework and ID), a's report at re-registration
// (killed if live, b's kept) — while b's own updates, and an update
// without a framework (an older agent), are b's.
func TestTasksMatchedByFramework(t *testing.T) {
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	fwOut := NewOutbox[ToFramework](func() {}, FrameworkQueue)
	b, err := m.Subscribe(subscriptionFromPB(&pb.SubscribeRequest{Framework: &pb.FrameworkInfo{Name: "b"}}), fwOut)
	if err != nil {
		t.Fatal(err)
	}
	report := func(fw string, state pb.TaskState) *pb.TaskSnapshot {
		return &pb.TaskSnapshot{Task: &pb.TaskInfo{TaskId: "x", FrameworkId: fw, Resources: "cpus:1;mem:64", Command: []string{"sleep"}}, State: state}
	}
	reg := &pb.Register{Hostname: "h", Resources: "cpus:4;mem:4096", Tasks: []*pb.TaskSnapshot{report(b, pb.TaskState_TASK_RUNNING)}}
	agOut := NewOutbox[ToAgent](func() {}, AgentQueue)
	id, _, err := m.registerAgent(registrationFromPB(reg), "", agOut)
	if err != nil {
		t.Fatal(err)
	}
	fwOut.Take()
	state := func() TaskState {
		t.Helper()
		tk := m.tasks["x"]
		if tk == nil || tk.fw != b {
			t.Fatalf("b's x not tracked: %+v", tk)
		}
		return tk.state
	}
	sent := func() string {
		var out []string
		for _, msg := range agOut.Take() {
			switch x := msg.(type) {
			case *KillTask:
				out = append(out, fmt.Sprintf("kill %s/%s", x.FrameworkID, x.TaskID))
			case *AckStatus:
				out = append(out, fmt.Sprintf("ack %s/%s %s", x.FrameworkID, x.TaskID, x.UUID))
			}
		}
		return fmt.Sprint(out)
	}
	status := func(fw string, st pb.TaskState, uuid string) {
		m.AgentMessage(id, agOut, taskStatusFromPB(&pb.TaskStatus{TaskId: "x", FrameworkId: fw, State: st, Uuid: uuid, HasExitCode: true}))
	}

	status("a", pb.TaskState_TASK_FINISHED, "u1")
	if got := sent(); got != "[ack a/x u1]" || state() != TaskRunning || len(fwOut.Take()) != 0 {
		t.Fatalf("a's end: sent %s, b's x %s", got, state())
	}
	status("a", pb.TaskState_TASK_RUNNING, "u2")
	if got := sent(); got != "[kill a/x ack a/x u2]" || state() != TaskRunning {
		t.Fatalf("a's live x: sent %s, b's x %s", got, state())
	}
	reg.AgentId = id
	reg.Tasks = []*pb.TaskSnapshot{report("a", pb.TaskState_TASK_RUNNING), report(b, pb.TaskState_TASK_RUNNING)}
	agOut = NewOutbox[ToAgent](func() {}, AgentQueue)
	_, kill, err := m.registerAgent(registrationFromPB(reg), "", agOut)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kill, []KillTask{{TaskID: "x", FrameworkID: "a"}}) || state() != TaskRunning {
		t.Fatalf("re-registration: kill %v, b's x %s", kill, state())
	}
	status(b, pb.TaskState_TASK_RUNNING, "u3")
	if ev := fwOut.Take(); len(ev) != 1 || ev[0].(*TaskStatus).UUID != "u3" || ev[0].(*TaskStatus).FrameworkID != b {
		t.Fatalf("b's own update: b heard %v", ev)
	}
	// An older agent names no framework: matched by the task ID.
	status("", pb.TaskState_TASK_FINISHED, "u4")
	if state() != TaskFinished {
		t.Fatalf("an update without a framework: b's x %s", state())
	}
}
