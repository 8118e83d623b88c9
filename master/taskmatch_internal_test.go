package master

import (
	"fmt"
	"slices"
	"testing"
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
	b, err := m.Subscribe(&Subscription{Info: &FrameworkInfo{Name: "b"}}, fwOut)
	if err != nil {
		t.Fatal(err)
	}
	report := func(fw string, state TaskState) TaskReport {
		return TaskReport{Info: TaskInfo{ID: "x", Command: []string{"sleep"}}, FrameworkID: fw, Resources: "cpus:1;mem:64", State: state}
	}
	reg := &Registration{Hostname: "h", Resources: "cpus:4;mem:4096", Tasks: []TaskReport{report(b, TaskRunning)}}
	agOut := NewOutbox[ToAgent](func() {}, AgentQueue)
	id, _, err := m.registerAgent(reg, "", agOut)
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
	status := func(fw string, st TaskState, uuid string) {
		m.AgentMessage(id, agOut, &TaskStatus{TaskID: "x", FrameworkID: fw, State: st, UUID: uuid, HasExitCode: true})
	}

	status("a", TaskFinished, "u1")
	if got := sent(); got != "[ack a/x u1]" || state() != TaskRunning || len(fwOut.Take()) != 0 {
		t.Fatalf("a's end: sent %s, b's x %s", got, state())
	}
	status("a", TaskRunning, "u2")
	if got := sent(); got != "[kill a/x ack a/x u2]" || state() != TaskRunning {
		t.Fatalf("a's live x: sent %s, b's x %s", got, state())
	}
	reg.AgentID = id
	reg.Tasks = []TaskReport{report("a", TaskRunning), report(b, TaskRunning)}
	agOut = NewOutbox[ToAgent](func() {}, AgentQueue)
	_, kill, err := m.registerAgent(reg, "", agOut)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kill, []KillTask{{TaskID: "x", FrameworkID: "a"}}) || state() != TaskRunning {
		t.Fatalf("re-registration: kill %v, b's x %s", kill, state())
	}
	status(b, TaskRunning, "u3")
	if ev := fwOut.Take(); len(ev) != 1 || ev[0].(*TaskStatus).UUID != "u3" || ev[0].(*TaskStatus).FrameworkID != b {
		t.Fatalf("b's own update: b heard %v", ev)
	}
	// An older agent names no framework: matched by the task ID.
	status("", TaskFinished, "u4")
	if state() != TaskFinished {
		t.Fatalf("an update without a framework: b's x %s", state())
	}
}
