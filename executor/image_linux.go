package executor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/internal/overlay"
	"github.com/brimnode/brim/internal/subid"
)

// IDMapDir is where, in its private mount namespace, the shim mounts the
// id-mapped copies of an image's layers of a container in a user
// namespace (see idmapLayers), for the moment the overlay takes them.
const IDMapDir = "layers"

// prepareImageRoot mounts the bundle's image root on <dir>/rootfs in the
// shim's private mount namespace: the overlay of the image's layers
// under the container's upper dir (in a user namespace with the runtime
// spec's mount points made in it as host root, so that the namespace's
// init need not), and returns the root. libcontainer then mounts /proc, /dev, /sys, /tmp and
// the sandbox, makes the root read-only unless the image root is
// ReadWrite, and pivots into it. Nothing propagates to the host: the
// mount lives as long as the shim's and the container's mount
// namespaces. In a user namespace the layers are id-mapped onto its
// range (idmapLayers).
func prepareImageRoot(dir string, b *Bundle) (string, error) {
	root, err := rootfsMountPoint(dir)
	if err != nil {
		return "", err
	}
	img := b.Image
	lower := img.Lower
	if b.UserNS != nil {
		mapped, done, err := idmapLayers(dir, lower, *b.UserNS)
		if err != nil {
			return "", err
		}
		// The overlay holds its own references to the layers: the
		// mapped mounts go once it is made, mounted or not.
		defer done()
		lower = mapped
	}
	if err := overlay.Mount(root, lower, img.Upper, img.Work); err != nil {
		return "", fmt.Errorf("mount image root: %w", err)
	}
	if b.UserNS != nil {
		// runc's init, in the namespace, may not create them in a root
		// owned by the range's root with host root's layers below; outside
		// one runc makes them itself (about 1.5 ms less on every launch
		// than making them here through pathrs).
		if err := prepareMountPoints(root, RuntimeSpec(b, dir, root).Mounts); err != nil {
			return "", err
		}
	}
	return root, nil
}

// idmapLayers mounts each layer id-mapped onto r (MOUNT_ATTR_IDMAP with a
// user namespace of r's mapping: a file the image gives uid u shows as
// host uid r.HostUID+u, which the container's namespace maps back to u)
// on <dir>/layers/N, and returns those paths and a func that unmounts
// and removes them. No file of the shared layers is changed, copied or
// chowned: every container of any range uses the same layers.
// overlayfs accepts id-mapped lower layers from Linux 5.19; the layers'
// file system must support id-mapped mounts (ext4, xfs, btrfs since
// 5.12, tmpfs since 6.3).
func idmapLayers(dir string, lower []string, r subid.Range) ([]string, func(), error) {
	ns, err := usernsFD(r)
	if err != nil {
		return nil, nil, err
	}
	defer ns.Close()
	base := filepath.Join(dir, IDMapDir)
	var mapped []string
	done := func() {
		for _, m := range mapped {
			_ = unix.Unmount(m, unix.MNT_DETACH)
			_ = os.Remove(m)
		}
		_ = os.Remove(base)
	}
	if err := os.Mkdir(base, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, nil, fmt.Errorf("id-mapped layers: %w", err)
	}
	for i, l := range lower {
		mp := filepath.Join(base, strconv.Itoa(i))
		if err := mountIDMapped(l, mp, ns); err != nil {
			done()
			return nil, nil, fmt.Errorf("id-map layer %s: %w", l, err)
		}
		mapped = append(mapped, mp)
	}
	return mapped, done, nil
}

// mountIDMapped mounts a detached, id-mapped copy of src on mp (created).
func mountIDMapped(src, mp string, ns *os.File) error {
	tree, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	defer func() { _ = unix.Close(tree) }()
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
			return fmt.Errorf("mount_setattr(MOUNT_ATTR_IDMAP): %w: the layers' file system does not support id-mapped mounts here (Linux 5.12+: ext4, xfs, btrfs; tmpfs from 6.3)", ErrNotSupported)
		}
		return fmt.Errorf("mount_setattr(MOUNT_ATTR_IDMAP): %w", err)
	}
	if err := os.Mkdir(mp, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, mp, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// usernsFD returns an fd of a new user namespace mapping 0..r.Size-1 onto
// r's host IDs, for MOUNT_ATTR_IDMAP. A user namespace needs a process
// to be made in, and a multi-threaded process cannot unshare one: a
// child is started in it, stopped by ptrace at its exec before it runs
// any instruction of the program, its namespace opened, and the child
// killed. The fd keeps the namespace.
func usernsFD(r subid.Range) (*os.File, error) {
	type result struct {
		f   *os.File
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// The tracer is this thread; it ends with the goroutine (never
		// unlocked), so no other goroutine runs on a thread that traced.
		runtime.LockOSThread()
		f, err := spawnInUserNS(r)
		ch <- result{f, err}
	}()
	res := <-ch
	if res.err != nil {
		return nil, fmt.Errorf("user namespace for id-mapped layers: %w", res.err)
	}
	return res.f, nil
}

func spawnInUserNS(r subid.Range) (*os.File, error) {
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"brim-userns-holder"}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(r.HostUID), Size: int(r.Size)}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(r.HostGID), Size: int(r.Size)}},
		Ptrace:      true, // stopped at its exec: it never runs
		Pdeathsig:   syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid))
	_ = cmd.Process.Kill()
	_ = cmd.Wait() // killed: its status says so
	return f, err
}
