#!/usr/bin/env bash
# images (docs/images.md), as root:
# 1. layer unpack by the image store (both digests checked; then syncfs
#    and rename) against `tar -xzf` (then `sync -f`) of the same gzip
#    layer on the same disk, as the median of store/tar over the
#    iterations. Goal: within 1.5x.
# 2. launches from an image (containerizer.BenchmarkImageLaunch), each
#    beside the same launch on the host root in the same iteration: a
#    cold pull of a 3-layer image from a loopback registry plus its first
#    launch; a warm launch from the cached image (the cost of overlay per
#    launch: warm/host-root p50, goal ≤ 1.1); 20 launches at once from one
#    image against 20 at once on the host root (wall time until all run);
#    a warm launch into a user namespace (id-mapped layers) against one
#    without.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "images bench: needs root" >&2; exit 1; }
go test -tags seccomp -run '^$' -bench BenchmarkUnpack -benchtime 5x -timeout 30m ./image

N="${IMAGE_BENCH_N:-10}"
load_before=$(cut -d' ' -f1 /proc/loadavg)
out=$(go test -tags seccomp -run '^$' -bench '^BenchmarkImageLaunch$' -benchtime "${N}x" -timeout 30m ./containerizer/)
line=$(echo "$out" | grep -E '^BenchmarkImageLaunch') || { echo "$out" >&2; exit 1; }
set -- $line
shift 4
declare -A m=()
while [ $# -ge 2 ]; do m[$2]=$1; shift 2; done
printf 'launch on the host root               p50 %7.1f ms\n' "${m[host-root-p50-ms]}"
printf 'cold pull (3 layers) + first launch   p50 %7.1f ms   ratio to host root %.2f\n' "${m[cold-pull+launch-p50-ms]}" "${m[cold/host-root-p50-ratio]}"
printf 'warm launch from the image            p50 %7.1f ms   p90 %7.1f ms   ratio to host root %.2f (goal <= 1.1)\n' \
  "${m[warm-image-p50-ms]}" "${m[warm-image-p90-ms]}" "${m[warm/host-root-p50-ratio]}"
printf 'warm launch into a user namespace     p50 %7.1f ms   ratio to the warm launch %.2f (id-mapped layers)\n' \
  "${m[warm-image-userns-p50-ms]}" "${m[userns/warm-image-p50-ratio]}"
printf '20 at once from one image (wall)      p50 %7.1f ms   host root %7.1f ms   ratio %.2f\n' \
  "${m[burst20-image-p50-ms]}" "${m[burst20-host-root-p50-ms]}" "${m[burst20-image/host-root-p50-ratio]}"
echo "images bench: load average $load_before before, $(cut -d' ' -f1 /proc/loadavg) after (N=$N)"
