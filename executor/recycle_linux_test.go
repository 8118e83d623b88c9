package executor

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/internal/testutil"
)

// TestRecyclerBounds: a shim takes at most maxRecycleUses containers,
// none once maxRecycleAge has passed since its first one's launch, and
// none after a container that left a file descriptor open (against the
// count after its first container); off, it takes none after the first.
func TestRecyclerBounds(t *testing.T) {
	if newRecycler(false).again() {
		t.Error("a shim without Recycle takes another container")
	}
	r := newRecycler(true)
	n := 0
	for r.again() {
		n++
		if n > maxRecycleUses {
			break
		}
	}
	if n != maxRecycleUses-1 {
		t.Errorf("again() true %d times, want %d (then the last container)", n, maxRecycleUses-1)
	}

	r = newRecycler(true)
	r.again()
	if err := r.reset(0); err != nil {
		t.Fatalf("reset after the first container: %v", err)
	}
	r.again()
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.reset(0); err == nil || !strings.Contains(err.Error(), "file descriptors left open") {
		t.Errorf("reset with a file descriptor more than after the first container: %v", err)
	}
	if err := r.reset(1); err != nil {
		t.Errorf("reset with a descriptor held for the next container (readySet): %v", err)
	}
	f.Close()
	if err := r.reset(0); err != nil {
		t.Errorf("reset once the descriptor is closed: %v", err)
	}
	r.first = time.Now().Add(-maxRecycleAge)
	if err := r.reset(0); err == nil || !strings.Contains(err.Error(), "as old as its first container") {
		t.Errorf("reset %v after the first launch: %v", maxRecycleAge, err)
	}
}

// TestMountsUnder: the mounts at and below a directory are found,
// mountinfo's escapes undone (a space is "\040" there), and nothing
// beside it (a sibling whose name extends the directory's).
func TestMountsUnder(t *testing.T) {
	testutil.RequireRoot(t)
	base := t.TempDir()
	dir := filepath.Join(base, "a dir")
	for _, d := range []string{filepath.Join(dir, "sub\tx"), dir + "-beside"} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	var mounted []string
	t.Cleanup(func() {
		for i := len(mounted) - 1; i >= 0; i-- {
			_ = unix.Unmount(mounted[i], unix.MNT_DETACH)
		}
	})
	for _, m := range []string{dir, dir + "-beside"} {
		if err := unix.Mount("tmpfs", m, "tmpfs", 0, "size=16k"); err != nil {
			t.Fatal(err)
		}
		mounted = append(mounted, m)
	}
	sub := filepath.Join(dir, "sub\tx")
	if err := os.MkdirAll(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=16k"); err != nil {
		t.Fatal(err)
	}
	mounted = append(mounted, sub)
	got, err := mountsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{dir, sub}; !slices.Equal(got, want) {
		t.Errorf("mountsUnder(%q) = %q, want %q", dir, got, want)
	}
}
