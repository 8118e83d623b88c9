//go:build unix

package agent

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// diskFull reports whether err is a lack of space or quota.
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// freeBytes is the space unprivileged writers have left on dir's file
// system, -1 when it cannot be told.
func freeBytes(dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize) // conversions: the field types differ between systems
}
