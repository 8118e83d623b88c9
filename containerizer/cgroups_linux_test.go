package containerizer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brimnode/brim/executor"
	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/isolator/cgroups"
)

// TestWithCgroupsIsolator runs the containerizer with the real cgroup
// isolator: the user process must be in the group the isolator prepared
// in every hierarchy the host mounts (the shim joins them itself on v1,
// name=systemd and a hybrid host's unified tree included) with the
// device rules in force, the memory limit must hold (OOM reported),
// Update and Usage must reach the container's group, the groups must go
// when the container exits, and Destroy must leave nothing behind.
func TestWithCgroupsIsolator(t *testing.T) {
	testutil.RequireRoot(t)
	parent := testutil.NewCgroupParent(t)
	cg, err := cgroups.New(cgroups.Config{Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{StateDir: t.TempDir(), Isolators: []isolator.Isolator{cg}, ShimBinary: shimBinary})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	t.Cleanup(func() {
		infos, _ := c.List(ctx)
		for _, info := range infos {
			if err := c.Destroy(ctx, info.ID); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})

	sleeper, err := c.Launch(ctx, Spec{ID: testutil.UniqueName("cg"), Command: []string{"sleep", "1000"},
		Limits: isolator.Limits{MilliCPUs: 250, MemoryBytes: 64 << 20, Pids: 32}})
	if err != nil {
		t.Fatal(err)
	}
	procs, err := os.ReadFile(filepath.Join(testutil.CgroupDir("memory", cg.Path(sleeper.ID)), "cgroup.procs"))
	if err != nil || len(procs) == 0 {
		t.Fatalf("container's memory group %s: procs %q, %v", cg.Path(sleeper.ID), procs, err)
	}
	checkJoinedEverywhere(t, sleeper.Pid, cg.Path(sleeper.ID))
	if err := c.Update(ctx, sleeper.ID, isolator.Limits{MilliCPUs: 500, MemoryBytes: 128 << 20, Pids: 32}); err != nil {
		t.Fatal(err)
	}
	stats, err := c.Usage(ctx, sleeper.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Launch returns once the init is released to exec the user process:
	// the init's threads may still be counted for a moment.
	if !stats.HasMemory || stats.MemLimitBytes != 128<<20 || !stats.HasPids || stats.Pids == 0 {
		t.Errorf("usage after update: memory %v limit %d, pids %v %d", stats.HasMemory, stats.MemLimitBytes, stats.HasPids, stats.Pids)
	}

	hog, err := c.Launch(ctx, Spec{ID: testutil.UniqueName("cg"), Command: []string{"tail", "/dev/zero"},
		Limits: isolator.Limits{MilliCPUs: 250, MemoryBytes: 32 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Wait(ctx, hog.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !st.OOMKilled || st.Reason != ReasonMemoryLimit {
		t.Errorf("memory hog: %+v, want reason %q", st, ReasonMemoryLimit)
	}
	// The shim removes the groups once the container has exited, before
	// it records the exit.
	if dirs := testutil.CgroupDirs(cg.Path(hog.ID)); len(dirs) > 0 {
		t.Errorf("groups left after the container exited: %v", dirs)
	}

	for _, info := range []*Info{sleeper, hog} {
		if err := c.Destroy(ctx, info.ID); err != nil {
			t.Fatal(err)
		}
		if dirs := testutil.CgroupDirs(cg.Path(info.ID)); len(dirs) > 0 {
			t.Errorf("groups left after Destroy: %v", dirs)
		}
		if _, err := os.Stat(filepath.Join(c.dir, info.ID)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("container dir left: %v", err)
		}
	}
}

// checkJoinedEverywhere checks /proc/<pid>/cgroup: every hierarchy this
// process is in (all the host mounts) lists pid at path, and the devices
// group has the container's allow list, not the host's "a *:* rwm".
func checkJoinedEverywhere(t *testing.T, pid int, path string) {
	t.Helper()
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	in := make(map[string]string) // hierarchy ID:controllers → path
	for _, line := range strings.Split(strings.TrimSpace(string(theirs)), "\n") {
		if i := strings.LastIndex(line, ":"); i > 0 {
			in[line[:i]] = line[i+1:]
		}
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(self)), "\n") {
		i := strings.LastIndex(line, ":")
		if i <= 0 {
			continue
		}
		h := line[:i]
		if got, ok := in[h]; !ok || got != path {
			t.Errorf("hierarchy %q: container process %d is in %q, want %s", h, pid, got, path)
		}
		n++
	}
	if testutil.CgroupV2() {
		// One hierarchy; device rules are an eBPF program, not a file.
		if n != 1 {
			t.Fatalf("%d hierarchies in /proc/self/cgroup on a v2 host: %q", n, self)
		}
		return
	}
	if n < 2 {
		t.Fatalf("only %d hierarchies in /proc/self/cgroup: %q", n, self)
	}
	list, err := os.ReadFile(filepath.Join(testutil.CgroupRoot, "devices", path, "devices.list"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(list), "a *:* rwm") || !strings.Contains(string(list), "c 1:3 rwm") {
		t.Errorf("devices.list of %s = %q, want the container's allow list (with /dev/null, c 1:3)", path, list)
	}
}

// TestTaskSeesItsOwnCgroups: a task's /sys/fs/cgroup shows its own groups
// (its memory limit and pids.max, nothing of the host's tree). The shim
// joins the init to its groups late (executor/join_linux.go); runc's
// cgroup mount, made by the init from its groups at set-up time, showed
// it the shim's instead — on a host whose agent runs in the root groups,
// every group of the host.
func TestTaskSeesItsOwnCgroups(t *testing.T) {
	testutil.RequireRoot(t)
	parent := testutil.NewCgroupParent(t)
	cg, err := cgroups.New(cgroups.Config{Parent: parent, DefaultPids: cgroups.DefaultPidsMax})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{StateDir: t.TempDir(), Isolators: []isolator.Isolator{cg}, ShimBinary: smallShimBinary, WarmSandboxes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	script := `cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max; ls /sys/fs/cgroup/memory | grep -c '^brim' || true`
	if testutil.CgroupV2() {
		script = `cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids.max; ls /sys/fs/cgroup | grep -c '^brim' || true`
	}
	info, err := c.Launch(ctx, Spec{ID: testutil.UniqueName("cg"), Command: []string{"sh", "-c", script},
		Limits: isolator.Limits{MilliCPUs: 100, MemoryBytes: 48 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy(ctx, info.ID) })
	if st, err := c.Wait(ctx, info.ID); err != nil || st.Code != 0 {
		t.Fatalf("wait: %+v, %v; stderr %q", st, err, readSandbox(t, info, executor.StderrFile))
	}
	got := strings.Fields(readSandbox(t, info, executor.StdoutFile))
	want := []string{fmt.Sprint(48 << 20), fmt.Sprint(cgroups.DefaultPidsMax), "0"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the task's memory limit, pids.max and brim groups in its view = %q, want %q", got, want)
	}
}
