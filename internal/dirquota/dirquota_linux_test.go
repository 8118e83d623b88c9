package dirquota

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/internal/testutil"
)

// On xfs with prjquota a write past the project's limit fails with
// EDQUOT, in the directory and below it, and Usage counts it.
func TestProjectLimit(t *testing.T) {
	mnt := testutil.XFSProjectQuota(t)
	p, err := Open(mnt)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	upper, work := filepath.Join(mnt, "upper"), filepath.Join(mnt, "work")
	for _, d := range []string{upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	id := p.Next()
	if id < FirstProject || p.Next() == id {
		t.Fatalf("Next = %d then the same again", id)
	}
	if err := p.Limit(id, 1<<20, upper, work); err != nil {
		t.Fatal(err)
	}
	if got, err := ProjectID(upper); err != nil || got != id {
		t.Fatalf("ProjectID = %d, %v; want %d", got, err, id)
	}
	if err := os.MkdirAll(filepath.Join(upper, "a/b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(upper, "a/b/small"), make([]byte, 256<<10), 0o644); err != nil {
		t.Fatalf("a write under the limit: %v", err)
	}
	err = os.WriteFile(filepath.Join(upper, "a/b/big"), make([]byte, 2<<20), 0o644)
	if !errors.Is(err, unix.EDQUOT) && !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("a write past the limit: %v, want EDQUOT", err)
	}
	// A file made in the work dir and renamed into the upper dir (as
	// overlay's copy-up does) stays within the project.
	if err := os.WriteFile(filepath.Join(work, "t"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(work, "t"), filepath.Join(upper, "t")); err != nil {
		t.Fatalf("rename from the work dir: %v", err)
	}
	used, err := p.Usage(id)
	if err != nil || used < 256<<10 || used > 1<<20 {
		t.Errorf("Usage = %d, %v; want between 256 KiB and the 1 MiB limit", used, err)
	}
	if err := p.Clear(id); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(upper, "a/b/big"), make([]byte, 2<<20), 0o644); err != nil {
		t.Errorf("a write after Clear: %v", err)
	}
}

func TestOpenRefusesOtherFileSystems(t *testing.T) {
	if _, err := Open(t.TempDir()); !errors.Is(err, ErrNotSupported) {
		t.Errorf("Open on %s = %v, want ErrNotSupported", os.TempDir(), err)
	}
}

// Usage counts allocated blocks once per inode, as du -s.
func TestUsage(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), make([]byte, 100<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "f"), filepath.Join(dir, "g")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "d/h"), make([]byte, 50<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Usage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got < 150<<10 || got > 250<<10 {
		t.Errorf("Usage = %d, want about 150 KiB (the hard link counted once)", got)
	}
	if _, err := Usage(filepath.Join(dir, "gone")); err == nil {
		t.Error("Usage of a missing directory: no error")
	}
}
