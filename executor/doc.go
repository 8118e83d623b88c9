// Package executor is the per-container shim (`brim shim`): one process per
// container, started detached by the containerizer, that owns the
// libcontainer container, reaps its init process, records how it ended in
// the container's directory (exit.json, written atomically) and serves a
// small versioned JSON control protocol on a unix socket (State, Signal,
// Kill with a grace period, Wait). A shim and its container keep running
// when the agent dies; a new agent reattaches with a Client or, once the
// shim is gone, learns the outcome from ReadExit. Every Client call but Wait
// has a deadline (the work asked for plus the client's timeout): a stopped
// or hung shim makes it return ErrShimUnresponsive, never hang.
//
// The package owns the container directory layout (Bundle, file names), the
// libcontainer configuration (host root read-only with the bundle's hidden
// paths masked, a rootfs directory, or an image's layers under the
// container's upper dir, mounted in the shim's mount namespace and
// id-mapped onto a user namespace's range; the process's uid and gid; a
// private /tmp, the sandbox at /mnt/sandbox, namespaces pid/mount/ipc/uts/net,
// runc's default capabilities, masked and read-only /proc paths,
// no_new_privileges, and a default seccomp profile when built with the
// seccomp tag), and both ends of the control protocol.
//
// A warm sandbox (Bundle.Warm) is a container made before its task: the
// shim makes it as for a launch, with the exec trampoline
// (executor/trampoline, C run before the Go runtime) as its process, and
// reports "ready"; its claim names the task's bundle, and the trampoline
// does the end of libcontainer's init for it (user, capabilities,
// environment, working directory, exec). See handshake.go.
//
// A warm shim (RunOptions.Prepare) makes, while it waits, what the next
// container without a user namespace would otherwise have libcontainer
// make on its launch's path: its network, IPC and UTS namespaces and its
// /dev, /dev/pts, /dev/shm, /dev/mqueue, /tmp and /sys as detached mounts;
// a launch takes what its config asks for in the same terms
// (ready_linux.go). A recycled one (RunOptions.Recycle) runs container
// after container, and tells the containerizer why when it stops
// (EventRetired; recycle_linux.go).
//
// On a cgroup v1 host the shim joins the init to its groups late, and so
// assembles the container's /sys/fs/cgroup itself from the container's
// own groups (cgroupview_linux.go).
//
// It never creates or writes cgroup files (the isolators do; libcontainer
// only joins the prepared cgroup and applies device rules, and the shim
// joins a warm sandbox's init to its unified group at the claim), never
// talks to the master and never logs outside the shim process (Run takes
// a logger).
//
// Sentinels: ErrNotRunning (the container has already exited),
// ErrNotConfined (the init is not in the bundle's cgroup or network
// namespace; the user process never ran),
// ErrShimGone (no shim answers on the control socket), ErrShimUnresponsive
// (a shim holds the socket but does not answer in time), ErrCommandNotFound
// (the command does not exist in the container's root filesystem),
// ErrNotSupported (non-Linux builds).
//
// ErrNotSupported is an alias of internal/errdefs.ErrNotSupported.
package executor
