// Package bpf owns brim's eBPF scheduler and OOM monitor: the C source
// (sched.c), its bpf2go-generated bindings and object (committed, so a build
// never needs clang), the loader, and a fallback reader that gives the same
// statistics from /proc/<tid>/schedstat and cgroup files when BPF cannot be
// used.
//
// Per tracked cgroup (the cpu hierarchy's cgroup on v1, the unified one on
// v2; keyed by the cgroup directory's inode number, see CgroupID) it reports
// cumulative counters (CgroupStats): a log2 histogram of run-queue waits,
// their sum and count, on-CPU time, wakeups and switches. Readers compute
// per-interval deltas with CgroupStats.Sub and quantiles with
// Histogram.Quantile. Monitor also reports OOM kills with the victim's
// cgroups (ReadOOM).
//
// The package never logs, never starts goroutines of its own, and never
// writes to a cgroup: it only reads cgroup files and /proc. The caller (the
// agent's monitor) chooses between Monitor and Fallback, logs why, and
// exports which source is active (Source).
//
// Sentinels: ErrNotSupported (BPF unusable here: no BTF, no permission,
// program rejected, not Linux/amd64), ErrNotTracked (unknown cgroup id),
// ErrFull (no free slot for another cgroup), ErrClosed (used after Close).
//
// ErrNotSupported is an alias of internal/errdefs.ErrNotSupported.
package bpf
