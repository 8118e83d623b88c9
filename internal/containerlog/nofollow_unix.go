//go:build unix

package containerlog

import "syscall"

// noFollow: never open a log file through a symlink.
const noFollow = syscall.O_NOFOLLOW
