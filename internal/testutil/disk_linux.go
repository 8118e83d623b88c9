package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// DiskEnv names the environment variable that points tests at a directory
// on a block device (the v2 lane's scratch disk, /mnt/disk): the io
// controller's weights and throttles apply to disks, and TMPDIR may be a
// tmpfs.
const DiskEnv = "BRIM_TEST_DISK"

// DiskDir returns a fresh directory, removed on cleanup, on a filesystem
// backed by a block device: under $BRIM_TEST_DISK when set, else under
// os.TempDir(). It skips (fails in CI) when that filesystem has no block
// device (tmpfs, overlay).
func DiskDir(t testing.TB) string {
	t.Helper()
	base := os.Getenv(DiskEnv)
	if base == "" {
		base = os.TempDir()
	}
	var st unix.Stat_t
	if err := unix.Stat(base, &st); err != nil {
		t.Fatalf("stat %s: %v", base, err)
	}
	dev := filepath.Join("/sys/dev/block", strings.Join([]string{itoa(unix.Major(st.Dev)), itoa(unix.Minor(st.Dev))}, ":"))
	_, err := os.Stat(dev)
	Require(t, err == nil, base+" is on no block device (set "+DiskEnv+" to a directory on a disk)")
	dir, err := os.MkdirTemp(base, "brim-test-disk-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func itoa(n uint32) string {
	if n == 0 {
		return "0"
	}
	var b [10]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
