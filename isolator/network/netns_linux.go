//go:build linux

package network

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// newNetNS makes a new network namespace and returns an open file on it (the
// namespace lives as long as the file or a bind mount of it). Inside it,
// IPv6 is disabled: brim hands out IPv4 addresses and shapes IPv4, and
// link-local IPv6 between containers would bypass the classifiers.
func newNetNS() (*os.File, error) {
	type result struct {
		f   *os.File
		err error
	}
	c := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			c <- result{nil, fmt.Errorf("open current netns: %w", err)}
			return
		}
		defer orig.Close()
		f, err := func() (*os.File, error) {
			if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				return nil, fmt.Errorf("unshare netns: %w", err)
			}
			for _, p := range []string{"/proc/sys/net/ipv6/conf/all/disable_ipv6", "/proc/sys/net/ipv6/conf/default/disable_ipv6"} {
				if err := os.WriteFile(p, []byte("1"), 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return nil, fmt.Errorf("disable ipv6: %w", err)
				}
			}
			f, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
			if err != nil {
				return nil, fmt.Errorf("open netns: %w", err)
			}
			return f, nil
		}()
		// Back to where the thread was; if that fails the thread stays
		// locked and Go ends it with this goroutine (or, on the main
		// thread, never schedules anything on it again).
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		}
		c <- result{f, err}
	}()
	r := <-c
	return r.f, r.err
}

// bindNetNS bind-mounts the namespace ns on path (which must not exist), like
// `ip netns add`.
func bindNetNS(ns *os.File, path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return fmt.Errorf("create netns file: %w", err)
	}
	_ = f.Close()
	if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", ns.Fd()), path, "none", unix.MS_BIND, ""); err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("bind-mount netns: %w", err)
	}
	return nil
}

// createNetNS makes a new network namespace bind-mounted on path.
func createNetNS(path string) error {
	ns, err := newNetNS()
	if err != nil {
		return err
	}
	defer ns.Close()
	return bindNetNS(ns, path)
}

// removeNetNS unmounts and removes the netns file at path; a missing file is
// not an error. The namespace itself goes away with its last user.
func removeNetNS(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount netns %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove netns %s: %w", path, err)
	}
	return nil
}

// shareDir makes dir a mount point with shared propagation, as `ip netns`
// does with /run/netns: a process that copied the host's mount namespace
// before a netns file was bind-mounted there (a shim started ahead of a
// launch) still sees the bind mount, not the empty file under it (joining
// that fails with EINVAL). Idempotent.
func shareDir(dir string) error {
	err := unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if errors.Is(err, unix.EINVAL) { // not a mount point yet
		if err := unix.Mount(dir, dir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind-mount %s on itself: %w", dir, err)
		}
		err = unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, "")
	}
	if err != nil {
		return fmt.Errorf("make %s a shared mount: %w", dir, err)
	}
	return nil
}

// unshareDir removes the mount shareDir made on dir (Uninstall); a dir that
// is not a mount point is not an error.
func unshareDir(dir string) error {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

// runInNetNS runs fn on a thread in the network namespace ns (for what
// takes the namespace of the calling thread: sockets, /proc/sys/net) and
// returns its error. The thread goes back to its own namespace after;
// if that fails it stays locked and Go ends it with the goroutine.
func runInNetNS(ns int, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open current netns: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter netns: %w", err)
			return
		}
		err = fn()
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}
