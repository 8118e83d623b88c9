#!/usr/bin/env bash
# Time-aware demands (docs/demands.md) on a simulated clock: one simulated
# day of 5,000 demands (random starts, durations, deadlines; half strict,
# some OrderBy chains) on 1,000 simulated agents, with untimed DRF
# frameworks filling the rest, run twice in the same process: planned
# (Book + Plan + the allocator's holds) and plain DRF (timing ignored:
# each demand's tasks queue at its desired start). Prints acceptance,
# deadlines met by accepted strict demands (goal 100 %), mean start
# delay of loose demands, utilization (goal >= 95 %) and the planner's
# time per submitted demand (goal p99 <= 1 ms). DEMAND_BENCH_ARGS passes
# flags (-agents, -demands, -seed, -lead, -loose-lead, -step).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
# shellcheck disable=SC2086
go run ./master/internal/demandbench ${DEMAND_BENCH_ARGS:-}
