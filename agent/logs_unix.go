//go:build unix

package agent

import "syscall"

// logOpenFlags: never follow a symlink the task planted, never block on
// a FIFO.
const logOpenFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
