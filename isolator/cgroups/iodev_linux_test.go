package cgroups

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/brimnode/brim/internal/testutil"
)

// TestDiskDevicesOfAPathToBe: a path not made yet (an agent's first state
// dir, resolved before the agent makes it) is on its parent's disk; a
// path on tmpfs is on none.
func TestDiskDevicesOfAPathToBe(t *testing.T) {
	disk := testutil.DiskDir(t)
	want, err := diskDevices("/sys", []string{disk})
	if err != nil || len(want) != 1 {
		t.Fatalf("disk of %s: %v, %v", disk, want, err)
	}
	got, err := diskDevices("/sys", []string{filepath.Join(disk, "state", "not", "made")})
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("disk of a path under %s not made yet: %v, %v; want %v", disk, got, err, want)
	}
	if got, err := diskDevices("/sys", []string{"/dev/shm/brim-not-made"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("disk of a path to be on tmpfs: %v, %v; want an error wrapping ErrInvalid", got, err)
	}
}
