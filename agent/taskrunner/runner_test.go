package taskrunner

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/internal/exitstatus"
	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/qos"
	"github.com/brimnode/brim/resources"
)

func TestTerminalPreempted(t *testing.T) {
	c := &agent.Container{ID: "c1", Name: "t1", Labels: map[string]string{LabelTask: "t1"},
		Exit: &agent.ExitStatus{Code: 137, Signal: 9, Reason: agent.ReasonPreempted, Message: "preempted"}}
	st := finalStatus(c, false)
	if st.State != pb.TaskState_TASK_KILLED || st.Reason != "CONTAINER_PREEMPTED" || st.Message != "preempted" || st.ExitCode == nil {
		t.Fatalf("preempted container: %+v", st)
	}
	// A kill the framework asked for stays KILLED_BY_FRAMEWORK.
	if st := finalStatus(c, true); st.Reason != ReasonKilled {
		t.Fatalf("framework kill: %+v", st)
	}
}

func TestTerminal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		exit   *agent.ExitStatus
		state  pb.TaskState
		reason string
		msg    string
	}{
		{"unknown exit", nil, pb.TaskState_TASK_LOST, ReasonContainerLost, "exit status unknown"},
		{"success", &agent.ExitStatus{}, pb.TaskState_TASK_FINISHED, ReasonCommandExited, "command exited with code 0"},
		{"failure", &agent.ExitStatus{Code: 3, Message: "boom"}, pb.TaskState_TASK_FAILED, ReasonCommandExited, "command exited with code 3: boom"},
		{"signal", &agent.ExitStatus{Code: 137, Signal: 9}, pb.TaskState_TASK_FAILED, ReasonCommandExited, "command killed by signal 9"},
		{"oom", &agent.ExitStatus{Code: 137, Signal: 9, OOMKilled: true}, pb.TaskState_TASK_FAILED, ReasonMemoryLimit, "memory limit exceeded"},
		{"lost", &agent.ExitStatus{Reason: agent.ReasonLost, Message: "gone"}, pb.TaskState_TASK_LOST, ReasonContainerLost, "gone"},
		{"disk limit", &agent.ExitStatus{Code: 137, Signal: 9, Reason: agent.ReasonDiskLimit, Message: "wrote 70 MiB, over 64 MiB"},
			pb.TaskState_TASK_FAILED, ReasonDiskLimit, "disk limit exceeded: wrote 70 MiB, over 64 MiB"},
		{"shim lost", &agent.ExitStatus{Code: 137, Signal: 9, Reason: "shim-lost", Message: "the shim died without recording the exit status; the container was killed"},
			pb.TaskState_TASK_FAILED, ReasonContainerLost, "the container runtime lost the task: the shim died without recording the exit status; the container was killed"},
		// The containerizer's escalation of a hung shim: its SIGKILL is the
		// runtime's, not the command's (it used to say COMMAND_EXITED
		// "command killed by signal 9").
		{"shim unresponsive", &agent.ExitStatus{Code: 137, Signal: 9, Reason: "shim-unresponsive", Message: "the shim stopped answering (3 probes in a row); the shim and the container were killed"},
			pb.TaskState_TASK_FAILED, ReasonContainerLost, "the container runtime lost the task: the shim stopped answering (3 probes in a row); the shim and the container were killed"},
		{"killed on the agent", &agent.ExitStatus{Code: 143, Signal: 15, Reason: "killed", Message: "killed on request"},
			pb.TaskState_TASK_FAILED, ReasonCommandExited, "command killed by signal 15: killed on request"},
		{"memory limit", &agent.ExitStatus{Code: 137, Signal: 9, OOMKilled: true, Reason: "memory-limit"}, pb.TaskState_TASK_FAILED, ReasonMemoryLimit, "memory limit exceeded"},
		{"unknown reason", &agent.ExitStatus{Code: 137, Signal: 9, Reason: "from-a-newer-shim", Message: "m"},
			pb.TaskState_TASK_FAILED, "", `the container ended with exit reason "from-a-newer-shim", which this agent does not know (code 137): m`},
	} {
		c := &agent.Container{ID: "c", Labels: map[string]string{LabelTask: "t"}, Exit: tc.exit}
		st := finalStatus(c, false)
		if st.TaskID != "t" || st.State != tc.state || st.Reason != tc.reason || st.Message != tc.msg {
			t.Errorf("%s: %+v, want %s %s %q", tc.name, st, tc.state, tc.reason, tc.msg)
		}
	}
}

// TestEveryExitReasonMaps: the table covers the whole vocabulary and
// nothing else, every entry names a task reason of the wire, and no reason
// but a plain or requested end of the command claims COMMAND_EXITED. A
// reason unknown to this build ends the task FAILED without a reason or
// an exit code it cannot vouch for.
func TestEveryExitReasonMaps(t *testing.T) {
	known := map[exitstatus.Reason]bool{}
	for _, r := range exitstatus.Reasons() {
		known[r] = true
		end, ok := taskEnds[r]
		if !ok {
			t.Errorf("exit reason %q has no task end", r)
			continue
		}
		if _, ok := pb.TaskReason_value[end.Reason]; !ok || end.Reason == "" {
			t.Errorf("exit reason %q maps to task reason %q, not one of the wire's", r, end.Reason)
		}
		if !end.State.Terminal() {
			t.Errorf("exit reason %q maps to %s, not a terminal state", r, end.State)
		}
		command := r == exitstatus.ReasonNone || r == exitstatus.ReasonKilled
		if (end.Reason == ReasonCommandExited) != command || end.Command != command {
			t.Errorf("exit reason %q: task end %+v; only a command's own end is COMMAND_EXITED", r, end)
		}
		c := &agent.Container{Labels: map[string]string{LabelTask: "t"}, Exit: &agent.ExitStatus{Code: 137, Signal: 9, Reason: r, Message: "m"}}
		if st := finalStatus(c, false); st.State != end.State || st.Reason != end.Reason || st.Message == "" {
			t.Errorf("exit reason %q: status %+v, want %s %s with a message", r, st, end.State, end.Reason)
		}
	}
	for r := range taskEnds {
		if !known[r] {
			t.Errorf("task end for %q, which is no exit reason", r)
		}
	}
	c := &agent.Container{Labels: map[string]string{LabelTask: "t"}, Exit: &agent.ExitStatus{Code: 137, Signal: 9, Reason: "new-reason"}}
	st := finalStatus(c, false)
	if st.State != pb.TaskState_TASK_FAILED || st.Reason == ReasonCommandExited || st.ExitCode != nil || !strings.Contains(st.Message, `"new-reason"`) {
		t.Errorf("unknown exit reason: %+v", st)
	}
	if string(exitstatus.ReasonPreempted) != qos.ReasonPreempted || qos.ReasonPreempted != ReasonPreempted {
		t.Errorf("preempted: exit reason %q, qos %q, task reason %q: one string", exitstatus.ReasonPreempted, qos.ReasonPreempted, ReasonPreempted)
	}
}

func TestCorrectionsOf(t *testing.T) {
	at := time.Unix(100, 0)
	throttle := qos.Correction{Type: qos.Throttle, ContainerID: "c1", CPUQuota: 200, Reason: "r",
		Trigger: qos.Trigger{Signal: "cpu-throttling", Victim: "lc", Value: 0.5, Baseline: 0.1, Threshold: 0.3}}
	kill := qos.Correction{Type: qos.Kill, ContainerID: "c2", Trigger: qos.Trigger{Signal: "load", Value: 3, Threshold: 1}}
	failed := qos.Correction{Type: qos.Kill, ContainerID: "c3"}
	st := agent.Oversubscription{
		Active: []qos.Correction{throttle},
		Recent: []qos.Applied{{Correction: throttle, At: at}, {Correction: kill, At: at.Add(time.Second)}, {Correction: failed, At: at, Err: qos.ErrInvalidOption}},
	}
	cs := []*agent.Container{{ID: "c1", Name: "t1", Labels: map[string]string{LabelTask: "t1"}}, {ID: "c9", Name: "own"}}
	got := correctionsOf(st, cs)
	if len(got) != 2 {
		t.Fatalf("corrections: %v, want the throttle and the successful kill", got)
	}
	th, k := got[0], got[1]
	if th.Type != "THROTTLE" || th.ContainerId != "c1" || th.TaskId != "t1" || th.CpuQuotaMilli != 200 || !th.Active ||
		th.Signal != "cpu-throttling" || th.Victim != "lc" || th.Baseline != 0.1 || th.AppliedUnixNano != at.UnixNano() {
		t.Errorf("throttle: %v", th)
	}
	if k.Type != "KILL" || k.ContainerId != "c2" || k.TaskId != "" || k.Active || k.Signal != "load" || k.AppliedUnixNano != at.Add(time.Second).UnixNano() {
		t.Errorf("kill: %v", k)
	}
	if d := describeCorrection(kill); !strings.Contains(d, "trigger load 3 (threshold 1)") {
		t.Errorf("describe kill: %q", d)
	}
	if d := describeCorrection(throttle); !strings.Contains(d, "cpu-throttling of lc 0.5 (baseline 0.1, threshold 0.3): r") {
		t.Errorf("describe throttle: %q", d)
	}
}

// slowAgent is a fake agent whose Launch blocks until released, to place
// a kill inside the launch; the rest of the runner's contract with the
// agent is exercised against the real binary by the integration tests.
type slowAgent struct {
	entered, release chan struct{}

	mu      sync.Mutex
	c       *agent.Container
	killed  int
	exitted chan struct{}
}

func (s *slowAgent) Launch(_ context.Context, spec agent.Spec) (*agent.Container, error) {
	close(s.entered)
	<-s.release
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c = &agent.Container{ID: "c-" + spec.Name, Name: spec.Name, Labels: spec.Labels, State: agent.StateRunning, Pid: 42}
	return s.c, nil
}

func (s *slowAgent) Kill(_ context.Context, ref string, _ time.Duration) (*agent.Container, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil {
		return nil, fmt.Errorf("container %s: %w", ref, agent.ErrNotFound)
	}
	s.killed++
	if s.c.State == agent.StateRunning {
		s.c.State, s.c.Exit = agent.StateExited, &agent.ExitStatus{Code: 137, Signal: 9}
		close(s.exitted)
	}
	return s.c, nil
}

func (s *slowAgent) Wait(ctx context.Context, _ string) (*agent.Container, error) {
	select {
	case <-s.exitted:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c, nil
}

func (s *slowAgent) Get(ref string) (*agent.Container, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil && (ref == s.c.ID || ref == s.c.Name) {
		c := *s.c
		return &c, nil
	}
	return nil, agent.ErrNotFound
}

func (s *slowAgent) List() []*agent.Container { return nil }
func (s *slowAgent) ResizeLabeled(context.Context, string, agent.Update, map[string]string) (*agent.Container, error) {
	return nil, agent.ErrNotFound
}
func (s *slowAgent) Oversubscription() (agent.Oversubscription, bool) {
	return agent.Oversubscription{}, false
}

// statuses records the statuses the runner sends.
type statuses struct {
	mu  sync.Mutex
	got []masterlink.Status
	ch  chan masterlink.Status
}

func (s *statuses) Update(st masterlink.Status) error {
	s.mu.Lock()
	s.got = append(s.got, st)
	s.mu.Unlock()
	s.ch <- st
	return nil
}

// slowRunner is a runner of a slowAgent whose statuses go to up, and
// the resources of a small task.
func slowRunner(t *testing.T) (*slowAgent, *statuses, *Runner, resources.Resources) {
	t.Helper()
	a := &slowAgent{entered: make(chan struct{}), release: make(chan struct{}), exitted: make(chan struct{})}
	up := &statuses{ch: make(chan masterlink.Status, 8)}
	r := New(context.Background(), a, nil)
	r.SetUpdater(up)
	t.Cleanup(r.Close)
	res, err := resources.Parse("cpus:1;mem:64")
	if err != nil {
		t.Fatal(err)
	}
	return a, up, r, res
}

// killedOnce checks that the task went STARTING, RUNNING, KILLED and
// that a killed its container once.
func killedOnce(t *testing.T, a *slowAgent, states []pb.TaskState) {
	t.Helper()
	want := []pb.TaskState{pb.TaskState_TASK_STARTING, pb.TaskState_TASK_RUNNING, pb.TaskState_TASK_KILLED}
	if fmt.Sprint(states) != fmt.Sprint(want) {
		t.Errorf("states %v, want %v", states, want)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.killed != 1 {
		t.Errorf("agent kills: %d, want 1", a.killed)
	}
}

// TestKillDuringLaunch: a kill that arrives while the container is being
// created is acted on once it exists, and the task ends KILLED (not
// LOST: the agent did not know the container when the kill came).
func TestKillDuringLaunch(t *testing.T) {
	a, up, r, res := slowRunner(t)
	launched := make(chan error, 1)
	go func() {
		launched <- r.LaunchTask(context.Background(), masterlink.Task{ID: "t1", FrameworkID: "f", Resources: res})
	}()
	<-a.entered
	if err := r.KillTask(context.Background(), "f", "t1"); err != nil {
		t.Fatalf("kill during launch: %v", err)
	}
	close(a.release)
	if err := <-launched; err != nil {
		t.Fatalf("launch: %v", err)
	}
	var states []pb.TaskState
	for st := range up.ch {
		states = append(states, st.State)
		if st.State == pb.TaskState_TASK_KILLED {
			if st.Reason != ReasonKilled {
				t.Errorf("killed task: %+v", st)
			}
			break
		}
		if st.State == pb.TaskState_TASK_LOST {
			t.Fatalf("task reported lost: %+v", st)
		}
	}
	killedOnce(t, a, states)
}

// TestDuplicateLaunch: a RunTask of a task being launched, or whose
// container runs, leaves the task as it is — no second container, no
// status — and a later kill still finds its container. (A duplicate was
// launched again: the agent refused the container name, the task was
// reported FAILED while it ran, and its record lost the container.)
func TestDuplicateLaunch(t *testing.T) {
	a, up, r, res := slowRunner(t)
	task := masterlink.Task{ID: "t1", FrameworkID: "f", Resources: res}
	launched := make(chan error, 1)
	go func() { launched <- r.LaunchTask(context.Background(), task) }()
	<-a.entered
	if err := r.LaunchTask(context.Background(), task); err != nil { // slowAgent.Launch again would panic
		t.Fatalf("duplicate during the launch: %v", err)
	}
	close(a.release)
	if err := <-launched; err != nil {
		t.Fatalf("launch: %v", err)
	}
	if err := r.LaunchTask(context.Background(), task); err != nil {
		t.Fatalf("duplicate of the running task: %v", err)
	}
	if err := r.KillTask(context.Background(), "f", "t1"); err != nil {
		t.Fatal(err)
	}
	var states []pb.TaskState
	for st := range up.ch {
		states = append(states, st.State)
		if st.State.Terminal() {
			break
		}
	}
	killedOnce(t, a, states)
}

// TestPreemptTask: a task the master preempts is killed like any other
// and reported KILLED with reason CONTAINER_PREEMPTED and the master's
// message naming what needed its resources (before, the agent knew no
// such kill: the framework was told KILLED_BY_FRAMEWORK, "killed").
func TestPreemptTask(t *testing.T) {
	a, up, r, res := slowRunner(t)
	close(a.release)
	if err := r.LaunchTask(context.Background(), masterlink.Task{ID: "t1", FrameworkID: "f", Resources: res}); err != nil {
		t.Fatal(err)
	}
	const msg = "preempted by demand d1: its strict start at 2026-11-25T10:00:00Z is booked on agent a1"
	if err := r.PreemptTask(context.Background(), "f", "t1", msg); err != nil {
		t.Fatal(err)
	}
	var states []pb.TaskState
	for st := range up.ch {
		states = append(states, st.State)
		if st.State.Terminal() {
			if st.Reason != ReasonPreempted || st.Message != msg {
				t.Errorf("preempted task: reason %q message %q", st.Reason, st.Message)
			}
			break
		}
	}
	killedOnce(t, a, states)
}

// TestKillUnknownTask: a kill of a task the agent does not have reports
// it LOST at once.
func TestKillUnknownTask(t *testing.T) {
	a := &slowAgent{entered: make(chan struct{}), release: make(chan struct{}), exitted: make(chan struct{})}
	up := &statuses{ch: make(chan masterlink.Status, 8)}
	r := New(context.Background(), a, nil)
	r.SetUpdater(up)
	defer r.Close()
	if err := r.KillTask(context.Background(), "f", "nope"); err != nil {
		t.Fatal(err)
	}
	if st := <-up.ch; st.TaskID != "nope" || st.State != pb.TaskState_TASK_LOST || st.Reason != ReasonContainerLost {
		t.Errorf("status: %+v", st)
	}
}

func TestAgentResourcesOf(t *testing.T) {
	for _, tc := range []struct {
		text string
		want agent.Resources
		rev  bool
		bad  bool
	}{
		{"cpus:1.5;mem:256", agent.Resources{MilliCPUs: 1500, MemMiB: 256}, false, false},
		{"cpus{REV}:1;mem{REV}:64", agent.Resources{MilliCPUs: 1000, MemMiB: 64}, true, false},
		{"cpus:1", agent.Resources{}, false, true},
		{"cpus{REV}:1;mem:64", agent.Resources{}, false, true},
	} {
		res, err := resources.Parse(tc.text)
		if err != nil {
			t.Fatalf("%s: %v", tc.text, err)
		}
		got, rev, err := agentResourcesOf(res)
		if tc.bad {
			if err == nil {
				t.Errorf("%s accepted", tc.text)
			}
			continue
		}
		if err != nil || got != tc.want || rev != tc.rev {
			t.Errorf("%s: %+v %v %v, want %+v %v", tc.text, got, rev, err, tc.want, tc.rev)
		}
	}
}
