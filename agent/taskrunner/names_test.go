package taskrunner

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
)

// memAgent is a fake agent keeping containers in memory, with the real
// agent's rule that names are unique among all its containers (exited
// ones included, until removed): what made tasks of one ID from two
// frameworks collide. Containers exit when the test says so.
type memAgent struct {
	mu   sync.Mutex
	cs   []*agent.Container
	exit map[string]chan struct{}
	n    int
}

func newMemAgent() *memAgent { return &memAgent{exit: map[string]chan struct{}{}} }

func (m *memAgent) Launch(_ context.Context, spec agent.Spec) (*agent.Container, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.cs {
		if c.Name == spec.Name {
			return nil, fmt.Errorf("run: name %q: %w", spec.Name, agent.ErrNameInUse)
		}
	}
	m.n++
	c := &agent.Container{ID: fmt.Sprintf("c%d", m.n), Name: spec.Name, Labels: spec.Labels, State: agent.StateRunning,
		CreatedAt: time.Unix(int64(m.n), 0)}
	m.cs = append(m.cs, c)
	m.exit[c.ID] = make(chan struct{})
	return c, nil
}

func (m *memAgent) resolveLocked(ref string) *agent.Container {
	for _, c := range m.cs {
		if c.ID == ref || c.Name == ref {
			return c
		}
	}
	return nil
}

// end makes container id exit with code.
func (m *memAgent) end(id string, code int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.resolveLocked(id)
	if c.State == agent.StateExited {
		return
	}
	c.State, c.Exit = agent.StateExited, &agent.ExitStatus{Code: code}
	close(m.exit[c.ID])
}

func (m *memAgent) Wait(ctx context.Context, ref string) (*agent.Container, error) {
	m.mu.Lock()
	c := m.resolveLocked(ref)
	if c == nil {
		m.mu.Unlock()
		return nil, agent.ErrNotFound
	}
	ch := m.exit[c.ID]
	m.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return m.Get(c.ID)
}

func (m *memAgent) Kill(_ context.Context, ref string, _ time.Duration) (*agent.Container, error) {
	m.mu.Lock()
	c := m.resolveLocked(ref)
	m.mu.Unlock()
	if c == nil {
		return nil, agent.ErrNotFound
	}
	if c.State == agent.StateExited {
		return nil, agent.ErrNotRunning
	}
	m.end(c.ID, 137)
	return m.Get(c.ID)
}

func (m *memAgent) Get(ref string) (*agent.Container, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.resolveLocked(ref)
	if c == nil {
		return nil, agent.ErrNotFound
	}
	cp := *c
	return &cp, nil
}

func (m *memAgent) List() []*agent.Container {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*agent.Container
	for _, c := range m.cs {
		cp := *c
		out = append(out, &cp)
	}
	return out
}

func (m *memAgent) ResizeLabeled(context.Context, string, agent.Update, map[string]string) (*agent.Container, error) {
	return nil, agent.ErrNotFound
}

func (m *memAgent) Oversubscription() (agent.Oversubscription, bool) {
	return agent.Oversubscription{}, false
}

func waitState(t *testing.T, up *statuses, id string, want pb.TaskState) {
	t.Helper()
	for {
		select {
		case st := <-up.ch:
			if st.TaskID == id && st.State == want {
				return
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no %s for %s", want, id)
		}
	}
}

// memRunner is a runner on a memAgent, its statuses in up, closed at the
// test's end, and resources for a task.
func memRunner(t *testing.T) (*memAgent, *statuses, *Runner, resources.Resources) {
	a := newMemAgent()
	up := &statuses{ch: make(chan masterlink.Status, 64)}
	r := New(context.Background(), a, nil)
	r.SetUpdater(up)
	t.Cleanup(r.Close)
	return a, up, r, resources.MustParse("cpus:1;mem:64")
}

// TestTaskIDsPerFramework (issue 14): a task ID another framework used on
// this agent, whose container is still kept, launches (before: `name
// already in use`); the agent reports the task once, the new one, and a
// kill reaches the new container, not the old.
func TestTaskIDsPerFramework(t *testing.T) {
	a, up, r, res := memRunner(t)
	if err := r.LaunchTask(context.Background(), masterlink.Task{ID: "x", FrameworkID: "fw-a", Resources: res, Command: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	waitState(t, up, "x", pb.TaskState_TASK_RUNNING)
	a.end("c1", 0)
	waitState(t, up, "x", pb.TaskState_TASK_FINISHED)
	if err := r.LaunchTask(context.Background(), masterlink.Task{ID: "x", FrameworkID: "fw-b", Resources: res, Command: []string{"true"}}); err != nil {
		t.Fatalf("launch of another framework's task x: %v", err)
	}
	waitState(t, up, "x", pb.TaskState_TASK_RUNNING)
	snaps, err := r.Tasks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 1 || snaps[0].Task.FrameworkID != "fw-b" || snaps[0].State != pb.TaskState_TASK_RUNNING {
		t.Fatalf("tasks %+v, want fw-b's x running only", snaps)
	}
	if err := r.KillTask(context.Background(), "fw-b", "x"); err != nil {
		t.Fatal(err)
	}
	waitState(t, up, "x", pb.TaskState_TASK_KILLED)
	if c, _ := a.Get("c2"); c.State != agent.StateExited || c.Labels[LabelFramework] != "fw-b" {
		t.Fatalf("fw-b's container %+v not killed", c)
	}
	// A runner restarted on the agent (Adopt) finds the tasks by label.
	r2 := New(context.Background(), a, nil)
	defer r2.Close()
	if got := r2.ref(taskKey{"fw-b", "x"}); got != "c2" {
		t.Fatalf("restarted runner resolves x to %s, want c2 (the newest)", got)
	}
}

// TestContainerName: per framework, within the agent's 63-byte names, and
// deterministic.
func TestContainerName(t *testing.T) {
	a, b := ContainerName("fw-a", "web-1"), ContainerName("fw-b", "web-1")
	if a == b || !strings.HasPrefix(a, "web-1.") || a != ContainerName("fw-a", "web-1") {
		t.Fatalf("names %q %q", a, b)
	}
	long := strings.Repeat("a", 63)
	n1, n2 := ContainerName("fw", long), ContainerName("fw", long[:62]+"b")
	if len(n1) > 63 || n1 == n2 || !agentNameOK(n1) || !agentNameOK(n2) {
		t.Fatalf("long names %q %q", n1, n2)
	}
}

func agentNameOK(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i, r := range s {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("_.-", r)) {
			return false
		}
	}
	return true
}

// TestCommandsNameTheirFramework (issue 30): two frameworks' tasks of one
// ID on the agent, fw-a's ended and fw-b's running: a kill for fw-a's
// leaves fw-b's running (before, the runner kept one record per task ID
// and killed the container the ID last named); every status carries its
// framework; an older master's kill (no framework) still reaches the
// task of that ID that runs; an ended task is reported with its end.
func TestCommandsNameTheirFramework(t *testing.T) {
	a, up, r, res := memRunner(t)
	next := func(want pb.TaskState) masterlink.Status {
		t.Helper()
		for {
			select {
			case st := <-up.ch:
				if st.State == want {
					return st
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no %s", want)
			}
		}
	}
	if err := r.LaunchTask(context.Background(), masterlink.Task{ID: "x", FrameworkID: "fw-a", Resources: res, Command: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if st := next(pb.TaskState_TASK_RUNNING); st.FrameworkID != "fw-a" {
		t.Fatalf("RUNNING of fw-a's x: %+v", st)
	}
	a.end("c1", 3)
	if st := next(pb.TaskState_TASK_FAILED); st.FrameworkID != "fw-a" || st.ExitCode == nil || *st.ExitCode != 3 {
		t.Fatalf("end of fw-a's x: %+v", st)
	}
	if err := r.LaunchTask(context.Background(), masterlink.Task{ID: "x", FrameworkID: "fw-b", Resources: res, Command: []string{"sleep"}}); err != nil {
		t.Fatal(err)
	}
	if st := next(pb.TaskState_TASK_RUNNING); st.FrameworkID != "fw-b" {
		t.Fatalf("RUNNING of fw-b's x: %+v", st)
	}
	if err := r.KillTask(context.Background(), "fw-a", "x"); err != nil {
		t.Fatal(err)
	}
	if c, _ := a.Get("c2"); c.State != agent.StateRunning {
		t.Fatalf("fw-b's x is %s after a kill of fw-a's", c.State)
	}
	if err := r.UpdateTask(context.Background(), "fw-a", "x", res); err == nil {
		t.Fatal("a resize of fw-a's ended x reached a container")
	}
	if err := r.KillTask(context.Background(), "", "x"); err != nil {
		t.Fatal(err)
	}
	if st := next(pb.TaskState_TASK_KILLED); st.FrameworkID != "fw-b" {
		t.Fatalf("a kill by ID alone ended %+v, want fw-b's running x", st)
	}
	snaps, err := r.Tasks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 1 || snaps[0].Task.FrameworkID != "fw-b" || snaps[0].State != pb.TaskState_TASK_KILLED ||
		snaps[0].Reason != ReasonKilled || snaps[0].ExitCode == nil || *snaps[0].ExitCode != 137 {
		t.Fatalf("tasks %+v, want fw-b's x KILLED with its reason and exit code", snaps)
	}
}
