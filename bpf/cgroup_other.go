//go:build !linux

package bpf

import "fmt"

// CgroupID returns the id of a cgroup directory; cgroups exist on Linux
// only: it returns an error wrapping ErrNotSupported here.
func CgroupID(dir string) (uint64, error) {
	return 0, fmt.Errorf("cgroup id of %s: %w", dir, ErrNotSupported)
}

func detectLayout(string) (layout, error) {
	return layout{}, fmt.Errorf("find cgroup hierarchies: %w", ErrNotSupported)
}
