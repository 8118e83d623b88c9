package master

import (
	"fmt"
)

// OpenExec asks a task's agent to open exec session Session for
// FrameworkID's task TaskID (the session itself runs on a stream of its
// own: master/transport/exec_grpc.go).
type OpenExec struct{ Session, FrameworkID, TaskID string }

func (*OpenExec) isToAgent() {}

// ExecRequest is a caller's exec into a task.
type ExecRequest struct {
	// Principal is the authenticated caller ("" when the master
	// authenticates nobody).
	Principal string
	// MayExecOthers says whether Principal may run processes in the tasks
	// of frameworks it did not subscribe, for a task's role (the
	// transport's exec_tasks ACL; an error wrapping ErrForbidden says why
	// not). nil: the master authorizes nobody, anyone may.
	MayExecOthers func(role string) error
	FrameworkID   string
	TaskID        string
	Session       string
}

// RequestExec decides whether the caller may run a process in the task,
// and asks the task's agent to open the session. It returns the agent's
// ID: the one whose stream may carry the session. Errors wrap
// ErrForbidden (neither the framework's principal nor allowed by
// MayExecOthers for the task's role), ErrNotFound (an unknown framework
// or task, to callers that may see it), ErrConflict (a task that is not
// running), ErrClosed (its agent is disconnected).
func (m *Master) RequestExec(r ExecRequest) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.execTaskLocked(r)
	if err != nil {
		return "", err
	}
	if t.state != TaskRunning {
		return "", fmt.Errorf("exec in task %s: it is %s, not running: %w", r.TaskID, t.state, ErrConflict)
	}
	ag := m.agents[t.agent]
	if ag == nil || ag.out == nil {
		return "", fmt.Errorf("exec in task %s: its agent %s is disconnected: %w", r.TaskID, t.agent, ErrClosed)
	}
	ag.out.send(&OpenExec{Session: r.Session, FrameworkID: r.FrameworkID, TaskID: r.TaskID})
	return t.agent, nil
}

// execTaskLocked finds the task r names and authorizes the caller for it.
// A caller that is not the framework's principal learns whether a task
// exists only if the exec_tasks ACL allows it every role ("ANY"): an
// unknown task is then ErrNotFound, otherwise ErrForbidden.
func (m *Master) execTaskLocked(r ExecRequest) (*taskEntry, error) {
	f := m.frameworks[r.FrameworkID]
	if f == nil {
		if r.MayExecOthers == nil {
			return nil, fmt.Errorf("exec: framework %s: %w", r.FrameworkID, ErrNotFound)
		}
		if err := r.MayExecOthers(""); err != nil {
			return nil, fmt.Errorf("exec in task %s of framework %s: %w", r.TaskID, r.FrameworkID, err)
		}
		return nil, fmt.Errorf("exec: framework %s: %w", r.FrameworkID, ErrNotFound)
	}
	t := f.tasks[r.TaskID]
	role := ""
	if t != nil {
		role = t.role
	}
	if r.MayExecOthers != nil && r.Principal != f.principal {
		if err := r.MayExecOthers(role); err != nil {
			return nil, fmt.Errorf("exec in task %s of framework %s (principal %q): %w", r.TaskID, r.FrameworkID, f.principal, err)
		}
	}
	if t == nil {
		return nil, fmt.Errorf("exec: task %s of framework %s: %w", r.TaskID, r.FrameworkID, ErrNotFound)
	}
	return t, nil
}

// CheckExecAgent checks that principal, the caller of an agent's exec
// session stream, is the principal agent agentID registered as (with
// agent authentication on: the transport calls it only then).
func (m *Master) CheckExecAgent(agentID, principal string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	owner := m.knownAgents[agentID].Principal
	if ag := m.agents[agentID]; ag != nil && ag.principal != "" {
		owner = ag.principal
	}
	if owner != principal {
		return fmt.Errorf("exec session: principal %q is not agent %s's (%q): %w", principal, agentID, owner, ErrForbidden)
	}
	return nil
}
