package bpf

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// CgroupID returns the id the kernel uses for the cgroup directory dir (an
// absolute path under a cgroup mount): its inode number, which is the
// cgroup's kernfs id on 64-bit hosts. Ids are per hierarchy: on v1 pass the
// directory in the cpu hierarchy to match Monitor's keys.
func CgroupID(dir string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0, fmt.Errorf("stat cgroup %s: %w", dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return 0, fmt.Errorf("stat cgroup %s: not a directory", dir)
	}
	return st.Ino, nil
}

// detectLayout finds whether root is a unified (v2) mount.
func detectLayout(root string) (layout, error) {
	if root == "" {
		root = defaultCgroupRoot
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(root, &fs); err != nil {
		return layout{}, fmt.Errorf("statfs %s: %w", root, err)
	}
	if fs.Type == unix.CGROUP2_SUPER_MAGIC {
		return layout{root: root, unified: true}, nil
	}
	if _, err := os.Stat(root + "/cpu"); err != nil {
		return layout{}, fmt.Errorf("find cpu hierarchy: %w", err)
	}
	return layout{root: root}, nil
}
