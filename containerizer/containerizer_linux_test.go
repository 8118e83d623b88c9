package containerizer

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/executor"
	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
)

func TestLaunchExitCodeAndDestroy(t *testing.T) {
	for name, shim := range map[string]string{"brim": shimBinary, "brim-shim": smallShimBinary} {
		t.Run("shim="+name, func(t *testing.T) { testLaunchExitCodeAndDestroy(t, shim) })
	}
}

func testLaunchExitCodeAndDestroy(t *testing.T, shim string) {
	// A state dir long enough that the control socket's path exceeds
	// sun_path (108 bytes): the shim and the client must cope.
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	e := newEnvWithShim(t, long, shim)
	info := e.launch(Spec{
		Command: []string{"/bin/sh", "-c", "echo out; echo err >&2; exit 7"},
		Limits:  isolator.Limits{MilliCPUs: 100},
	})
	if info.Pid <= 0 || info.ShimPid <= 0 {
		t.Fatalf("after launch: %+v", info)
	}
	// The command may well have exited before Launch returned (the shim
	// reaps it as soon as it ends): then the Info says so, with the status.
	switch info.State {
	case StateRunning:
		if info.Exit != nil {
			t.Errorf("running, with an exit status: %+v", info.Exit)
		}
	case StateExited:
		if info.Exit == nil || info.Exit.Code != 7 {
			t.Errorf("exited at launch, exit status = %+v, want code 7", info.Exit)
		}
	default:
		t.Fatalf("after launch: state %q, want running or exited: %+v", info.State, info)
	}
	if got := e.iso.count(e.iso.isolated, info.ID); got != info.Pid {
		t.Errorf("Isolate got pid %d, want the init %d", got, info.Pid)
	}
	st := e.wait(info.ID)
	if st.Code != 7 || st.Signal != 0 || st.OOMKilled {
		t.Errorf("exit status = %+v, want code 7", st)
	}
	if got := readSandbox(t, info, "stdout"); got != "out\n" {
		t.Errorf("stdout = %q", got)
	}
	if got := readSandbox(t, info, "stderr"); got != "err\n" {
		t.Errorf("stderr = %q", got)
	}
	got, err := e.c.Get(context.Background(), info.ID)
	if err != nil || got.State != StateExited || got.Exit == nil || got.Exit.Code != 7 {
		t.Errorf("Get after exit = %+v, %v", got, err)
	}
	if err := e.c.Signal(context.Background(), info.ID, syscall.SIGTERM); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Signal after exit: %v, want ErrNotRunning", err)
	}
	if err := e.c.Destroy(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
	e.assertGone(info.ID, info.ShimPid)
	if n := e.iso.count(e.iso.cleaned, info.ID); n == 0 {
		t.Error("isolator Cleanup not called")
	}
	if _, err := e.c.Get(context.Background(), info.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Destroy: %v, want ErrNotFound", err)
	}
}

func TestDefaultFilesystemAndHardening(t *testing.T) {
	testutil.RequireRoot(t)
	// A state dir outside /tmp (which the container has its own of), to
	// see that it is hidden.
	stateDir, err := os.MkdirTemp("/var/tmp", "brim-test-state-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(stateDir) })
	e := newEnv(t, stateDir)
	marker := filepath.Join(os.TempDir(), testutil.UniqueName("brim-marker"))
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(marker) })
	script := strings.Join([]string{
		`echo pid=$$`,
		`touch /etc/brim-test 2>/dev/null && echo root=rw || echo root=ro`,
		`touch /usr/brim-test 2>/dev/null && echo usr=rw || echo usr=ro`,
		`echo hi > /tmp/f && echo tmp=$(cat /tmp/f)`,
		`test -e ` + marker + ` && echo hosttmp=visible || echo hosttmp=private`,
		`echo from-container > /mnt/sandbox/hello && echo sandbox=ok`,
		`grep -E '^(NoNewPrivs|Seccomp|CapEff):' /proc/self/status | tr -d '\t' | tr ':' '='`,
		`test -w /proc/sys/kernel/hostname && echo procsys=rw || echo procsys=ro`,
		`echo hostname=$(hostname)`,
		`test -d ` + e.stateDir + ` && echo statedir=$(ls -A ` + e.stateDir + ` | wc -l)`,
	}, "\n")
	info := e.launch(Spec{Command: []string{"sh", "-c", script}, Limits: isolator.Limits{MilliCPUs: 100}})
	if st := e.wait(info.ID); st.Code != 0 {
		t.Fatalf("exit %+v; stderr: %s", st, readSandbox(t, info, "stderr"))
	}
	out := readSandbox(t, info, "stdout")
	want := []string{
		"pid=1", "root=ro", "usr=ro", "tmp=hi", "hosttmp=private", "sandbox=ok",
		"NoNewPrivs=1", "CapEff=0000000020000420", // AUDIT_WRITE, NET_BIND_SERVICE, KILL
		"procsys=ro", "hostname=" + info.ID, "statedir=0",
	}
	if executor.SeccompEnabled {
		want = append(want, "Seccomp=2")
	}
	for _, w := range want {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("container output lacks %q:\n%s", w, out)
		}
	}
	if got := readSandbox(t, info, "hello"); got != "from-container\n" {
		t.Errorf("sandbox file = %q", got)
	}
}

func TestSeccompDeniesDangerousSyscalls(t *testing.T) {
	testutil.SkipUnless(t, executor.SeccompEnabled, "built without the seccomp tag")
	e := newEnv(t, "")
	// unshare(1) with -U asks for a user namespace: denied by the profile
	// even though it needs no capability.
	info := e.launch(Spec{
		Command: []string{"sh", "-c", "unshare -U true 2>&1; echo rc=$?"},
		Limits:  isolator.Limits{MilliCPUs: 100},
	})
	e.wait(info.ID)
	out := readSandbox(t, info, "stdout")
	if !strings.Contains(out, "Operation not permitted") || strings.Contains(out, "rc=0") {
		t.Errorf("unshare -U in a container: %q, want EPERM", out)
	}
}

func TestRootfsDirectory(t *testing.T) {
	e := newEnv(t, "")
	root := busyboxRootfs(t)
	info := e.launch(Spec{
		Command: []string{"sh", "-c", "ls /bin/busybox && touch /bin/x 2>/dev/null || echo ro; echo ok > /mnt/sandbox/f; exit 5"},
		Rootfs:  root,
		Limits:  isolator.Limits{MilliCPUs: 100},
	})
	if st := e.wait(info.ID); st.Code != 5 {
		t.Fatalf("exit %+v; stderr: %s", st, readSandbox(t, info, "stderr"))
	}
	if out := readSandbox(t, info, "stdout"); out != "/bin/busybox\nro\n" {
		t.Errorf("stdout = %q", out)
	}
	if got := readSandbox(t, info, "f"); got != "ok\n" {
		t.Errorf("sandbox file = %q", got)
	}
}

func TestKillWithGrace(t *testing.T) {
	e := newEnv(t, "")
	trap := e.launch(Spec{
		Command: []string{"sh", "-c", "trap 'echo bye; exit 0' TERM; echo ready; while :; do sleep 0.05; done"},
		Limits:  isolator.Limits{MilliCPUs: 100},
	})
	ignore := e.launch(Spec{Command: []string{"sleep", "1000"}, Limits: isolator.Limits{MilliCPUs: 100}})

	ctx := context.Background()
	waitFor(t, func() bool { return strings.Contains(readSandbox(t, trap, "stdout"), "ready") })
	// A generous grace: the trap must end it, not the SIGKILL.
	if err := e.c.Kill(ctx, trap.ID, time.Minute); err != nil {
		t.Fatal(err)
	}
	st := e.wait(trap.ID)
	if st.Code != 0 || st.Signal != 0 || st.Reason != ReasonKilled {
		t.Errorf("trapping task: %+v, want code 0 reason killed", st)
	}
	if out := readSandbox(t, trap, "stdout"); !strings.Contains(out, "bye") {
		t.Errorf("trap did not run: %q", out)
	}

	// sleep as pid 1 has no handler: SIGTERM is ignored, SIGKILL follows.
	if err := e.c.Kill(ctx, ignore.ID, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	st = e.wait(ignore.ID)
	if st.Signal != 9 || st.Code != 137 || st.Reason != ReasonKilled {
		t.Errorf("ignoring task: %+v, want SIGKILL", st)
	}
	if err := e.c.Kill(ctx, ignore.ID, 0); !errors.Is(err, ErrNotRunning) {
		t.Errorf("second Kill: %v, want ErrNotRunning", err)
	}
}

func TestOOMKillReportsMemoryLimit(t *testing.T) {
	e := newEnv(t, "")
	info := e.launch(Spec{
		// tail buffers /dev/zero looking for a newline that never comes.
		Command: []string{"tail", "/dev/zero"},
		Limits:  isolator.Limits{MilliCPUs: 100, MemoryBytes: 32 << 20},
	})
	st := e.wait(info.ID)
	if !st.OOMKilled || st.Reason != ReasonMemoryLimit || st.Signal != 9 {
		t.Errorf("exit status = %+v, want OOM kill with reason %q", st, ReasonMemoryLimit)
	}
}

func TestCommandNotFoundLeavesNothing(t *testing.T) {
	e := newEnv(t, "")
	for _, cmd := range [][]string{{"/no/such/binary"}, {"brim-no-such-command"}, {"/etc/passwd"}} {
		id := testutil.UniqueName("nf")
		_, err := e.c.Launch(context.Background(), Spec{ID: id, Command: cmd, Limits: isolator.Limits{MilliCPUs: 100}})
		if !errors.Is(err, ErrCommandNotFound) {
			t.Errorf("launch %q: %v, want ErrCommandNotFound", cmd, err)
		}
		e.assertGone(id, 0)
		if n := e.iso.count(e.iso.prepared, id); n != 0 {
			t.Errorf("launch %q prepared isolators", cmd)
		}
	}
	// In a rootfs the lookup happens there, not on the host.
	root := busyboxRootfs(t)
	_, err := e.c.Launch(context.Background(), Spec{ID: testutil.UniqueName("nf"), Command: []string{"bash"}, Rootfs: root})
	if !errors.Is(err, ErrCommandNotFound) {
		t.Errorf("bash in busybox rootfs: %v, want ErrCommandNotFound", err)
	}
	if infos, _ := e.c.List(context.Background()); len(infos) != 0 {
		t.Errorf("containers left: %v", infos)
	}
}

func TestDuplicateID(t *testing.T) {
	e := newEnv(t, "")
	info := e.launch(Spec{Command: []string{"sleep", "1000"}, Limits: isolator.Limits{MilliCPUs: 100}})
	_, err := e.c.Launch(context.Background(), Spec{ID: info.ID, Command: []string{"true"}})
	if !errors.Is(err, ErrExist) {
		t.Fatalf("second launch of %s: %v, want ErrExist", info.ID, err)
	}
	// The failed launch must not have touched the running container.
	if got, err := e.c.Get(context.Background(), info.ID); err != nil || got.State != StateRunning {
		t.Fatalf("original container after duplicate launch: %+v, %v", got, err)
	}
}

func TestUpdateAndUsage(t *testing.T) {
	e := newEnv(t, "")
	info := e.launch(Spec{Command: []string{"sleep", "1000"}, Limits: isolator.Limits{MilliCPUs: 100, MemoryBytes: 64 << 20}})
	ctx := context.Background()
	if err := e.c.Update(ctx, info.ID, isolator.Limits{MilliCPUs: 200, MemoryBytes: 128 << 20}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(e.iso.memDir(info.ID), memFile("memory.limit_in_bytes")))
	if err != nil || strings.TrimSpace(string(data)) != "134217728" {
		t.Errorf("memory limit after Update = %q, %v", data, err)
	}
	stats, err := e.c.Usage(ctx, info.ID)
	if err != nil || !stats.HasMemory || stats.MemUsageBytes == 0 {
		t.Errorf("Usage = %+v, %v", stats, err)
	}
	got, _ := e.c.Get(ctx, info.ID)
	if got.Spec.Limits.MemoryBytes != 128<<20 {
		t.Errorf("recorded limits = %+v", got.Spec.Limits)
	}
}

// TestRecoverAfterAgentDeath simulates an agent killed with -9: its
// Containerizer is dropped while shims run on; a new one on the same state
// dir must reattach.
func TestRecoverAfterAgentDeath(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	limits := isolator.Limits{MilliCPUs: 100, MemoryBytes: 64 << 20}
	running := e.launch(Spec{ID: testutil.UniqueName("run"), Command: []string{"sleep", "1000"}, Limits: limits})
	exits := e.launch(Spec{
		ID:      testutil.UniqueName("exit"),
		Command: []string{"sh", "-c", "while [ ! -e /mnt/sandbox/go ]; do sleep 0.02; done; exit 3"},
		Limits:  limits,
	})
	lost := e.launch(Spec{ID: testutil.UniqueName("lost"), Command: []string{"sleep", "1000"}, Limits: limits})
	// The agent "dies" (its Containerizer is dropped below). Meanwhile one
	// container exits and one shim is killed, so that its container loses
	// its exit status.
	if got, _ := e.c.Get(ctx, exits.ID); got.State != StateRunning {
		t.Fatalf("container %s ended early: %+v", exits.ID, got.Exit)
	}
	if err := os.WriteFile(filepath.Join(exits.SandboxDir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		_, err := executor.ReadExit(filepath.Join(e.stateDir, "containers", exits.ID))
		return err == nil
	})
	if err := syscall.Kill(lost.ShimPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return !shimAlive(lost.ShimPid, filepath.Join(e.stateDir, "containers", lost.ID)) })
	// And a launch died before recording anything: an orphan directory.
	orphan := filepath.Join(e.stateDir, "containers", "orphan-1")
	if err := os.MkdirAll(filepath.Join(orphan, "sandbox"), 0o700); err != nil {
		t.Fatal(err)
	}

	e.c = e.newContainerizer()
	infos, err := e.c.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*Info{}
	for _, info := range infos {
		byID[info.ID] = info
	}
	if len(byID) != 3 {
		t.Errorf("recovered %d containers, want 3: %v", len(byID), infos)
	}
	if got := byID[running.ID]; got == nil || got.State != StateRunning || got.Pid != running.Pid || got.ShimPid != running.ShimPid {
		t.Errorf("running container recovered as %+v, want running pid %d", got, running.Pid)
	}
	if got := byID[exits.ID]; got == nil || got.State != StateExited || got.Exit == nil || got.Exit.Code != 3 {
		t.Errorf("exited container recovered as %+v, want exit code 3", got)
	}
	if got := byID[lost.ID]; got == nil || got.State != StateExited || got.Exit == nil || got.Exit.Reason != ReasonShimLost {
		t.Errorf("container of the killed shim recovered as %+v, want reason %q", got, ReasonShimLost)
	}
	if _, err := os.Stat(filepath.Join("/proc", itoa(lost.Pid))); err == nil {
		if data, _ := os.ReadFile(filepath.Join("/proc", itoa(lost.Pid), "cmdline")); strings.HasPrefix(string(data), "sleep") {
			t.Errorf("init %d of the lost container still runs", lost.Pid)
		}
	}
	if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("orphan directory not removed: %v", err)
	}
	if len(e.iso.known) != 3 {
		t.Errorf("isolator Recover got %v, want the 3 containers", e.iso.known)
	}
	if got := e.iso.known[running.ID]; !reflect.DeepEqual(got, limits) {
		t.Errorf("isolator Recover limits = %+v, want %+v", got, limits)
	}

	// The new containerizer controls the surviving container.
	if err := e.c.Kill(ctx, running.ID, -1); err != nil {
		t.Fatal(err)
	}
	if st := e.wait(running.ID); st.Signal != 9 {
		t.Errorf("recovered container after Kill: %+v", st)
	}
	for _, info := range []*Info{running, exits, lost} {
		if err := e.c.Destroy(ctx, info.ID); err != nil {
			t.Error(err)
		}
		e.assertGone(info.ID, info.ShimPid)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// waitFor polls cond until it holds (no deadline decides the test's
// outcome: the suite's timeout bounds it).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRecoverAfterAgentKill9 runs the "agent" in another process, kills it
// with SIGKILL, and recovers its containers here: the shims are no longer
// anyone's children we could wait for.
func TestRecoverAfterAgentKill9(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	live, ends := testutil.UniqueName("live"), testutil.UniqueName("ends")
	scripts, _ := json.Marshal(map[string]string{
		live: "exec sleep 1000",
		ends: "while [ ! -e /mnt/sandbox/go ]; do sleep 0.02; done; exit 4",
	})
	agent := exec.Command(os.Args[0], "-test.run=^$")
	agent.Env = append(os.Environ(), agentHelperEnv+"="+string(scripts),
		"BRIM_TEST_STATE_DIR="+e.stateDir, "BRIM_TEST_CGROUP_PARENT="+e.iso.parent, "BRIM_TEST_SHIM="+e.shim)
	// Whatever happens, what the helper launched is recovered and
	// destroyed by the env's cleanup.
	t.Cleanup(func() { _, _ = e.c.Recover(ctx) })
	agent.Stderr = os.Stderr
	out, err := agent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		_ = agent.Process.Kill()
		_ = agent.Wait()
		t.Fatalf("agent helper: %q, %v", line, err)
	}
	if err := agent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = agent.Wait()

	// While no agent runs, one container finishes.
	endsDir := filepath.Join(e.stateDir, "containers", ends)
	if err := os.WriteFile(filepath.Join(endsDir, executor.SandboxDir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, err := executor.ReadExit(endsDir); return err == nil })

	infos, err := e.c.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 {
		t.Fatalf("recovered %v, want 2 containers", infos)
	}
	byID := map[string]*Info{infos[0].ID: infos[0], infos[1].ID: infos[1]}
	if got := byID[live]; got == nil || got.State != StateRunning || got.Pid <= 0 {
		t.Errorf("live container recovered as %+v", got)
	}
	if got := byID[ends]; got == nil || got.State != StateExited || got.Exit.Code != 4 {
		t.Errorf("ended container recovered as %+v, want exit code 4", got)
	}
	// Kill with grace through the recovered shim, then clean up.
	if err := e.c.Kill(ctx, live, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if st := e.wait(live); st.Signal != 9 {
		t.Errorf("live container after Kill: %+v", st)
	}
	for _, info := range infos {
		if err := e.c.Destroy(ctx, info.ID); err != nil {
			t.Fatal(err)
		}
		e.assertGone(info.ID, info.ShimPid)
	}
}

// failingIsolator fails Prepare or Isolate for every container.
type failingIsolator struct {
	failIsolate bool
	cleaned     []string
}

func (f *failingIsolator) Name() string { return "failing" }
func (f *failingIsolator) Prepare(ctx context.Context, id string, l isolator.Limits, launch *isolator.Launch) error {
	if !f.failIsolate {
		return errors.New("prepare refused")
	}
	return nil
}
func (f *failingIsolator) Isolate(ctx context.Context, id string, pid int) error {
	return errors.New("isolate refused")
}
func (f *failingIsolator) Update(ctx context.Context, id string, l isolator.Limits) error { return nil }
func (f *failingIsolator) Usage(ctx context.Context, id string, s *isolator.Statistics) error {
	return nil
}
func (f *failingIsolator) Cleanup(ctx context.Context, id string) error {
	f.cleaned = append(f.cleaned, id)
	return nil
}
func (f *failingIsolator) Recover(ctx context.Context, known map[string]isolator.Limits) error {
	return nil
}

// TestFailedLaunchLeavesNothing makes launches fail at every stage after
// the shim could have started: isolator Prepare, isolator Isolate (the
// container's init exists then), a cancelled context.
func TestFailedLaunchLeavesNothing(t *testing.T) {
	for name, setup := range map[string]func(e *env) (context.Context, *failingIsolator){
		"prepare": func(e *env) (context.Context, *failingIsolator) {
			return context.Background(), &failingIsolator{}
		},
		"isolate": func(e *env) (context.Context, *failingIsolator) {
			return context.Background(), &failingIsolator{failIsolate: true}
		},
		"cancelled": func(e *env) (context.Context, *failingIsolator) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, "")
			ctx, fail := setup(e)
			if fail != nil {
				e.c.cfg.Isolators = append(e.c.cfg.Isolators, fail)
			}
			id := testutil.UniqueName("fail")
			if _, err := e.c.Launch(ctx, Spec{ID: id, Command: []string{"sleep", "1000"}, Limits: isolator.Limits{MilliCPUs: 100}}); err == nil {
				t.Fatal("launch succeeded")
			}
			e.assertGone(id, 0)
			if fail != nil && (len(fail.cleaned) != 1 || fail.cleaned[0] != id) {
				t.Errorf("failing isolator cleaned %v, want [%s]", fail.cleaned, id)
			}
			if n := e.iso.count(e.iso.cleaned, id); n == 0 {
				t.Error("cgroup isolator not cleaned up")
			}
			if _, err := os.Stat(filepath.Join(e.stateDir, "runc", id)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("runc state left: %v", err)
			}
		})
	}
}

// TestConcurrentLaunches launches more containers at once than there are
// warm shims, then waits for all of them.
func TestConcurrentLaunches(t *testing.T) {
	e := newEnv(t, "")
	const n = 6
	errs := make(chan error, n)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = testutil.UniqueName("conc")
		go func(id string, code int) {
			_, err := e.c.Launch(context.Background(), Spec{ID: id, Command: []string{"sh", "-c", "exit " + strconv.Itoa(code)}, Limits: isolator.Limits{MilliCPUs: 100}})
			errs <- err
		}(ids[i], i+10)
	}
	for range ids {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	for i, id := range ids {
		if st, err := e.c.Wait(context.Background(), id); err != nil || st.Code != i+10 {
			t.Errorf("container %s: %+v, %v; want exit %d", id, st, err, i+10)
		}
	}
}

// verifyingIsolator is the test isolator declared an isolator.Verifier.
type verifyingIsolator struct{ *cgroupIsolator }

func (verifyingIsolator) VerifiesOnly() bool { return true }

// TestVerifierIsolatorsSkipGoAhead: with an isolator that is not a
// Verifier, Isolate sees the init before the user process runs; when every
// isolator is a Verifier, Isolate is not called (the shim checks the cgroup
// itself) and the container still lands in its group and runs.
func TestVerifierIsolatorsSkipGoAhead(t *testing.T) {
	e := newEnv(t, "")
	gated := e.launch(Spec{Command: []string{"sleep", "1000"}, Limits: isolator.Limits{MilliCPUs: 100}})
	e.iso.mu.Lock()
	pid := e.iso.isolated[gated.ID]
	e.iso.mu.Unlock()
	if pid != gated.Pid {
		t.Errorf("non-Verifier: Isolate saw pid %d, want the init %d", pid, gated.Pid)
	}

	c, err := New(Config{
		StateDir:   t.TempDir(),
		Isolators:  []isolator.Isolator{verifyingIsolator{e.iso}},
		ShimBinary: e.shim,
		KillGrace:  2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id := testutil.UniqueName("ver")
	t.Cleanup(func() {
		_ = c.Destroy(ctx, id)
		c.Close()
	})
	info, err := c.Launch(ctx, Spec{ID: id, Command: []string{"sh", "-c", "cat /proc/self/cgroup; exit 3"}, Limits: isolator.Limits{MilliCPUs: 100}})
	if err != nil {
		t.Fatal(err)
	}
	e.iso.mu.Lock()
	_, called := e.iso.isolated[id]
	e.iso.mu.Unlock()
	if called {
		t.Error("Verifier: Isolate was called")
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	st, err := c.Wait(wctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Code != 3 {
		t.Fatalf("exit %+v, want code 3", st)
	}
	want := ":memory:" + e.iso.path(id) + "\n"
	if testutil.CgroupV2() {
		// A cgroup namespace rooted at the container's group (runc's
		// default on v2): the container sees itself at its root.
		want = "0::/\n"
	}
	if out := readSandbox(t, info, "stdout"); !strings.Contains(out, want) {
		t.Errorf("container's /proc/self/cgroup:\n%s", out)
	}
}

// TestKillRightAfterLaunch: Launch returns once the init is released to
// exec the user process; a kill that follows at once must still reach the
// user process (sleep as pid 1 ignores SIGTERM, so SIGKILL after the
// grace), not libcontainer's init, which a SIGTERM ends with status 2.
func TestKillRightAfterLaunch(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		info := e.launch(Spec{Command: []string{"sleep", "1000"}, Limits: isolator.Limits{MilliCPUs: 100}})
		if err := e.c.Kill(ctx, info.ID, 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if st := e.wait(info.ID); st.Signal != 9 || st.Code != 137 {
			t.Errorf("launch %d: %+v, want SIGKILL (the user process ignored SIGTERM)", i, st)
		}
	}
}
