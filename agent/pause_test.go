package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/qos"
)

// PIDs makes fakeCgroups an agent's ContainerCgroups.
func (f *fakeCgroups) PIDs(_ context.Context, id string) ([]int, error) {
	return []int{os.Getpid()}, nil
}

// newPauseAgent is an agent with oversubscription whose QoS actuator and
// pause share cg, over state dir dir and runtime rt.
func newPauseAgent(t *testing.T, dir string, rt *fakeRuntime, cg *fakeCgroups) *Agent {
	t.Helper()
	return newOversubAgentAt(t, dir, rt, fixed(t, "cpus:1;mem:200"), "fixed", cg, cg)
}

// A user's pause wins over the QoS controller: its thaw leaves a paused
// container frozen, an unpause leaves a QoS freeze in force, a kill
// thaws, and an agent restart keeps the pause.
func TestPauseWinsOverQoS(t *testing.T) {
	ctx := context.Background()
	dir, rt, cg := t.TempDir(), newFakeRuntime(t.TempDir()), &fakeCgroups{}
	a := newPauseAgent(t, dir, rt, cg)
	c, err := a.Launch(ctx, Spec{Command: []string{"x"}, Resources: Resources{MilliCPUs: 100, MemMiB: 10}, Revocable: true})
	if err != nil {
		t.Fatal(err)
	}
	trig := qos.Trigger{Signal: qos.SignalAppLatency, Victim: "lc"}
	apply := func(typ qos.Type) {
		t.Helper()
		if err := a.over.applier.Apply(ctx, []qos.Correction{{Type: typ, ContainerID: c.ID, Reason: "test", Trigger: trig}}); err != nil {
			t.Fatal(err)
		}
	}

	// QoS freezes, the user pauses, QoS thaws: still frozen.
	apply(qos.Freeze)
	p, err := a.Pause(ctx, c.ID)
	if err != nil || !p.Paused {
		t.Fatalf("pause: %+v, %v", p, err)
	}
	apply(qos.Thaw)
	if calls := cg.String(); calls != "freeze "+c.ID+", freeze "+c.ID {
		t.Fatalf("the QoS thaw of a paused container thawed it: %s", calls)
	}
	if _, err := a.Pause(ctx, c.ID); !errors.Is(err, ErrPaused) {
		t.Errorf("second pause: %v", err)
	}
	// The user unpauses: thawed (no QoS freeze in force any more).
	if u, err := a.Unpause(ctx, c.ID); err != nil || u.Paused {
		t.Fatalf("unpause: %+v, %v", u, err)
	}
	if calls := cg.String(); !strings.HasSuffix(calls, "thaw "+c.ID) {
		t.Fatalf("unpause did not thaw: %s", calls)
	}
	if _, err := a.Unpause(ctx, c.ID); !errors.Is(err, ErrNotPaused) {
		t.Errorf("unpause of a running container: %v", err)
	}

	// Paused, then frozen by QoS: an unpause lifts the pause only.
	if _, err := a.Pause(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	apply(qos.Freeze)
	n := len(strings.Split(cg.String(), ", "))
	if _, err := a.Unpause(ctx, c.ID); err != nil || !a.QoSFrozen(c.ID) {
		t.Fatalf("unpause under a QoS freeze: %v, qos frozen %v", err, a.QoSFrozen(c.ID))
	}
	if got := len(strings.Split(cg.String(), ", ")); got != n {
		t.Fatalf("unpause thawed a container a QoS freeze holds: %s", cg.String())
	}
	apply(qos.Thaw)

	// Paused across an agent restart: the new agent's reset of
	// corrections leaves it frozen.
	if _, err := a.Pause(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	a.Close()
	cg2 := &fakeCgroups{}
	b := newPauseAgent(t, dir, rt, cg2)
	if got, err := b.Get(c.ID); err != nil || !got.Paused {
		t.Fatalf("after the agent's restart: %+v, %v", got, err)
	}
	if calls := cg2.String(); strings.Contains(calls, "thaw") {
		t.Fatalf("the restarted agent thawed a paused container: %s", calls)
	}
	// A kill thaws it first, and the pause is over.
	if _, err := b.Kill(ctx, c.ID, 0); err != nil {
		t.Fatal(err)
	}
	if calls := cg2.String(); !strings.Contains(calls, "thaw "+c.ID) {
		t.Fatalf("the kill of a paused container did not thaw it: %s", calls)
	}
	if got, _ := b.Get(c.ID); got.Paused || got.State != StateExited {
		t.Fatalf("killed paused container: %+v", got)
	}
	if _, err := b.Pause(ctx, c.ID); !errors.Is(err, ErrNotRunning) {
		t.Errorf("pause of an exited container: %v", err)
	}
}

// Without a freezer pause and top say so.
func TestPauseNotSupported(t *testing.T) {
	a := newTestAgent(t, newFakeRuntime(t.TempDir()), t.TempDir(), Resources{MilliCPUs: 1000, MemMiB: 100}, Retention{})
	c, err := a.Launch(context.Background(), spec("", 100, 10))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Pause(context.Background(), c.ID); !errors.Is(err, ErrNotSupported) {
		t.Errorf("pause: %v", err)
	}
	if _, err := a.Top(context.Background(), c.ID); !errors.Is(err, ErrNotSupported) {
		t.Errorf("top: %v", err)
	}
}

// Restart runs the spec again under the same ID and name with the same
// sandbox; a failed run again leaves it exited with its sandbox kept,
// which rm removes; a task's container is refused.
func TestRestart(t *testing.T) {
	ctx := context.Background()
	dir, rt := t.TempDir(), newFakeRuntime(t.TempDir())
	a := newTestAgent(t, rt, dir, Resources{MilliCPUs: 1000, MemMiB: 100}, Retention{})
	c, err := a.Launch(ctx, spec("web", 500, 50))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.SandboxDir, "stdout"), []byte("first run\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(c.LogDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.LogDir, "1"), []byte("first log\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := a.Restart(ctx, "web", -1)
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != c.ID || r.Name != "web" || r.State != StateRunning || r.Restarts != 1 || !r.StartedAt.After(c.StartedAt) || r.Exit != nil {
		t.Fatalf("restarted: %+v (before %+v)", r, c)
	}
	if b, err := os.ReadFile(filepath.Join(r.SandboxDir, "stdout")); err != nil || string(b) != "first run\n" {
		t.Fatalf("the new run's sandbox file: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(r.LogDir, "1")); err != nil || string(b) != "first log\n" {
		t.Fatalf("the new run's log: %q, %v", b, err)
	}
	if in := a.Info(); in.Used.MilliCPUs != 500 {
		t.Fatalf("after the restart %s used, want cpus 0.5", in.Used)
	}
	// An exited container is started again; a failed start leaves it
	// exited, its sandbox kept.
	rt.finish(c.ID, &ExitStatus{Code: 0})
	if _, err := a.Wait(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	rt.launchErr = errors.New("no room")
	if _, err := a.Restart(ctx, c.ID, -1); err == nil || !strings.Contains(err.Error(), "no room") {
		t.Fatalf("failed restart: %v", err)
	}
	f, err := a.Get(c.ID)
	if err != nil || f.State != StateExited || f.Exit.Reason != ReasonRestartFailed || f.SandboxDir != a.held(c.ID).sandbox || f.LogDir != a.held(c.ID).log {
		t.Fatalf("after a failed restart: %+v, %v", f, err)
	}
	if b, err := os.ReadFile(filepath.Join(f.SandboxDir, "stdout")); err != nil || string(b) != "first run\n" {
		t.Fatalf("kept sandbox: %q, %v", b, err)
	}
	if in := a.Info(); in.Used.MilliCPUs != 0 {
		t.Fatalf("a failed restart holds %s", in.Used)
	}
	rt.launchErr = nil
	if r, err := a.Restart(ctx, c.ID, -1); err != nil || r.Restarts != 2 {
		t.Fatalf("restart after a failed one: %+v, %v", r, err)
	}
	if _, err := a.Kill(ctx, c.ID, 0); err != nil {
		t.Fatal(err)
	}
	rt.launchErr = errors.New("no room")
	if _, err := a.Restart(ctx, c.ID, -1); err == nil {
		t.Fatal("restart succeeded with a failing runtime")
	}
	if err := a.Destroy(ctx, c.ID, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, restartDir, c.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("rm left the held sandbox: %v", err)
	}
	rt.launchErr = nil
	task, err := a.Launch(ctx, Spec{Command: []string{"x"}, Resources: Resources{MilliCPUs: 100, MemMiB: 10}, Labels: map[string]string{LabelTask: "t1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Restart(ctx, task.ID, 0); !errors.Is(err, ErrTaskContainer) {
		t.Errorf("restart of a task's container: %v", err)
	}
}

// Top reads the processes of the container's cgroup from /proc.
func TestTop(t *testing.T) {
	cg := &fakeCgroups{}
	a, err := New(Options{StateDir: t.TempDir(), Runtime: newFakeRuntime(t.TempDir()), Resources: Resources{MilliCPUs: 1000, MemMiB: 100}, Cgroups: cg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if err := a.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	c, err := a.Launch(context.Background(), spec("", 100, 10))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := a.Top(context.Background(), c.ID)
	if err != nil || len(ps) != 1 || ps[0].Pid != os.Getpid() || ps[0].PPid != os.Getppid() || ps[0].UID != uint32(os.Getuid()) || len(ps[0].Args) == 0 {
		t.Fatalf("Top = %+v, %v", ps, err)
	}
}

// parseStat takes comm between the first '(' and the last ')': a command
// may name itself with spaces and parentheses.
func TestParseStat(t *testing.T) {
	p, err := parseStat([]byte("42 (a (b) c) S 7 42 42 0 -1 4194304 100 0 0 0 250 150 0 0 20 0 1 0 471936 3133440 416\n"))
	if err != nil || p.Comm != "a (b) c" || p.State != "S" || p.PPid != 7 || p.CPU != 4*time.Second {
		t.Fatalf("parseStat = %+v, %v", p, err)
	}
	if _, err := parseStat([]byte("42 (x) S 7")); err == nil {
		t.Error("short stat accepted")
	}
	if uid, err := parseUID([]byte("Name:\tx\nUid:\t1000\t1000\t1000\t1000\n")); err != nil || uid != 1000 {
		t.Errorf("parseUID = %d, %v", uid, err)
	}
}

// A restart's spec is the record's: an image by its ID (the reference
// may name another image by now), its defaults applied already.
func TestRestartSpecFromRecord(t *testing.T) {
	c := &Container{Name: "web", Command: []string{"/entry", "arg"}, Image: "app:1", ImageID: "sha256:abc", ReadWrite: true, DiskMiB: 64,
		Limits: isolator.Limits{MilliCPUs: 500, MemoryBytes: 64 << 20, CPUQuota: true, FlatShares: true}}
	s := c.spec()
	if s.Image != "sha256:abc" || !s.rerun || !s.ReadWrite || s.Resources.DiskMiB != 64 || s.CPUMode != isolator.CPUModeQuota ||
		strings.Join(s.Command, " ") != "/entry arg" {
		t.Errorf("spec() = %+v", s)
	}
}
