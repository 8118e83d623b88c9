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

// createNetNS makes a new network namespace and bind-mounts it on path (which
// must not exist), like `ip netns add`. Inside it, IPv6 is disabled: brim
// hands out IPv4 addresses and shapes IPv4, and link-local IPv6 between
// containers would bypass the classifiers.
func createNetNS(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return fmt.Errorf("create netns file: %w", err)
	}
	_ = f.Close()
	errc := make(chan error, 1)
	go func() {
		// The thread is never unlocked: it ends with this goroutine (Go
		// terminates a thread whose goroutine exits locked), so it never has
		// to be moved back to the host namespace.
		runtime.LockOSThread()
		errc <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				return fmt.Errorf("unshare netns: %w", err)
			}
			for _, p := range []string{"/proc/sys/net/ipv6/conf/all/disable_ipv6", "/proc/sys/net/ipv6/conf/default/disable_ipv6"} {
				if err := os.WriteFile(p, []byte("1"), 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("disable ipv6: %w", err)
				}
			}
			src := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
			if err := unix.Mount(src, path, "none", unix.MS_BIND, ""); err != nil {
				return fmt.Errorf("bind-mount netns: %w", err)
			}
			return nil
		}()
	}()
	if err := <-errc; err != nil {
		_ = os.Remove(path)
		return err
	}
	return nil
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
