package cgroups

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/brimnode/brim/isolator"
)

// TestTeardown: with no agent left, Teardown kills what runs in the
// parent's groups — forking processes, and a container frozen on its own
// (a QoS freeze) — and removes every group and the parent in every
// hierarchy; a second Teardown finds nothing to do. A parent with a group
// the caller does not claim is refused with nothing touched.
func TestTeardown(t *testing.T) {
	i, parent := newV1(t)
	ctx := context.Background()
	var cmds []int
	for _, id := range []string{"a", "b"} {
		if err := i.Prepare(ctx, id, isolator.Limits{MilliCPUs: 100, MemoryBytes: 64 << 20}, &isolator.Launch{}); err != nil {
			t.Fatal(err)
		}
		// A shell that keeps forking children.
		cmd, run := start(t, groupDirs(i, id), "sh", "-c", "while :; do sleep 100 & sleep 0.01; done")
		run()
		cmds = append(cmds, cmd.Process.Pid)
		go func() { _ = cmd.Wait() }() // reaped: gone from /proc once killed
	}
	if err := i.Freeze(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	// A nested group, as libcontainer makes none but a task may.
	if err := os.Mkdir(filepath.Join(root, "memory", parent, "a", "nested"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Not the caller's: a group it does not claim. Nothing is touched.
	if _, err := i.Teardown(ctx, func(c string) bool { return c == "a" }); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "/b is no container of this agent") {
		t.Errorf("teardown of a parent with a group not claimed: %v, want ErrInvalid naming it", err)
	}
	if pids, _ := readProcs(groupDirs(i, "a")[0]); len(pids) == 0 {
		t.Error("a refused teardown killed the processes of a")
	}
	rep, err := i.Teardown(ctx, func(c string) bool { return c == "a" || c == "b" })
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range cmds {
		if !slices.Contains(rep.Killed, pid) {
			t.Errorf("pid %d not among the killed %v", pid, rep.Killed)
		}
	}
	want := []string{parent + "/a/nested", parent + "/a", parent + "/b", parent}
	if !slices.Equal(rep.Removed, want) {
		t.Errorf("removed %v, want %v", rep.Removed, want)
	}
	if dirs, _ := filepath.Glob(filepath.Join(root, "*", parent)); len(dirs) > 0 {
		t.Errorf("left: %v", dirs)
	}
	rep, err = i.Teardown(ctx, nil)
	if err != nil || len(rep.Killed)+len(rep.Removed) != 0 {
		t.Errorf("second teardown: %+v, %v; want nothing done", rep, err)
	}
}

// TestTeardownRefusesForeignParent: a parent holding init, this process
// or one of its ancestors is not a parent of containers: refused before
// anything is done.
func TestTeardownRefusesForeignParent(t *testing.T) {
	for _, pid := range []int{1, os.Getpid(), os.Getppid()} {
		if got, ok := protectedPID([]int{12345678, pid}); !ok || got != pid {
			t.Errorf("protectedPID(%d) = %d, %v", pid, got, ok)
		}
	}
	if _, ok := protectedPID([]int{12345678}); ok {
		t.Error("an unrelated pid is protected")
	}
}

// A group removed between the open of its cgroup.procs and the read (a
// container's teardown racing `brim agent cleanup`'s kill loop) reads
// ENODEV: it has no processes and is skipped, not an error. Before,
// cleanup failed "list processes: read …/cgroup.procs: no such device"
// (seen in CI, TestAgentCleanup).
func TestReadProcsSkipsAGroupRemovedMeanwhile(t *testing.T) {
	_, parent := newV1(t)
	dir := filepath.Join(root, "memory", parent)
	gone := filepath.Join(dir, "gone")
	if err := os.MkdirAll(gone, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(gone); _ = os.Remove(dir) })
	openProcs = func(name string) (*os.File, error) {
		f, err := os.Open(name)
		if err == nil && filepath.Dir(name) == gone {
			if err := os.Remove(gone); err != nil {
				t.Errorf("remove the group after the open: %v", err)
			}
		}
		return f, err
	}
	t.Cleanup(func() { openProcs = os.Open })
	pids, err := readProcs(dir)
	if err != nil {
		t.Fatalf("readProcs with a group removed meanwhile: %v", err)
	}
	if len(pids) != 0 {
		t.Errorf("pids %v in an empty parent", pids)
	}
}
