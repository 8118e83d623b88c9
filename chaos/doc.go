// Package chaos is brim's seeded fault-injection harness: it runs real
// masters (one on a bbolt store, or in HA mode three on a 3-member etcd
// cluster of etcd processes), two or three real agents (each with its own
// cgroup parent, state dir and socket) and frameworks (`brim run`
// processes: plain tasks, revocable ones, ones in a role with reserved
// resources), injects faults chosen by a PCG seeded from Config.Seed, and
// checks invariants while it runs and at the end (docs/chaos.md lists the
// fault kinds, the invariants and the outcomes each fault allows).
//
// Clients reach each master through its front Proxy, which goes down
// with the master's process and cuts one agent's connections (it knows
// them by the agent's PID); in HA mode each master reaches etcd through
// proxies of its own, which etcd-cut stops. A supervisor restarts a
// daemon that exits on its own, as systemd would. The faults: kill -9 of
// an agent, a master (the leader) or a shim; SIGSTOP of a shim or the
// leader; link resets and black holes; a corrupted checkpoint record; a
// full state dir, also under an agent restarted on it; a framework killed
// and its task ID reused; a task flooding its logs; the leader cut from
// etcd with a registry write in flight; the loss of one etcd member or
// of the quorum.
//
// The pure checkers (CheckAllocation, CheckSequence, Judge, CheckForeign,
// CheckReach, CheckFailovers, CheckLogCap, ParseStatus) are
// table-tested; Run drives real processes and needs root, the binaries of
// `make build` and, in HA mode, /usr/bin/etcd. The seed fixes the choices
// (which fault, which agent, master, etcd member or task, pauses,
// workload) but not the interleaving of real processes: a replay repeats
// the schedule, not every timing.
//
// The harness only ever signals processes it started (by PID) or shims it
// verified to belong to its own agents' state dirs, and only touches
// cgroups under its own parents; Run removes everything in t.Cleanup,
// also when the run failed. Each agent's state dir, and the etcd members'
// data, are tmpfs mounts of the harness's own, so that filling them never
// fills the machine's disk. The only product file it writes is the
// checkpoint record it corrupts on purpose, while the agent that owns it
// is down.
package chaos
