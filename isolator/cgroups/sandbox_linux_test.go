package cgroups

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
)

// TestSandboxClaimAndRecover (issue 35): a claimed sandbox's groups are
// the container's — renamed to its ID on v1, the sandbox's own on v2
// (which renames no group), Path naming them — with the limits written
// there; after a restart, Adopt tells a new isolator where the container
// runs, so that Recover keeps that group (on v2 it was removed as an
// orphan: a name no known container has) and Update reaches it; Cleanup
// removes it.
func TestSandboxClaimAndRecover(t *testing.T) {
	ctx := context.Background()
	parent := testutil.NewCgroupParent(t)
	iso, err := New(Config{Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	name, id := testutil.UniqueName("warm"), testutil.UniqueName("ctr")
	var launch isolator.Launch
	if err := iso.PrepareSandbox(ctx, name, &launch); err != nil {
		t.Fatal(err)
	}
	if launch.CgroupPath != iso.Path(name) || len(testutil.CgroupDirs(launch.CgroupPath)) == 0 {
		t.Fatalf("sandbox groups at %q: %v", launch.CgroupPath, testutil.CgroupDirs(launch.CgroupPath))
	}
	limits := isolator.Limits{MilliCPUs: 100, MemoryBytes: 64 << 20}
	launch = isolator.Launch{}
	if err := iso.Claim(ctx, name, id, limits, &launch); err != nil {
		t.Fatal(err)
	}
	want := iso.parent + "/" + id
	if iso.Version() == V2 {
		want = iso.parent + "/" + name
	}
	if launch.CgroupPath != want || iso.Path(id) != want {
		t.Fatalf("claimed: launch's cgroup %q, Path %q; want %q", launch.CgroupPath, iso.Path(id), want)
	}
	checkMemoryLimit(t, iso, want, 64<<20)

	// A restart: a new isolator, told where the container runs.
	iso2, err := New(Config{Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	if err := iso2.Adopt(id, "/elsewhere/"+name); !errors.Is(err, ErrInvalid) {
		t.Errorf("Adopt of a path outside the parent: %v, want ErrInvalid", err)
	}
	if err := iso2.Adopt(id, launch.CgroupPath); err != nil {
		t.Fatal(err)
	}
	if err := iso2.Recover(ctx, map[string]isolator.Limits{id: limits}); err != nil {
		t.Fatal(err)
	}
	if len(testutil.CgroupDirs(want)) == 0 {
		t.Fatalf("Recover removed the container's group %s", want)
	}
	if err := iso2.Update(ctx, id, isolator.Limits{MilliCPUs: 100, MemoryBytes: 96 << 20}); err != nil {
		t.Fatal(err)
	}
	checkMemoryLimit(t, iso2, want, 96<<20)
	if err := iso2.Cleanup(ctx, id); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{want, iso.parent + "/" + id, iso.parent + "/" + name} {
		if dirs := testutil.CgroupDirs(p); len(dirs) > 0 {
			t.Errorf("groups left after Cleanup: %v", dirs)
		}
	}
	if iso2.Path(id) != iso.parent+"/"+id {
		t.Errorf("Path(%s) after Cleanup: %s", id, iso2.Path(id))
	}
}

// checkMemoryLimit reads the memory limit of cgroup path p.
func checkMemoryLimit(t *testing.T, i *Isolator, p string, want int64) {
	t.Helper()
	file := filepath.Join(i.dir("memory", p), "memory.limit_in_bytes")
	if i.Version() == V2 {
		file = filepath.Join(i.dir("", p), "memory.max")
	}
	data, err := os.ReadFile(file)
	if err != nil || strings.TrimSpace(string(data)) != strconv.FormatInt(want, 10) {
		t.Errorf("%s: %q, %v; want %d", file, data, err, want)
	}
}
