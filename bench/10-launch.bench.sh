#!/usr/bin/env bash
# Container launch latency (containerizer.BenchmarkLaunch): brim's
# Launch (API call → user process running, i.e. the container's init
# released to exec it) with the real cgroup isolator and the shim-only
# binary, against `runc run -d` (Debian's runc; returns at the same point,
# after its own `start`) on the equivalent bundle: the OCI spec brim's
# shim runs (executor.RuntimeSpec: same busybox rootfs, read-only,
# namespaces, mounts, masked paths, seccomp profile), the same cpu shares,
# a cgroup at an absolute path under the same parent. Both keep their
# runtime state (brim's run dir, runc's root) on one tmpfs of the bench's
# own, as /run is under systemd; LAUNCH_BENCH_RUN_DIR=state keeps it on
# this machine's disk instead (the sandboxes and logs are there either
# way).
#
# A cold launch makes the container from nothing (with a warm shim, which
# made the container's namespaces and /dev, /tmp and /sys mounts while it
# waited; "nothing made ahead" has libcontainer make them on the launch's
# path; "no warm shim" starts the shim process on the launch's path too); a warm
# launch takes a warm sandbox (docs/architecture.md, "Warm sandboxes").
# Cold launches and runc's share one phase of rounds in random order, the
# warm launches a second phase (a pool with sandboxes ready keeps the
# kernel's cgroup-attach lock warm, which would speed runc too). Prints
# p50/p99, the p50 ratios to runc (goals: warm p50 ≤ 5 ms, cold p50 ≤ 0.5×
# runc), what a user namespace costs, the median of every launch step, and
# the load average: the machine is shared, compare ratios across runs.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "launch bench: needs root" >&2; exit 1; }
command -v runc >/dev/null || { echo "launch bench: runc not installed (make deps)" >&2; exit 1; }
N="${LAUNCH_BENCH_N:-30}"
steps=$(mktemp)
trap 'rm -f "$steps"' EXIT
load_before=$(cut -d' ' -f1 /proc/loadavg)
out=$(LAUNCH_BENCH_STEPS="$steps" go test -tags seccomp -run '^$' -bench '^BenchmarkLaunch$' -benchtime "${N}x" -timeout 30m ./containerizer/)
line=$(echo "$out" | grep -E '^BenchmarkLaunch') || { echo "$out" >&2; exit 1; }
# line: "BenchmarkLaunch-2 N ns/op <v> <unit> <v> <unit> ..."
set -- $line
shift 4
declare -A m=()
while [ $# -ge 2 ]; do m[$2]=$1; shift 2; done
row() { printf '%-40s p50 %7.2f ms  p99 %7.2f ms' "$1" "${m[$2-p50-ms]}" "${m[$2-p99-ms]}"; }
row 'runc run -d (equivalent bundle)' runc; echo
row 'brim cold (warm shim)' cold; printf '  p50 ratio to runc %.2f\n' "${m[cold/runc-p50-ratio]}"
row 'brim cold, nothing made ahead' cold-unprepared; printf '  p50 ratio of cold to it %.2f\n' "${m[prepared/unprepared-p50-ratio]}"
row 'brim cold, no warm shim' cold-spawn; echo
row 'brim cold, user namespace' cold-userns; printf '  p50 ratio to cold %.2f\n' "${m[userns/plain-p50-ratio]}"
row 'brim warm sandbox' warm; printf '  p50 ratio to runc %.2f\n' "${m[warm/runc-p50-ratio]}"
row 'brim warm sandbox, user namespace' warm-userns; echo
echo "runtime state (brim's run dir, runc's root): ${LAUNCH_BENCH_RUN_DIR:-tmpfs}"
echo "launch steps:"
sed 's/^/  /' "$steps"
# The ratios are the figures to compare across runs; absolute times follow
# the machine's load.
echo "launch bench: load average $load_before before, $(cut -d' ' -f1 /proc/loadavg) after (N=$N)"
