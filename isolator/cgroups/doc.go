// Package cgroups is brim's cgroup isolator: one cgroup per container under
// an absolute, configurable parent (default "/brim"), on cgroup v1 (also the
// v1 side of a hybrid host) and on cgroup v2 (unified).
//
// It owns the container groups below its parent in every hierarchy: it
// creates them with cpu shares/weight, an optional CFS quota, a memory limit
// and a pids limit (Config.DefaultPids when the limits ask for none); changes those limits while the container runs (live
// resize); writes what its Policy derives from the container's class so
// that an oversubscribed node sheds best-effort (revocable) work first —
// oom_score_adj (through Launch, and for the group's processes on Update
// and Recover), a memory soft limit (v1 memory.soft_limit_in_bytes, v2
// memory.high), memory.low for guaranteed containers on v2 (their sum on
// the parent), the io weight (blkio.weight / io.weight where the host has
// a weight file) — and caps a container's IO on request (ThrottleIO: v1
// blkio.throttle.*, v2 io.max); reads usage (cpu, throttling, memory, pids, OOM kills, PSI);
// freezes and thaws; reports OOM events; and removes the groups (also the
// unified directory libcontainer adds on a hybrid host) on cleanup and after
// an agent restart.
//
// Computing the file writes is a pure step (Plan), table-tested for v1 and
// v2; applying them is a thin loop of raw writes. Stats parsers take an
// io.Reader or a directory and are tested on fixture trees in testdata/.
// Usage keeps each group's stat files open from its first call until
// Cleanup and rereads them with pread (opening a kernfs file costs about
// 20× a read); the limits brim wrote are taken from its record rather
// than read back. About a dozen descriptors are held per sampled group.
//
// It never kills or moves processes — except Teardown, for `brim agent
// cleanup` with no agent running, which kills every process under its
// parent and removes the parent — never writes to a cgroup outside its
// parent (it creates the parent itself if missing, and on v1 copies
// cpuset.cpus/mems into it), never decides policy (the QoS controller asks
// for throttling through SetCPUQuota and Freeze) and never logs.
//
// Sentinels: ErrInvalid (bad configuration, container ID or limits; a
// parent Teardown refuses), ErrBusy (a group still holds processes on
// cleanup or teardown), ErrMemoryInUse (a
// memory limit below what the container uses and the kernel cannot
// reclaim), ErrNotMember (Isolate with a pid outside the group), and the
// contract's isolator.ErrNotFound (no group for that ID) and
// isolator.ErrNotSupported (a host without a controller the limits need).
package cgroups
