package testutil

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// SmallTmpfs mounts a tmpfs of size bytes (mode 0700) on a fresh
// directory, unmounted and removed on cleanup, and returns the directory:
// a disk a test can fill. It needs root (RequireRoot).
func SmallTmpfs(t testing.TB, size int64) string {
	t.Helper()
	RequireRoot(t)
	dir, err := os.MkdirTemp("", "brim-tmpfs-")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "mode=0700,size="+strconv.FormatInt(size, 10)); err != nil {
		_ = os.Remove(dir)
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
		_ = os.Remove(dir)
	})
	return dir
}

// FillDisk writes a file in dir until its file system has no space left
// and returns a function that removes the file again.
func FillDisk(t testing.TB, dir string) (free func()) {
	t.Helper()
	name := filepath.Join(dir, ".brim-test-fill")
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatalf("fill %s: %v", dir, err)
	}
	buf := make([]byte, 64<<10)
	for {
		_, err = f.Write(buf)
		if err != nil {
			break
		}
	}
	f.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("fill %s: %v, want ENOSPC", dir, err)
	}
	// The last partial blocks: a byte at a time would take long; small
	// writes until none fits.
	if f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0); err == nil {
		for _, err := f.Write(buf[:512]); err == nil; _, err = f.Write(buf[:512]) {
		}
		f.Close()
	}
	return func() {
		if err := os.Remove(name); err != nil {
			t.Errorf("free %s: %v", dir, err)
		}
	}
}
