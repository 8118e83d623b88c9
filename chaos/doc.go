// Package chaos is brim's seeded fault-injection harness: it runs a real
// master, two or three real agents (each with its own cgroup parent,
// state dir and socket, linked to the master through a Proxy that can
// reset or black-hole the link) and frameworks (`brim run` processes:
// plain tasks, revocable ones, ones in a role with reserved resources),
// injects faults chosen by a PCG seeded from Config.Seed (kill -9 of an
// agent, of the master, of a shim; SIGSTOP of a shim; a link reset; a
// link black hole; a corrupted checkpoint record; a full state dir), and
// checks invariants while it runs and at the end (docs/chaos.md lists them
// and the outcomes each fault allows).
//
// The pure checkers (CheckAllocation, CheckSequence, Judge, ParseStatus)
// are table-tested; Run drives real processes and needs root and the
// binaries of `make build`. The seed fixes the choices (which fault, which
// agent, which task, pauses, workload) but not the interleaving of real
// processes: a replay repeats the schedule, not every timing.
//
// The harness only ever signals processes it started (by PID) or shims it
// verified to belong to its own agents' state dirs, and only touches
// cgroups under its own parents; Run removes everything in t.Cleanup,
// also when the run failed. Each agent's state dir is a small tmpfs the
// harness mounts, so that filling it never fills the machine's disk. The
// only product file it writes is the checkpoint record it corrupts on
// purpose, while the agent that owns it is down.
package chaos
