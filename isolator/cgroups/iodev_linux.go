package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// diskDevices resolves paths to the whole disks holding them ("MAJ:MIN",
// sorted, without duplicates): the block IO controllers refuse partitions.
// sys is where sysfs is mounted. A path on no block device (tmpfs,
// overlay, a btrfs subvolume's anonymous device) is an error wrapping
// ErrInvalid. A path not made yet (an agent's first state dir) is on the
// disk of its nearest existing parent, where it will be made.
func diskDevices(sys string, paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		var st unix.Stat_t
		err := unix.Stat(p, &st)
		for q := p; errors.Is(err, unix.ENOENT) && filepath.Dir(q) != q; {
			q = filepath.Dir(q)
			err = unix.Stat(q, &st)
		}
		if err != nil {
			return nil, fmt.Errorf("io path %s: %w: %w", p, ErrInvalid, err)
		}
		dev := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
		link := filepath.Join(sys, "dev", "block", dev)
		real, err := filepath.EvalSymlinks(link)
		if err != nil {
			return nil, fmt.Errorf("io path %s: device %s is not a block device (tmpfs, overlay?): %w", p, dev, ErrInvalid)
		}
		if _, err := os.Stat(filepath.Join(real, "partition")); err == nil {
			b, err := os.ReadFile(filepath.Join(filepath.Dir(real), "dev"))
			if err != nil {
				return nil, fmt.Errorf("io path %s: disk of partition %s: %w: %w", p, dev, ErrInvalid, err)
			}
			dev = strings.TrimSpace(string(b))
		}
		if !slices.Contains(out, dev) {
			out = append(out, dev)
		}
	}
	slices.Sort(out)
	return out, nil
}
