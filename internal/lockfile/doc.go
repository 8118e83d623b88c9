// Package lockfile holds exclusive advisory locks (flock(2)) on files and
// directories: the agent's state dir, the network isolator's state, and
// the cgroup parent an agent owns. The kernel drops a lock when its holder
// dies, even by kill -9, so no stale lock is ever left to clean up.
//
// Locks are per open file: two Locks on one path conflict also inside one
// process. Sentinels: ErrLocked (another holder has it), ErrNotSupported
// (not Linux).
//
// ErrNotSupported is an alias of internal/errdefs.ErrNotSupported.
package lockfile
