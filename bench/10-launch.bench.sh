#!/usr/bin/env bash
# Container launch latency: brim's containerizer.Launch (API call → user
# process running, i.e. the container's init released to exec it) against
# `runc run -d` (Debian's runc; returns at the same point, after its own
# `start`) on an equivalent bundle: the same busybox rootfs, read-only,
# pid/net/ipc/uts/mount/cgroup namespaces, a cgroup at an absolute path
# under the same parent. Both are measured interleaved in one run
# (containerizer.BenchmarkLaunch), with the full brim binary as the shim
# and with the shim-only binary (cmd/brim-shim). Prints p50/p90
# and the p50 ratio brim/runc (≤ 1 means brim is at least as fast).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "launch bench: needs root" >&2; exit 1; }
command -v runc >/dev/null || { echo "launch bench: runc not installed (make deps)" >&2; exit 1; }
N="${LAUNCH_BENCH_N:-30}"
load_before=$(cut -d' ' -f1 /proc/loadavg)
out=$(go test -tags seccomp -run '^$' -bench '^BenchmarkLaunch$' -benchtime "${N}x" -timeout 20m ./containerizer/)
echo "$out" | grep -E '^Benchmark' | while read -r name _ _ _ rest; do
  # rest: "<v> p50-ms <v> p50-ratio-vs-runc <v> p90-ms <v> runc-p50-ms <v> runc-p90-ms"
  set -- $rest
  declare -A m=()
  while [ $# -ge 2 ]; do m[$2]=$1; shift 2; done
  printf '%-40s brim p50 %6.1f ms p90 %6.1f ms | runc p50 %6.1f ms p90 %6.1f ms | p50 ratio brim/runc %.2f\n' \
    "${name%-*}" "${m[p50-ms]}" "${m[p90-ms]}" "${m[runc-p50-ms]}" "${m[runc-p90-ms]}" "${m[p50-ratio-vs-runc]}"
done
# The ratio is the figure to compare across runs; absolute times follow the
# machine's load.
echo "launch bench: load average $load_before before, $(cut -d' ' -f1 /proc/loadavg) after (N=$N)"
