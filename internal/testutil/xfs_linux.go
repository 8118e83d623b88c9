package testutil

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// XFSProjectQuota mounts a fresh xfs file system with project quotas
// enforced (a 320 MiB sparse loop file; xfs wants 300 MiB at least) on a
// new directory and returns it; the mount, its loop device and the file
// are removed on cleanup. It fails the test (skips outside CI) without
// mkfs.xfs (xfsprogs, hack/deps.sh), and skips on a kernel built without
// xfs quotas (CONFIG_XFS_QUOTA: this machine's 6.18 has none).
func XFSProjectQuota(t testing.TB) string {
	t.Helper()
	RequireRoot(t)
	_, err := exec.LookPath("mkfs.xfs")
	Require(t, err == nil, "needs mkfs.xfs (xfsprogs)")
	SkipUnless(t, !kernelLacks("CONFIG_XFS_QUOTA"), "the kernel is built without xfs quotas (CONFIG_XFS_QUOTA)")
	base, err := os.MkdirTemp("/var/tmp", "brim-test-xfs-")
	if err != nil {
		t.Fatal(err)
	}
	img, mnt := filepath.Join(base, "fs.img"), filepath.Join(base, "mnt")
	mounted := false
	t.Cleanup(func() {
		if mounted {
			if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", mnt, err)
			}
		}
		_ = os.RemoveAll(base)
	})
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Truncate(320 << 20)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.xfs", "-q", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.xfs: %v: %s", err, out)
	}
	// mount(8) sets the loop device up with autoclear: it goes with the
	// unmount.
	if out, err := exec.Command("mount", "-o", "loop,prjquota", img, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount xfs: %v: %s", err, out)
	}
	mounted = true
	return mnt
}

// kernelLacks reports whether /proc/config.gz says option is not set
// (false when the kernel does not publish its config).
func kernelLacks(option string) bool {
	f, err := os.Open("/proc/config.gz")
	if err != nil {
		return false
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return false
	}
	b, err := io.ReadAll(zr)
	return err == nil && bytes.Contains(b, []byte("# "+option+" is not set"))
}
