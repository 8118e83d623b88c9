#!/usr/bin/env bash
# Container launch latency: brim's containerizer.Launch (API call → user
# process running, i.e. the container's init released to exec it) with the
# real cgroup isolator, against `runc run -d` (Debian's runc; returns at
# the same point, after its own `start`) on the equivalent bundle: the OCI
# spec brim's shim runs (executor.RuntimeSpec: same busybox rootfs,
# read-only, namespaces, mounts, masked paths, seccomp profile), the same
# cpu shares, a cgroup at an absolute path under the same parent. Each
# iteration launches one container with the full brim binary as the shim,
# one with the shim-only binary (cmd/brim-shim) and one with runc, so all
# three see the same load (containerizer.BenchmarkLaunch), plus one with the
# shim-only binary into a user namespace (docs/security.md). Prints p50/p90,
# the p50 ratios brim/runc (≤ 1 means brim is at least as fast) and the p50
# ratio of a launch with a user namespace to one without (its cost).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "launch bench: needs root" >&2; exit 1; }
command -v runc >/dev/null || { echo "launch bench: runc not installed (make deps)" >&2; exit 1; }
N="${LAUNCH_BENCH_N:-30}"
load_before=$(cut -d' ' -f1 /proc/loadavg)
out=$(go test -tags seccomp -run '^$' -bench '^BenchmarkLaunch$' -benchtime "${N}x" -timeout 20m ./containerizer/)
line=$(echo "$out" | grep -E '^BenchmarkLaunch') || { echo "$out" >&2; exit 1; }
# line: "BenchmarkLaunch-2 N ns/op <v> <unit> <v> <unit> ..."
set -- $line
shift 4
declare -A m=()
while [ $# -ge 2 ]; do m[$2]=$1; shift 2; done
printf 'runc run -d (equivalent bundle)    p50 %6.1f ms  p90 %6.1f ms\n' "${m[runc-p50-ms]}" "${m[runc-p90-ms]}"
for v in brim-shim brim; do
  printf 'brim, shim = %-21s p50 %6.1f ms  p90 %6.1f ms  p50 ratio brim/runc %.2f\n' \
    "$v" "${m[$v-p50-ms]}" "${m[$v-p90-ms]}" "${m[$v/runc-p50-ratio]}"
done
printf 'brim, shim = brim-shim, userns    p50 %6.1f ms  p90 %6.1f ms  p50 ratio userns/plain %.2f\n' \
  "${m[brim-shim-userns-p50-ms]}" "${m[brim-shim-userns-p90-ms]}" "${m[userns/plain-p50-ratio]}"
# The ratios are the figures to compare across runs; absolute times follow
# the machine's load.
echo "launch bench: load average $load_before before, $(cut -d' ' -f1 /proc/loadavg) after (N=$N)"
