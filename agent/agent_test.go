package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
)

func newTestAgent(t *testing.T, rt *fakeRuntime, dir string, res Resources, ret Retention) *Agent {
	t.Helper()
	a, err := New(Options{StateDir: dir, Runtime: rt, Resources: res, Retention: ret})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func spec(name string, milli, mem int64) Spec {
	return Spec{Name: name, Command: []string{"/bin/true"}, Resources: Resources{MilliCPUs: milli, MemMiB: mem}}
}

func checkpointFiles(t *testing.T, dir string) []string {
	t.Helper()
	return testutil.DirNames(t, filepath.Join(dir, "checkpoint"))
}

func TestLaunchAccountingAndErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rt := newFakeRuntime(t.TempDir())
	a := newTestAgent(t, rt, dir, Resources{MilliCPUs: 2000, MemMiB: 1024}, Retention{})

	c, err := a.Launch(ctx, spec("web", 1500, 512))
	if err != nil {
		t.Fatal(err)
	}
	if c.State != StateRunning || len(c.ID) != 12 || c.Name != "web" {
		t.Fatalf("launched %+v", c)
	}
	if got := a.Info().Free; got != (Resources{MilliCPUs: 500, MemMiB: 512}) {
		t.Fatalf("free = %v", got)
	}

	_, err = a.Launch(ctx, spec("big", 4000, 100))
	var ire *InsufficientResourcesError
	if !errors.As(err, &ire) || !errors.Is(err, ErrInsufficientResources) {
		t.Fatalf("want insufficient resources, got %v", err)
	}
	if want := "insufficient resources: asked cpus:4, free cpus:0.5"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not contain %q", err, want)
	}

	if _, err := a.Launch(ctx, spec("web", 100, 10)); !errors.Is(err, ErrNameInUse) || !strings.Contains(err.Error(), `"web"`) {
		t.Fatalf("duplicate name: got %v", err)
	}
	for _, bad := range []Spec{
		{Command: nil, Resources: Resources{MilliCPUs: 100, MemMiB: 10}},
		spec("bad name!", 100, 10),
		spec("x", 0, 10),
		spec("x", 100, 0),
		{Name: "x", Command: []string{"a"}, Env: []string{"NOEQUALS"}, Resources: Resources{MilliCPUs: 100, MemMiB: 10}},
		{Name: "x", Command: []string{"a"}, Rootfs: "/nonexistent-rootfs", Resources: Resources{MilliCPUs: 100, MemMiB: 10}},
	} {
		if _, err := a.Launch(ctx, bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("spec %+v: want invalid argument, got %v", bad, err)
		}
	}

	rt.launchErr = ErrCommandNotFound
	if _, err := a.Launch(ctx, spec("nocmd", 100, 10)); !errors.Is(err, ErrCommandNotFound) {
		t.Fatalf("want command not found, got %v", err)
	}
	rt.launchErr = nil
	if got := checkpointFiles(t, dir); len(got) != 1 || got[0] != c.ID+".json" {
		t.Fatalf("failed launches left checkpoint files: %v", got)
	}
	if got := a.Info().Used; got != (Resources{MilliCPUs: 1500, MemMiB: 512}) {
		t.Fatalf("used = %v after failed launches", got)
	}
	if len(a.List()) != 1 {
		t.Fatalf("list: %d containers", len(a.List()))
	}
	if _, err := a.Get("nope"); !errors.Is(err, ErrNotFound) || err.Error() != `container "nope" not found` {
		t.Fatalf("get unknown: %v", err)
	}
}

func TestExitWaitKillResizeDestroy(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rt := newFakeRuntime(t.TempDir())
	a := newTestAgent(t, rt, dir, Resources{MilliCPUs: 2000, MemMiB: 1024}, Retention{})

	c, err := a.Launch(ctx, spec("job", 1000, 256))
	if err != nil {
		t.Fatal(err)
	}
	rt.finish(c.ID, &ExitStatus{Code: 3})
	w, err := a.Wait(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if w.State != StateExited || w.Exit == nil || w.Exit.Code != 3 {
		t.Fatalf("waited: %+v", w)
	}
	if got := a.Info().Used; got != (Resources{}) {
		t.Fatalf("used after exit = %v", got)
	}
	if _, err := a.Kill(ctx, c.ID, time.Second); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("kill exited: %v", err)
	}
	if _, err := a.Resize(ctx, c.ID, Update{MemMiB: 10}); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("resize exited: %v", err)
	}

	d, err := a.Launch(ctx, spec("svc", 500, 256))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Resize(ctx, d.ID, Update{MilliCPUs: 3000}); !errors.Is(err, ErrInsufficientResources) {
		t.Fatalf("resize beyond total: %v", err)
	}
	r, err := a.Resize(ctx, d.ID[:6], Update{MilliCPUs: 2000, MemMiB: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if r.Limits.MilliCPUs != 2000 || r.Limits.MemoryBytes != 1<<30 || rt.containers[d.ID].limits.MilliCPUs != 2000 {
		t.Fatalf("resized: %+v", r.Limits)
	}
	if got := a.Info().Free; got != (Resources{}) {
		t.Fatalf("free after resize = %v", got)
	}
	if err := a.Destroy(ctx, d.ID, false); !errors.Is(err, ErrRunning) {
		t.Fatalf("destroy running without force: %v", err)
	}
	k, err := a.Kill(ctx, "svc", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if k.Exit == nil || k.Exit.Signal != 9 || k.Exit.Message != "grace 2s" {
		t.Fatalf("killed: %+v", k.Exit)
	}
	for _, id := range []string{c.ID, d.ID} {
		if err := a.Destroy(ctx, id, false); err != nil {
			t.Fatal(err)
		}
	}
	if got := checkpointFiles(t, dir); len(got) != 0 {
		t.Fatalf("checkpoint left after destroy: %v", got)
	}
	if len(rt.containers) != 0 {
		t.Fatalf("runtime still has %d containers", len(rt.containers))
	}
	// The name is free again.
	if _, err := a.Launch(ctx, spec("job", 100, 10)); err != nil {
		t.Fatal(err)
	}
}

func TestRecover(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rt := newFakeRuntime(t.TempDir())
	res := Resources{MilliCPUs: 4000, MemMiB: 4096}
	a, err := New(Options{StateDir: dir, Runtime: rt, Resources: res})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	id := a.ID()
	if _, err := New(Options{StateDir: dir, Runtime: rt, Resources: res}); !errors.Is(err, ErrAgentRunning) {
		t.Fatalf("second agent on the same state dir: %v", err)
	}
	running, _ := a.Launch(ctx, spec("running", 1000, 100))
	exits, _ := a.Launch(ctx, spec("exits", 1000, 100))
	vanishes, _ := a.Launch(ctx, spec("vanishes", 1000, 100))
	a.Close() // the agent goes away; containers keep running

	rt.finish(exits.ID, &ExitStatus{Code: 42})
	rt.mu.Lock()
	delete(rt.containers, vanishes.ID)
	rt.mu.Unlock()
	orphan, _ := rt.Launch(ctx, LaunchSpec{ID: "0123456789ab"})
	// A launch interrupted after its checkpoint, before the runtime saw it.
	st, err := newStore(filepath.Join(dir, "checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.put(&Container{ID: "aaaaaaaaaaaa", Name: "half", State: StateLaunching}); err != nil {
		t.Fatal(err)
	}

	b := newTestAgent(t, rt, dir, res, Retention{})
	if b.ID() != id {
		t.Fatalf("agent id changed: %s → %s", id, b.ID())
	}
	list := b.List()
	if len(list) != 3 {
		t.Fatalf("recovered %d containers: %+v", len(list), list)
	}
	got := map[string]*Container{}
	for _, c := range list {
		got[c.Name] = c
	}
	if c := got["running"]; c == nil || c.State != StateRunning || c.ID != running.ID {
		t.Fatalf("running: %+v", c)
	}
	if c := got["exits"]; c == nil || c.State != StateExited || c.Exit.Code != 42 {
		t.Fatalf("exits: %+v", c)
	}
	if c := got["vanishes"]; c == nil || c.State != StateExited || c.Exit.Reason != ReasonLost {
		t.Fatalf("vanishes: %+v", c)
	}
	if len(rt.destroyed) != 1 || rt.destroyed[0] != orphan.ID {
		t.Fatalf("orphans destroyed: %v", rt.destroyed)
	}
	if _, err := os.Stat(filepath.Join(dir, "checkpoint", "aaaaaaaaaaaa.json")); !os.IsNotExist(err) {
		t.Fatalf("interrupted launch record kept: %v", err)
	}
	if got := b.Info().Used; got != (Resources{MilliCPUs: 1000, MemMiB: 100}) {
		t.Fatalf("used after recovery = %v", got)
	}
	// The recovered running container is watched again.
	rt.finish(running.ID, &ExitStatus{Code: 7})
	w, err := b.Wait(ctx, running.ID)
	if err != nil || w.Exit.Code != 7 {
		t.Fatalf("wait recovered: %+v, %v", w, err)
	}
}

func TestRetention(t *testing.T) {
	ctx := context.Background()
	rt := newFakeRuntime(t.TempDir())
	a := newTestAgent(t, rt, t.TempDir(), Resources{MilliCPUs: 4000, MemMiB: 4096}, Retention{MaxExited: 2})
	var ids []string
	for i := 0; i < 4; i++ {
		c, err := a.Launch(ctx, spec("", 100, 10))
		if err != nil {
			t.Fatal(err)
		}
		rt.finish(c.ID, &ExitStatus{Code: i})
		if _, err := a.Wait(ctx, c.ID); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
		time.Sleep(2 * time.Millisecond) // distinct finish times
	}
	a.collect(ctx)
	list := a.List()
	if len(list) != 2 || list[0].ID != ids[2] || list[1].ID != ids[3] {
		t.Fatalf("kept %d: %+v", len(list), list)
	}
}

func TestParseRetention(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Retention
		ok   bool
	}{
		{"", Retention{}, true},
		{"100", Retention{MaxExited: 100}, true},
		{"24h", Retention{MaxAge: 24 * time.Hour}, true},
		{"10,1h30m", Retention{MaxExited: 10, MaxAge: 90 * time.Minute}, true},
		{"-1", Retention{}, false},
		{"forever", Retention{}, false},
	} {
		got, err := ParseRetention(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("ParseRetention(%q) = %+v, %v", tc.in, got, err)
		}
	}
}

func TestFormat(t *testing.T) {
	for m, want := range map[int64]string{0: "0", 1500: "1.5", 2000: "2", 50: "0.05", 1234: "1.234", -250: "-0.25"} {
		if got := FormatMilli(m); got != want {
			t.Errorf("FormatMilli(%d) = %q, want %q", m, got, want)
		}
	}
	if got := (Resources{MilliCPUs: 1500, MemMiB: 2048}).String(); got != "cpus:1.5;mem:2048" {
		t.Errorf("String = %q", got)
	}
}

func TestStoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s, err := newStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := &Container{ID: "abc", Name: "n", Command: []string{"x"}, State: StateExited, Exit: &ExitStatus{Code: 3, Reason: "r"}}
	if err := s.put(c); err != nil {
		t.Fatal(err)
	}
	// A temp file left by a crash mid-write is ignored and removed.
	if err := os.WriteFile(filepath.Join(dir, ".abc.json.tmp123"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, bad, err := s.load()
	if err != nil || len(got) != 1 || got[0].Name != "n" || got[0].Exit.Code != 3 || len(bad) != 0 {
		t.Fatalf("load: %+v %+v %v", got, bad, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "abc.json")); !strings.Contains(string(b), `"version": 1`) {
		t.Fatalf("record has no version: %s", b)
	}
	if err := os.WriteFile(filepath.Join(dir, "new.json"), []byte(`{"version": 99, "id": "new"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// A newer record is not misread: it is returned as bad, named by its file.
	got, bad, err = s.load()
	if err != nil || len(got) != 1 || len(bad) != 1 || bad[0].ID != "new" ||
		!strings.Contains(bad[0].File, "new.json") || !strings.Contains(bad[0].Err, "new.json: format version 99 is newer") {
		t.Fatalf("newer record: %+v %+v %v", got, bad, err)
	}
}

// TestMonitorSourceTakesTheRuntimesCgroup (issue 35): a container whose
// runtime names its cgroup (made from a warm sandbox on cgroup v2, it
// keeps the sandbox's group) is monitored there, not at
// <CgroupParent>/<ID>.
func TestMonitorSourceTakesTheRuntimesCgroup(t *testing.T) {
	ctx := context.Background()
	rt := newFakeRuntime(t.TempDir())
	rt.cgroupPath = "/brim/warm-0123456789abcdef"
	a, err := New(Options{StateDir: t.TempDir(), Runtime: rt, Resources: Resources{MilliCPUs: 1000, MemMiB: 100}, CgroupParent: "/brim"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Launch(ctx, Spec{Name: "warm", Command: []string{"x"}, Resources: Resources{MilliCPUs: 100, MemMiB: 10}}); err != nil {
		t.Fatal(err)
	}
	infos, err := a.Containers(ctx)
	if err != nil || len(infos) != 1 || infos[0].CgroupPath != rt.cgroupPath {
		t.Fatalf("Containers = %+v, %v; want cgroup %s", infos, err, rt.cgroupPath)
	}
}

func TestKillWithReasonAndMonitorSource(t *testing.T) {
	ctx := context.Background()
	rt := newFakeRuntime(t.TempDir())
	a, err := New(Options{StateDir: t.TempDir(), Runtime: rt, Resources: Resources{MilliCPUs: 1000, MemMiB: 100}, CgroupParent: "/brim"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := a.Launch(ctx, Spec{Name: "be", Command: []string{"x"}, Resources: Resources{MilliCPUs: 100, MemMiB: 10}, Revocable: true})
	if err != nil {
		t.Fatal(err)
	}
	infos, err := a.Containers(ctx)
	if err != nil || len(infos) != 1 || infos[0].CgroupPath != "/brim/"+c.ID || !infos[0].Revocable {
		t.Fatalf("Containers = %+v, %v", infos, err)
	}
	if st, err := a.Usage(ctx, c.ID); err != nil || st.MemLimitBytes != 10<<20 {
		t.Fatalf("Usage = %+v, %v", st, err)
	}
	k, err := a.KillWithReason(ctx, "be", 0, "preempted", "qos: interference")
	if err != nil {
		t.Fatal(err)
	}
	if k.Exit.Reason != "preempted" || k.Exit.Message != "qos: interference" {
		t.Fatalf("exit = %+v", k.Exit)
	}
	if infos, _ := a.Containers(ctx); len(infos) != 0 {
		t.Fatalf("exited container listed: %+v", infos)
	}
}

// TestKillOfAContainerThatDoesNotExit: a kill whose container does not
// exit (a process SIGKILL cannot end yet: uninterruptible sleep on a hung
// disk, or frozen on cgroup v1) returns ErrStillExiting after its grace
// and KillExitTimeout, keeps the container's record and its kill reason,
// and the exit is recorded when it comes. A forced destroy returns the
// same error and leaves the container. Before, both waited as long as
// their caller would (forever for `brim container rm -f`).
func TestKillOfAContainerThatDoesNotExit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rt := newFakeRuntime(t.TempDir())
	a, err := New(Options{StateDir: t.TempDir(), Runtime: rt, Resources: Resources{MilliCPUs: 1000, MemMiB: 100},
		KillExitTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	c, err := a.Launch(ctx, spec("stuck", 100, 10))
	if err != nil {
		t.Fatal(err)
	}
	rt.heldKills = make(chan string, 2)
	start := time.Now()
	_, err = a.KillWithReason(ctx, c.ID, 0, "preempted", "test")
	if !errors.Is(err, ErrStillExiting) || ctx.Err() != nil {
		t.Fatalf("kill of a container that does not exit: %v after %s, want ErrStillExiting", err, time.Since(start))
	}
	if err := a.Destroy(ctx, c.ID, true); !errors.Is(err, ErrStillExiting) {
		t.Fatalf("forced destroy: %v, want ErrStillExiting", err)
	}
	if got, err := a.Get(c.ID); err != nil || got.State != StateRunning {
		t.Fatalf("after the kills: %+v, %v; want the container still listed, running", got, err)
	}
	rt.finish(c.ID, &ExitStatus{Code: 137, Signal: 9, Reason: "killed"})
	got, err := a.Wait(ctx, c.ID)
	if err != nil || got.Exit == nil || got.Exit.Reason != "preempted" {
		t.Fatalf("exit = %+v, %v; want recorded with the kill's reason", got, err)
	}
}
