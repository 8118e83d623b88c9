package executor

import (
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
)

// TestManagerAtIsTheManagersOwnPaths: the groups managerAt names from
// the hierarchy roots found once are those opencontainers/cgroups finds
// itself for the same path, in every hierarchy of this host (co-mounted
// controllers, name=systemd, a hybrid host's unified tree). Nothing is
// created: both only compute paths.
func TestManagerAtIsTheManagersOwnPaths(t *testing.T) {
	if cgroups.IsCgroup2UnifiedMode() {
		// No v1 hierarchies: the shim must leave the join to
		// libcontainer and never compute v1 paths.
		if joinLate() {
			t.Error("joinLate on a cgroup v2 host")
		}
		return
	}
	for _, p := range []string{"/brim-test-none/abc", "/a/b/c-d_e", "/"} {
		cg := &cgroups.Cgroup{Path: p, Resources: &cgroups.Resources{}}
		want, err := fs.NewManager(cg, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := managerAt(cg)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got.GetPaths(), want.GetPaths()) {
			t.Errorf("%s: managerAt's paths %v, the manager's own %v", p, got.GetPaths(), want.GetPaths())
		}
	}
	if _, err := managerAt(&cgroups.Cgroup{Path: "relative/x", Resources: &cgroups.Resources{}}); err == nil {
		t.Error("managerAt took a relative path")
	}
}

// TestWaitDevicesBeforeTheWriterEnds: a launch that fails right after
// the device rules' writing began (its cgroup view could not be made)
// waits for that writing in destroy, before the writer is done. The
// writer once sent on j.devices read after waitDevices had set it to
// nil: both blocked for ever, and the shim with them (a warm sandbox
// that outlived its agent, a cold launch that hung until LaunchTimeout).
func TestWaitDevicesBeforeTheWriterEnds(t *testing.T) {
	release := make(chan struct{})
	wrote := errors.New("rules written")
	j := &cgroupJoin{}
	j.writeDevices(t.TempDir(), &cgroups.Resources{}, func(string, *cgroups.Resources) error {
		<-release
		return wrote
	})
	got := make(chan error, 1)
	go func() { got <- j.waitDevices() }()
	// Let waitDevices take the channel first (what makes the old writer
	// block); with the fix the order does not matter.
	time.Sleep(100 * time.Millisecond)
	close(release)
	select {
	case err := <-got:
		if !errors.Is(err, wrote) {
			t.Errorf("waitDevices: %v, want %v", err, wrote)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("waitDevices still waits 30 s after the writer ended: deadlocked")
	}
	if err := j.waitDevices(); err != nil {
		t.Errorf("second waitDevices: %v, want nil", err)
	}
}
