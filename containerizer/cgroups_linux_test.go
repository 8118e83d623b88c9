package containerizer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/isolator/cgroups"
)

// TestWithCgroupsIsolator runs the containerizer with the real cgroup
// isolator: libcontainer must join the group the isolator prepared, the
// memory limit must hold (OOM reported), Update and Usage must reach the
// container's group, and Destroy must leave no group behind.
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
	procs, err := os.ReadFile(filepath.Join(testutil.CgroupRoot, "memory", cg.Path(sleeper.ID), "cgroup.procs"))
	if err != nil || len(procs) == 0 {
		t.Fatalf("container's memory group %s: procs %q, %v", cg.Path(sleeper.ID), procs, err)
	}
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

	for _, info := range []*Info{sleeper, hog} {
		if err := c.Destroy(ctx, info.ID); err != nil {
			t.Fatal(err)
		}
		if dirs, _ := filepath.Glob(filepath.Join(testutil.CgroupRoot, "*", cg.Path(info.ID))); len(dirs) > 0 {
			t.Errorf("groups left after Destroy: %v", dirs)
		}
		if _, err := os.Stat(filepath.Join(c.dir, info.ID)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("container dir left: %v", err)
		}
	}
}
