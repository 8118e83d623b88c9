package master

import (
	"errors"
	"fmt"
	"testing"
)

// TestRequestExec: RequestExec lets the framework's principal and one
// MayExecOthers allows for the task's role (the transport's exec_tasks
// ACL, tested with the ACL file in transport) exec into a running task
// (asking the task's agent to open the session), refuses another
// principal before saying whether the task exists, and a task that is not
// running is a conflict (FailedPrecondition), not a malformed request.
func TestRequestExec(t *testing.T) {
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	fwOut := NewOutbox[ToFramework](func() {}, FrameworkQueue)
	fw, err := m.Subscribe(&Subscription{Info: &FrameworkInfo{Name: "f", Roles: []string{"ads"}}}, fwOut)
	if err != nil {
		t.Fatal(err)
	}
	m.frameworks[fw].principal = "ops"
	reg := &Registration{Hostname: "h", Resources: "cpus:4;mem:4096", Tasks: []TaskReport{{
		Info:        TaskInfo{ID: "x", Command: []string{"sleep"}},
		FrameworkID: fw, Resources: "cpus:1;mem:64", State: TaskRunning}}}
	agOut := NewOutbox[ToAgent](func() {}, AgentQueue)
	agent, _, err := m.registerAgent(reg, "", agOut)
	if err != nil {
		t.Fatal(err)
	}
	m.tasks["x"].role = "ads"
	agOut.Take()
	// admin has exec_tasks for role ads only (not ANY).
	may := func(p string) func(role string) error {
		return func(role string) error {
			if p == "admin" && role == "ads" {
				return nil
			}
			return fmt.Errorf("principal %q may not exec_tasks for role %q: %w", p, role, ErrForbidden)
		}
	}
	exec := func(principal, task string) error {
		_, err := m.RequestExec(ExecRequest{Principal: principal, MayExecOthers: may(principal), FrameworkID: fw, TaskID: task, Session: "s-" + principal})
		return err
	}
	for _, p := range []string{"ops", "admin"} {
		if err := exec(p, "x"); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		sent := agOut.Take()
		if o, ok := sent[0].(*OpenExec); len(sent) != 1 || !ok || *o != (OpenExec{Session: "s-" + p, FrameworkID: fw, TaskID: "x"}) {
			t.Fatalf("%s: sent to agent %s: %#v, want one OpenExec", p, agent, sent)
		}
	}
	for _, tc := range []struct {
		principal, task string
		want            error
	}{
		{"dev", "x", ErrForbidden},
		{"dev", "nope", ErrForbidden},
		{"ops", "nope", ErrNotFound},
		{"admin", "nope", ErrForbidden}, // exec_tasks for "ads" only, not ANY
	} {
		if err := exec(tc.principal, tc.task); !errors.Is(err, tc.want) {
			t.Errorf("%s into %s: %v, want %v", tc.principal, tc.task, err, tc.want)
		}
	}
	m.tasks["x"].state = TaskStaging
	if err := exec("ops", "x"); !errors.Is(err, ErrConflict) || errors.Is(err, ErrInvalid) {
		t.Errorf("exec into a staging task: %v, want ErrConflict", err)
	}
	m.agents[agent].out = nil
	m.tasks["x"].state = TaskRunning
	if err := exec("ops", "x"); !errors.Is(err, ErrClosed) {
		t.Errorf("exec into a task of a disconnected agent: %v, want ErrClosed", err)
	}
	if sent := agOut.Take(); len(sent) != 0 {
		t.Errorf("refused execs sent %#v to the agent", sent)
	}
}
