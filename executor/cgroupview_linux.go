package executor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
)

// mountCgroupView assembles a container's /sys/fs/cgroup on a cgroup v1
// (or hybrid) host on dir/CgroupViewDir, in the shim's private mount
// namespace: a tmpfs holding, for every v1 hierarchy, a bind of the
// container's own group (paths: the groups the shim joins, by subsystem)
// and the links of merged hierarchies ("cpu" → "cpu,cpuacct"), all
// read-only. The runtime spec binds it (libcontainerConfig) in place of
// runc's cgroup mount.
//
// Why: runc binds each hierarchy's group of the init's own cgroup, read
// from /proc/self/cgroup while it sets the container up. The shim joins
// the init to its groups late (join_linux.go), after that set-up, so
// runc's mount showed the container the shim's groups — on a host where
// the agent runs in the root groups, the whole host tree, and never the
// container's own limits (a runtime sizing itself from
// memory.limit_in_bytes saw none). The groups exist before the shim
// starts (the isolators made them), so the view can be made first; and
// one bind costs the init less than a tmpfs and a hardened bind per
// hierarchy (≈ a fifth of its set-up CPU, docs/benchmarks.md). A warm
// sandbox's view binds its own groups, which the cgroup isolator renames
// to the container's at the claim: a bind follows its directory.
func mountCgroupView(dir string, paths map[string]string) error {
	if err := makeMountsPrivate(); err != nil {
		return err
	}
	mounts, err := cgroups.GetCgroupMounts(false)
	if err != nil {
		return fmt.Errorf("cgroup view: %w", err)
	}
	view := filepath.Join(dir, CgroupViewDir)
	if err := os.Mkdir(view, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("cgroup view: %w", err)
	}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
	if err := unix.Mount("tmpfs", view, "tmpfs", flags, "mode=755,size=4k"); err != nil {
		return fmt.Errorf("cgroup view: mount tmpfs: %w", err)
	}
	for _, m := range mounts {
		src := groupOf(m, paths)
		if src == "" {
			continue // a hierarchy the container is not in: runc skips it too
		}
		if err := os.MkdirAll(src, 0o755); err != nil {
			return fmt.Errorf("cgroup view: %w", err)
		}
		name := filepath.Base(m.Mountpoint)
		dst := filepath.Join(view, name)
		if err := os.Mkdir(dst, 0o755); err != nil {
			return fmt.Errorf("cgroup view: %w", err)
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("cgroup view: bind %s: %w", src, err)
		}
		if strings.Contains(name, ",") {
			for _, ss := range strings.Split(name, ",") {
				if err := os.Symlink(name, filepath.Join(view, ss)); err != nil && !errors.Is(err, os.ErrExist) {
					return fmt.Errorf("cgroup view: %w", err)
				}
			}
		}
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC}
	if err := unix.MountSetattr(-1, view, unix.AT_RECURSIVE, &attr); err != nil {
		return fmt.Errorf("cgroup view: make read-only: %w", err)
	}
	return nil
}

// groupOf returns the container's group directory in hierarchy m, from
// paths (keyed by subsystem, "name=<n>" for named hierarchies), "" when
// the container has none there.
func groupOf(m cgroups.Mount, paths map[string]string) string {
	for _, ss := range m.Subsystems {
		if p, ok := paths[ss]; ok {
			return p
		}
		if p, ok := paths[cgroups.CgroupNamePrefix+ss]; ok {
			return p
		}
	}
	return ""
}
