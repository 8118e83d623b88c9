#!/usr/bin/env bash
# eBPF monitor cost, in one run (as root): ns per sched_switch and per wakeup
# from the kernel's BPF run-time statistics; `perf bench sched pipe` pinned
# to one CPU without and with the monitor (cgroup untracked / tracked) as
# ratios to the baseline; reader cost with 100 tracked cgroups polled every
# second. Targets: <= 150 ns per sched_switch, ratio >= 0.90, reader <= 0.1 %
# of one core. Extra flags go to the program (-rounds, -loops, -cpu).
set -euo pipefail
cd "$(dirname "$0")/.."
go run -tags seccomp ./bpf/internal/bpfbench "$@"
