package image

import (
	"os"
	"path/filepath"
	"testing"
)

// Release of a container that never had a snapshot (every host-root
// container's teardown asks) succeeds and leaves nothing; one whose
// snapshot directory outlived its lease (a crash between the two) still
// has it removed.
func TestReleaseWithoutSnapshot(t *testing.T) {
	s, err := Open(Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Release("no-image"); err != nil {
		t.Errorf("Release of a container without a snapshot = %v, want nil", err)
	}
	stray := filepath.Join(s.root, dirSnapshots, "stray", "upper")
	if err := os.MkdirAll(stray, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.Release("stray"); err != nil {
		t.Fatalf("Release of a snapshot without its lease: %v", err)
	}
	if _, err := os.Lstat(filepath.Dir(stray)); !os.IsNotExist(err) {
		t.Errorf("snapshot without a lease still there after Release (%v)", err)
	}
	if err := s.Release("stray"); err != nil {
		t.Errorf("second Release = %v, want nil", err)
	}
	assertClean(t, s)
}
