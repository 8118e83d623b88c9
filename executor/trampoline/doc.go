// Package trampoline is the exec trampoline of a warm sandbox: C code run
// by a constructor before the Go runtime starts, in a process whose
// environment names the trampoline's pipes (EnvVar). Import it for its
// side effect in every binary that serves as the shim (cmd/brim,
// cmd/brim-shim), as libcontainer's nsenter is.
//
// A warm sandbox's container is made by libcontainer as for any launch,
// with this binary (a sealed copy, passed as a file descriptor) as its
// process: root in the container, with the container's capabilities plus
// CAP_SETUID, CAP_SETGID and CAP_SETPCAP, under its seccomp filter and
// no_new_privs. The trampoline blocks reading the task's message from its
// pipe (the shim writes it at the claim: see executor.TrampolineMessage
// for the format), then does what libcontainer's init does between its
// set-up and exec, in libcontainer's order: chdir (as root, then again as
// the user if root was refused), the bounding set, setgroups, setgid,
// setuid, the check that the working directory is inside the container,
// the capability sets, the ambient set, the PATH lookup of argv[0] as the
// user, and execve. The process the task sees is libcontainer's in every
// field a process has (docs/architecture.md, "Warm sandboxes").
//
// It writes "+" on its status pipe once it runs (the sandbox is ready),
// "x" right before its execve, and reports failure as one line
// "kind\tmessage" (after the "x" when the execve itself failed) and
// exits with 127; a successful execve closes the pipe (close-on-exec).
// Kinds: "notfound" (argv[0] not found or not executable, as
// ErrCommandNotFound), "error" (anything else).
//
// It never runs in a process whose environment lacks EnvVar, and costs
// other processes one getenv.
package trampoline

// EnvVar names, in the trampoline's environment, its message and status
// descriptors: "MSG,STATUS".
const EnvVar = "_BRIM_TRAMPOLINE"
