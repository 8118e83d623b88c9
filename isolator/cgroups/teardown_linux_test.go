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
