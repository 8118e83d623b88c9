package executor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	securejoin "github.com/cyphar/filepath-securejoin"
	pathrs "github.com/cyphar/filepath-securejoin/pathrs-lite"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/internal/osthread"
)

// prepareHostRoot assembles the host root as a container rootfs in the
// shim's private mount namespace: / recursively bound onto <dir>/rootfs,
// hide's paths masked (see maskPaths), a small tmpfs on /mnt holding the
// sandbox mount point, then everything made
// read-only with mount_setattr(AT_RECURSIVE) (a bind's "ro" covers only
// its top mount). libcontainer then adds /proc, /dev, /sys, a private
// /tmp and the sandbox, and pivots into it. The host root itself cannot be
// the rootfs: pivot_root fails with EBUSY.
func prepareHostRoot(dir string, hide []string) (string, error) {
	root, err := rootfsMountPoint(dir)
	if err != nil {
		return "", err
	}
	if err := unix.Mount("/", root, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return "", fmt.Errorf("bind host root: %w", err)
	}
	// Masks first: one on /mnt or above the sandbox's mount point is then
	// covered by /mnt's tmpfs instead of hiding the mount point.
	if err := maskPaths(dir, root, hide); err != nil {
		return "", err
	}
	mnt := filepath.Join(root, "mnt")
	if fi, err := os.Stat(mnt); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("host root has no /mnt directory for the sandbox: %w", errors.Join(err, os.ErrNotExist))
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=755,size=16k"); err != nil {
		return "", fmt.Errorf("mount tmpfs on /mnt: %w", err)
	}
	if err := os.Mkdir(filepath.Join(mnt, filepath.Base(SandboxMountPoint)), 0o755); err != nil {
		return "", fmt.Errorf("create sandbox mount point: %w", err)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(-1, root, unix.AT_RECURSIVE, &attr); err != nil {
		return "", fmt.Errorf("make rootfs read-only: %w", err)
	}
	return root, nil
}

// requirePrivateMountNS refuses to build mounts in the mount namespace of
// the process that started the shim (the host's, normally).
func requirePrivateMountNS() error {
	var self, parent unix.Stat_t
	if err := unix.Stat("/proc/self/ns/mnt", &self); err != nil {
		return fmt.Errorf("stat mount namespace: %w", err)
	}
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/mnt", os.Getppid()), &parent); err != nil {
		return fmt.Errorf("stat parent's mount namespace: %w", err)
	}
	if self.Ino == parent.Ino && self.Dev == parent.Dev {
		return errors.New("the shim shares its parent's mount namespace: start it with CLONE_NEWNS")
	}
	return nil
}

// maskedFile is the empty, mode 0000 file in the container directory bound
// over masked files: even a root task (without CAP_DAC_OVERRIDE) gets
// EACCES reading it.
const maskedFile = "masked"

// maskPaths hides each of hide's paths under root: a directory under an
// empty read-only tmpfs (mode 0755: whoever the task runs as, a path
// below it, such as the agent's socket, is ENOENT rather than EACCES, and
// a listing is empty), anything else under maskedFile. Paths are resolved inside
// root (a symlink such as /var/run -> /run masks its target in the
// rootfs); a path that does not exist is skipped.
func maskPaths(dir, root string, hide []string) error {
	empty := ""
	for _, p := range hide {
		target, err := securejoin.SecureJoin(root, p)
		if err != nil {
			return fmt.Errorf("hide %s: %w", p, err)
		}
		fi, err := os.Lstat(target)
		if err != nil {
			continue // nothing there to hide
		}
		if fi.IsDir() {
			if err := unix.Mount("tmpfs", target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=755,size=4k"); err != nil {
				return fmt.Errorf("hide %s: %w", p, err)
			}
			continue
		}
		if empty == "" {
			empty = filepath.Join(dir, maskedFile)
			f, err := os.OpenFile(empty, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				return fmt.Errorf("hide %s: %w", p, err)
			}
			f.Close()
			if err := os.Chmod(empty, 0); err != nil {
				return fmt.Errorf("hide %s: %w", p, err)
			}
		}
		if err := unix.Mount(empty, target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("hide %s: %w", p, err)
		}
	}
	return nil
}

// prepareMountPoints creates in an operator's rootfs the mount points of
// mounts that it lacks (such as /mnt/sandbox), as root on the host. runc
// does so itself outside a user namespace; inside one its init may not
// create directories in a rootfs owned by host root. Paths resolve inside
// rootfs (symlinks cannot lead out of it).
func prepareMountPoints(rootfs string, mounts []specs.Mount) error {
	for _, m := range mounts {
		if err := pathrs.MkdirAll(rootfs, m.Destination, 0o755); err != nil {
			return fmt.Errorf("create mount point %s in rootfs %s: %w", m.Destination, rootfs, err)
		}
	}
	return nil
}

// mountNetSysfs mounts, read-only, the sysfs of the network namespace at
// netnsPath on dir/SysfsDir, in the shim's private mount namespace: the
// /sys of a container in a user namespace that joins a namespace made by
// the network isolator. A sysfs shows the interfaces of the network
// namespace of the process that mounts it, and only a process with
// CAP_SYS_ADMIN in the user namespace owning that network namespace (the
// host's) may mount one; the container's root in its own user namespace
// may not, the shim (host root) may. The mount lives as long as the
// shim's and the container's mount namespaces (it holds the network
// namespace until then); the host never sees it.
func mountNetSysfs(dir, netnsPath string) error {
	if err := makeMountsPrivate(); err != nil {
		return err
	}
	target := filepath.Join(dir, SysfsDir)
	if err := os.Mkdir(target, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create sysfs mount point: %w", err)
	}
	ns, err := os.Open(netnsPath)
	if err != nil {
		return fmt.Errorf("open netns: %w", err)
	}
	defer ns.Close()
	// The thread that joins the container's network namespace ends with
	// the mount: no other goroutine ever runs in that namespace.
	return osthread.Run(func() error {
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("join netns %s: %w", netnsPath, err)
		}
		if err := unix.Mount("sysfs", target, "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mount sysfs of netns %s: %w", netnsPath, err)
		}
		return nil
	})
}

// makeMountsPrivate makes the shim's mount namespace private: nothing
// mounted in it from then on propagates to the host's. Once done it
// stays so for the process (what the shim mounts afterwards is private
// too: new file systems, and binds and moves of private mounts), so a
// shim does it once, not at each step of each launch that mounts.
func makeMountsPrivate() error {
	if mountsPrivate.Load() {
		return nil
	}
	if err := requirePrivateMountNS(); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	mountsPrivate.Store(true)
	return nil
}

// mountsPrivate records makeMountsPrivate's success.
var mountsPrivate atomic.Bool

// rootfsMountPoint makes the shim's mount namespace private (nothing
// done in it may propagate back to the host) and the container's root
// mount point in dir.
func rootfsMountPoint(dir string) (string, error) {
	if err := makeMountsPrivate(); err != nil {
		return "", err
	}
	root := filepath.Join(dir, RootfsDir)
	if err := os.Mkdir(root, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("create rootfs mount point: %w", err)
	}
	return root, nil
}
