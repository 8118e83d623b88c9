// Package containerizer owns the lifecycle of brim's containers on one
// host: it validates a launch, creates the container's directory and
// sandbox, asks the isolators to prepare (cgroups, network), starts the
// container's shim (package executor, `brim shim`) detached from the agent,
// calls the isolators' Isolate between the creation of the container's init
// and the exec of the user process, and afterwards waits for, signals,
// kills (SIGTERM, a grace period, then SIGKILL of the whole container),
// resizes, samples, lists and destroys containers. After an agent restart,
// Recover reattaches to the shims that are still running, reports the
// containers that exited meanwhile with their exit status, and removes the
// orphans of launches that never completed.
//
// No call to a shim blocks for ever: each has a deadline
// (Config.ShimTimeout beyond the work asked for, Config.LaunchTimeout for
// a launch's handshake), and Wait asks the shim for its state meanwhile. A
// shim that does not answer — stopped, hung, or alive without its control
// socket — is escalated: the containerizer kills the shim and every process
// in the container's cgroup itself and records the exit with reason
// "shim-unresponsive" (ReasonShimUnresponsive); the other containers are
// served meanwhile (Recover handles containers side by side). When a
// container's exit becomes known, isolators that can (isolator/network's
// Release) give back what it held on the host at once, not at Destroy;
// its address stays in config.json for Info.
//
// A Spec with an Image runs on that image's root: Launch leases the image
// to the container (Config.Images, the image store: its snapshot is the
// container's own upper and work dirs under the shared layers), owns the
// upper dir to a user namespace's root, limits it with a project quota
// where the file system enforces them (DiskUsage measures it elsewhere),
// and the shim mounts it; the snapshot is released with the container
// (Destroy, a failed launch) and, at Recover, for every container that no
// longer exists.
//
// Layout under Config.StateDir:
//
//	containers/<id>/config.json  what was launched (Spec, cgroup path, start time)
//	containers/<id>/bundle.json  what the shim runs (executor.Bundle)
//	containers/<id>/sandbox/     /mnt/sandbox in the container
//	containers/<id>/log/         its stdout and stderr, rotated (internal/containerlog)
//	containers/<id>/exit.json    how it ended, written by the shim
//	containers/<id>/shim.sock    the shim's control socket
//	containers/<id>/shim.pid     the shim's pid; shim.log its log
//	containers/warm-<hex>/       a warm sandbox (no config.json): renamed to <id> at its claim
//	runc/<id>/                   libcontainer's state (runc/<sandbox> for a container
//	                             made from a warm sandbox: config.json's sandbox)
//
// Launch latency: a launch whose shape (root filesystem, user namespace)
// has a warm sandbox ready takes it (pool_linux.go): a container made
// ahead of launches, with everything but its task; the claim renames its
// directory and cgroups, writes the limits and hands the task to its
// exec trampoline (4–5 ms at load 13–17 on this machine against 74–87 ms
// for `runc run -d`: bench/10-launch.bench.sh, docs/benchmarks.md).
// Config.WarmSandboxes bounds how many per shape; how many are kept
// follows the launch rate, none once idle or under memory pressure; each
// serves one task. Isolators must all be isolator.Sandboxers.
//
// A cold launch: the shim is executed from a sealed memfd copy of the
// shim binary made once per Containerizer (so libcontainer need not seal a
// copy per container), and Config.WarmShims shims are kept started ahead
// of launches, each waiting for its container directory on a pipe (a
// taken one is replaced once its launch is done, so that the replacement's
// process start does not compete with the launch for the CPUs). While it
// waits, a warm shim builds what Go and libcontainer cache per process
// (JSON codecs of the container config and state, cgroup mount lookups).
// A launch then costs the isolators' Prepare and libcontainer's
// create/start; the shim checks the init's cgroup and network namespace
// itself and, when every isolator is an isolator.Verifier (brim's are),
// starts the user process without the go-ahead round trip to the
// containerizer (Isolate between the init's creation and its exec), whose
// two process wake-ups each wait for a CPU on a loaded host. The shim
// binds its control socket while libcontainer starts the container, and
// the default seccomp filter covers the host's syscall ABIs only (each
// architecture adds to what the init compiles). With the statically
// linked shim-only binary (cmd/brim-shim) as Config.ShimBinary, a cold
// launch p50 is 0.67–0.77× `runc run -d`'s on the same OCI spec; nearly
// all of it is libcontainer's init. The full brim binary is slower
// because every container init re-executes it and runs the start-up of
// every package linked into it, and it cannot serve warm sandboxes of a
// root other than the host's (its dynamic loader is not there).
//
// Teardown removes what containerizers left on a state dir when no agent
// will run again (`brim agent cleanup`): shims, the containers'
// directories, libcontainer's state.
//
// It never writes cgroup files itself (the isolators do) and never talks to
// the master. It logs through the Config's logger.
//
// Sentinels: ErrNotFound (unknown id), ErrExist (duplicate id),
// ErrNotRunning (the container has exited), ErrCommandNotFound (the command
// does not exist in the container's root filesystem; nothing is left
// behind), ErrNotSupported (non-Linux hosts), ErrNoImageStore (an image
// launch without Config.Images).
//
// ErrNotSupported and ErrNotFound are aliases of internal/errdefs' (the
// latter is agent.ErrNotFound too).
package containerizer
