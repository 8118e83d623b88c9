package containerizer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/brimnode/brim/executor"
	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
)

// TestRunDir (issue 35): with a RunDir a container's runtime state (its
// directory: bundle, record, shim pid, exit record; libcontainer's
// state) is there, and only its sandbox and output are in the state
// dir, where Info points; a task on the host root sees the run dir
// hidden; a new containerizer recovers the container from the two;
// Destroy removes both; a data directory without runtime state (a
// reboot emptied the run dir) is removed by Recover; Teardown removes
// what is left in both.
func TestRunDir(t *testing.T) {
	run := t.TempDir()
	e := newEnvWith(t, &env{runDir: run, shim: smallShimBinary})
	script := "echo out; echo data > /mnt/sandbox/f; ls -A " + run + " > /mnt/sandbox/run; exit 3"
	info := e.launch(Spec{Command: []string{"/bin/sh", "-c", script}, Limits: isolator.Limits{MilliCPUs: 100}})
	if st := e.wait(info.ID); st.Code != 3 {
		t.Fatalf("exit status %+v, want code 3", st)
	}
	data := filepath.Join(e.stateDir, "containers", info.ID)
	if info.SandboxDir != filepath.Join(data, executor.SandboxDir) || info.LogDir != filepath.Join(data, executor.LogDir) {
		t.Errorf("sandbox %s, log %s: want them in %s", info.SandboxDir, info.LogDir, data)
	}
	if got := readSandbox(t, info, "f"); got != "data\n" {
		t.Errorf("the task's file: %q", got)
	}
	if got := readSandbox(t, info, "stdout"); got != "out\n" {
		t.Errorf("stdout: %q", got)
	}
	if got := readSandbox(t, info, "run"); got != "" {
		t.Errorf("the task lists the run dir %s: %q, want it hidden (empty)", run, got)
	}
	if names := testutil.DirNames(t, data); !slices.Equal(names, []string{executor.LogDir, executor.SandboxDir}) {
		t.Errorf("the state dir holds %v of the container, want its log and sandbox only", names)
	}
	rt := filepath.Join(run, "containers", info.ID)
	for _, f := range []string{executor.BundleFile, recordFile, executor.ExitFile, shimPidFile} {
		if _, err := os.Stat(filepath.Join(rt, f)); err != nil {
			t.Errorf("runtime file: %v", err)
		}
	}
	if b, err := executor.ReadBundle(rt); err != nil || b.DataDir != data || b.StateRoot != filepath.Join(run, "runc") {
		t.Errorf("bundle %+v, %v: want data dir %s, runc state in the run dir", b, err, data)
	}

	c2 := e.newContainerizer()
	if _, err := c2.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := c2.Get(context.Background(), info.ID)
	if err != nil || got.State != StateExited || got.Exit.Code != 3 || got.SandboxDir != info.SandboxDir || got.LogDir != info.LogDir {
		t.Fatalf("recovered: %+v, %v", got, err)
	}
	if err := c2.Destroy(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
	e.assertGone(info.ID, info.ShimPid)

	// A reboot empties a run dir on tmpfs: the data dirs stay, alone.
	orphan := filepath.Join(e.stateDir, "containers", "before-reboot")
	if err := os.MkdirAll(filepath.Join(orphan, executor.SandboxDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := e.newContainerizer().Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a data dir without runtime state survived Recover: %v", err)
	}

	left := e.launch(Spec{Command: []string{"true"}, Limits: isolator.Limits{MilliCPUs: 100}})
	e.wait(left.ID)
	lines, err := Teardown(context.Background(), e.stateDir, run)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(lines, "removed the sandbox and output of "+left.ID) {
		t.Errorf("teardown: %q", lines)
	}
	for _, d := range []string{filepath.Join(e.stateDir, "containers"), filepath.Join(e.stateDir, "containers"+spareSuffix), filepath.Join(run, "containers"), filepath.Join(run, "runc")} {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after Teardown: %v", d, err)
		}
	}
}

// TestRunDirWarm (issue 35): a warm sandbox made with a RunDir has its
// sandbox directory in the state dir, and the claim renames both
// directories: the task writes to the data dir its Info names.
func TestRunDirWarm(t *testing.T) {
	run := t.TempDir()
	e := newPoolEnv(t, "", Config{WarmSandboxes: 1, RunDir: run})
	first, _ := e.launch(Spec{Command: []string{"true"}}) // the demand that fills the pool
	e.wait(first.ID)
	e.waitReady()
	if got, err := filepath.Glob(filepath.Join(e.stateDir, "containers", SandboxPrefix+"*", executor.SandboxDir)); err != nil || len(got) != 1 {
		t.Fatalf("the warm sandbox's data dir in the state dir: %v, %v", got, err)
	}
	info, warm := e.launch(Spec{Command: []string{"/bin/sh", "-c", "echo warm > /mnt/sandbox/f; echo out"}})
	if !warm {
		t.Fatal("not launched warm")
	}
	if st := e.wait(info.ID); st.Code != 0 {
		t.Fatalf("exit status %+v", st)
	}
	data := filepath.Join(e.stateDir, "containers", info.ID)
	if info.SandboxDir != filepath.Join(data, executor.SandboxDir) {
		t.Errorf("sandbox %s, want it in %s", info.SandboxDir, data)
	}
	if got := readSandbox(t, info, "f"); got != "warm\n" {
		t.Errorf("the task's file: %q", got)
	}
	if got := readSandbox(t, info, "stdout"); got != "out\n" {
		t.Errorf("stdout: %q", got)
	}
	if _, err := os.Stat(filepath.Join(run, "containers", info.ID, executor.ExitFile)); err != nil {
		t.Errorf("exit record not in the run dir: %v", err)
	}
}

// TestRunDirRefused: a run dir that is relative, or whose containers/
// would be the state dir's, is refused.
func TestRunDirRefused(t *testing.T) {
	state := t.TempDir()
	for _, run := range []string{"run", "/", filepath.Join(state, "containers"), filepath.Join(state, "containers", "x")} {
		_, err := New(Config{StateDir: state, RunDir: run})
		if err == nil || !strings.Contains(err.Error(), "run dir") {
			t.Errorf("run dir %q: %v, want a refusal", run, err)
		}
	}
}

// TestRunDirUserNS: with a RunDir, a task in a user namespace (its root
// an unprivileged host uid) starts, writes its sandbox in the state dir
// and owns what it wrote there through the namespace's range: both
// directories are reachable by the namespace's root.
func TestRunDirUserNS(t *testing.T) {
	base, _ := usernsBase(t)
	e := newEnvWith(t, &env{stateDir: filepath.Join(base, "state"), runDir: filepath.Join(base, "run"), shim: smallShimBinary})
	r := testRange
	info := e.launch(Spec{UserNS: &r, Command: []string{"sh", "-c", "echo from-task > /mnt/sandbox/mine && id -u"}, Limits: isolator.Limits{MilliCPUs: 100}})
	if st := e.wait(info.ID); st.Code != 0 {
		t.Fatalf("exit status %+v, stderr %q", st, readSandbox(t, info, "stderr"))
	}
	if got := readSandbox(t, info, "stdout"); got != "0\n" {
		t.Errorf("uid inside: %q, want 0", got)
	}
	fi, err := os.Stat(filepath.Join(info.SandboxDir, "mine"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != r.HostUID {
		t.Errorf("the task's file belongs to host uid %d, want the range's root %d", uid, r.HostUID)
	}
}
