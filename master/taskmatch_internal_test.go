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
	fwOut := newOutbox[toFramework](func() {}, frameworkQueue)
	b, err := m.subscribe(subscriptionFromPB(&pb.SubscribeRequest{Framework: &pb.FrameworkInfo{Name: "b"}}), fwOut)
	if err != nil {
		t.Fatal(err)
	}
	report := func(fw string, state pb.TaskState) *pb.TaskSnapshot {
		return &pb.TaskSnapshot{Task: &pb.TaskInfo{TaskId: "x", FrameworkId: fw, Resources: "cpus:1;mem:64", Command: []string{"sleep"}}, State: state}
	}
	reg := &pb.Register{Hostname: "h", Resources: "cpus:4;mem:4096", Tasks: []*pb.TaskSnapshot{report(b, pb.TaskState_TASK_RUNNING)}}
	agOut := newOutbox[toAgent](func() {}, agentQueue)
	id, _, err := m.registerAgent(registrationFromPB(reg), "", agOut)
	if err != nil {
		t.Fatal(err)
	}
	fwOut.take()
	state := func() taskState {
		t.Helper()
		tk := m.tasks["x"]
		if tk == nil || tk.fw != b {
			t.Fatalf("b's x not tracked: %+v", tk)
		}
		return tk.state
	}
	sent := func() string {
		var out []string
		for _, msg := range agOut.take() {
			switch x := msg.(type) {
			case *killTask:
				out = append(out, fmt.Sprintf("kill %s/%s", x.framework, x.taskID))
			case *ackStatus:
				out = append(out, fmt.Sprintf("ack %s/%s %s", x.framework, x.taskID, x.uuid))
			}
		}
		return fmt.Sprint(out)
	}
	status := func(fw string, st pb.TaskState, uuid string) {
		m.agentMessage(id, agOut, taskStatusFromPB(&pb.TaskStatus{TaskId: "x", FrameworkId: fw, State: st, Uuid: uuid, HasExitCode: true}))
	}

	status("a", pb.TaskState_TASK_FINISHED, "u1")
	if got := sent(); got != "[ack a/x u1]" || state() != taskRunning || len(fwOut.take()) != 0 {
		t.Fatalf("a's end: sent %s, b's x %s", got, state())
	}
	status("a", pb.TaskState_TASK_RUNNING, "u2")
	if got := sent(); got != "[kill a/x ack a/x u2]" || state() != taskRunning {
		t.Fatalf("a's live x: sent %s, b's x %s", got, state())
	}
	reg.AgentId = id
	reg.Tasks = []*pb.TaskSnapshot{report("a", pb.TaskState_TASK_RUNNING), report(b, pb.TaskState_TASK_RUNNING)}
	agOut = newOutbox[toAgent](func() {}, agentQueue)
	_, kill, err := m.registerAgent(registrationFromPB(reg), "", agOut)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kill, []killTask{{taskID: "x", framework: "a"}}) || state() != taskRunning {
		t.Fatalf("re-registration: kill %v, b's x %s", kill, state())
	}
	status(b, pb.TaskState_TASK_RUNNING, "u3")
	if ev := fwOut.take(); len(ev) != 1 || ev[0].(*taskStatus).uuid != "u3" || ev[0].(*taskStatus).frameworkID != b {
		t.Fatalf("b's own update: b heard %v", ev)
	}
	// An older agent names no framework: matched by the task ID.
	status("", pb.TaskState_TASK_FINISHED, "u4")
	if state() != taskFinished {
		t.Fatalf("an update without a framework: b's x %s", state())
	}
}
