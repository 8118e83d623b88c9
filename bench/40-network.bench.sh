#!/usr/bin/env bash
# Network isolator (isolator/network), as root:
#  - the time networking adds to a launch: Prepare with a network against
#    Prepare without (baseline, same run); target ≤ 5 ms;
#  - shaping accuracy at 10, 50 and 200 Mbit/s, both directions: wire rate
#    (HTB class counters) and TCP goodput (iperf3) against the limit
#    (goodput is expected at 0.956 of the wire rate: header overhead);
#  - live resize: how long a limit change takes to show on the wire (target
#    ≤ 100 ms);
#  - borrowing: a guaranteed container starting while a best-effort one has
#    borrowed the whole uplink, against the same start on an idle uplink;
#  - latency under load: ping p50 from a container downloading at its
#    20 Mbit/s limit (CUBIC sender) through brim's class (byte-bounded leaf
#    queue), the same class with the old unbounded leaf, and a hand-made tc
#    class (HTB on the sender's veth), all in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
pkg=./isolator/network/
GO=${GO:-go}

metrics() { # benchmark lines → "name unit=value ..."
  awk '/^Benchmark/ { line=$1; sub(/-[0-9]+$/, "", line); for (i = 5; i < NF; i += 2) line = line " " $(i+1) "=" $i; print line }'
}
get() { # get LINE UNIT
  tr ' ' '\n' <<<"$1" | awk -F= -v u="$2" '$1 == u { print $2 }'
}

prep=$($GO test -tags seccomp -run '^$' -bench '^BenchmarkPrepare$' -benchtime 200x "$pkg" | metrics)
rest=$($GO test -tags seccomp -run '^$' -bench '^Benchmark(Shaping|Borrowing)$' -benchtime 1x -timeout 10m "$pkg" | metrics)
rest+=$'\n'$($GO test -tags seccomp -run '^$' -bench '^BenchmarkLiveResize$' -benchtime 3x -timeout 10m "$pkg" | metrics)
rest+=$'\n'$($GO test -tags seccomp -run '^$' -bench '^BenchmarkLatencyUnderLoad$' -benchtime 1x -timeout 10m "$pkg" | metrics)

echo "--- time networking adds to Prepare (200 launches 20 ms apart, median / p90)"
none=$(grep '^BenchmarkPrepare/none ' <<<"$prep")
net=$(grep '^BenchmarkPrepare/network ' <<<"$prep")
nosp=$(grep '^BenchmarkPrepare/network-no-spares ' <<<"$prep")
printf '%-30s %10s %10s %12s\n' "" "median ms" "p90 ms" "cleanup ms"
printf '%-30s %10.3f %10.3f %12.3f\n' "no network (baseline)" "$(get "$none" prepare-ms)" "$(get "$none" prepare-p90-ms)" "$(get "$none" cleanup-ms)"
printf '%-30s %10.3f %10.3f %12.3f\n' "network (2 spare namespaces)" "$(get "$net" prepare-ms)" "$(get "$net" prepare-p90-ms)" "$(get "$net" cleanup-ms)"
printf '%-30s %10.3f %10.3f %12.3f\n' "network, no spares" "$(get "$nosp" prepare-ms)" "$(get "$nosp" prepare-p90-ms)" "$(get "$nosp" cleanup-ms)"
awk -v a="$(get "$net" prepare-ms)" -v c="$(get "$nosp" prepare-ms)" -v b="$(get "$none" prepare-ms)" 'BEGIN { printf "networking adds %.3f ms to a launch (target 5 ms: %.2f of it); %.3f ms without a spare (%.2f)\n", a - b, (a - b) / 5, c - b, (c - b) / 5 }'

echo "--- shaping accuracy (wire rate from the HTB class counters, goodput from iperf3)"
printf '%-8s %-8s %10s %10s %14s %17s\n' "limit" "dir" "wire" "wire/limit" "goodput" "goodput/(0.956×limit)"
grep '^BenchmarkShaping/' <<<"$rest" | while read -r line; do
  name=${line%% *}; name=${name#BenchmarkShaping/}
  printf '%-8s %-8s %10.2f %10.3f %14.2f %17.3f\n' "${name%%/*}" "${name#*/}" \
    "$(get "$line" wire-Mbit/s)" "$(get "$line" wire/limit)" "$(get "$line" goodput-Mbit/s)" "$(get "$line" goodput/expected)"
done

echo "--- live resize, median of 3 (effect = extra/missing bytes after the change ÷ rate difference;"
echo "    0 = within the measurement's noise; target 100 ms)"
grep '^BenchmarkLiveResize/' <<<"$rest" | while read -r line; do
  name=${line%% *}; name=${name#BenchmarkLiveResize/}
  printf '%-6s %s ms effect (%s of the target), Update call %s µs\n' "$name" \
    "$(get "$line" effect-ms)" "$(get "$line" effect/target)" "$(get "$line" update-µs)"
done

echo "--- borrowing (uplink 100 Mbit/s; guaranteed 60, best-effort unlimited)"
idle=$(grep '^BenchmarkBorrowing/idle-uplink' <<<"$rest")
busy=$(grep '^BenchmarkBorrowing/best-effort-borrowing' <<<"$rest")
echo "guaranteed reaches 90 % of 60 Mbit/s (in 50 ms windows) from its first byte: $(get "$idle" rise-ms) ms on an idle uplink (baseline), $(get "$busy" rise-ms) ms while best-effort borrows"
awk -v a="$(get "$busy" rise-ms)" -v b="$(get "$idle" rise-ms)" 'BEGIN { if (b > 0) printf "ratio borrowing/idle: %.2f\n", a / b }'
echo "while both send: guaranteed $(get "$busy" guaranteed-Mbit/s) Mbit/s, best-effort $(get "$busy" best-effort-Mbit/s) Mbit/s"

echo "--- latency under load: ping from a container downloading at its 20 Mbit/s limit (CUBIC sender)"
printf '%-44s %12s %12s %16s\n' "" "ping p50 ms" "ping p90 ms" "goodput Mbit/s"
for v in brim-leaf:"brim class, leaf bounded in bytes" unbounded-leaf:"brim class, unbounded leaf (before)" hand-made-class:"hand-made tc class (baseline)"; do
  line=$(grep "^BenchmarkLatencyUnderLoad/${v%%:*} " <<<"$rest")
  printf '%-44s %12.1f %12.1f %16.2f\n' "${v#*:}" "$(get "$line" ping-p50-ms)" "$(get "$line" ping-p90-ms)" "$(get "$line" goodput-Mbit/s)"
done
brim=$(get "$(grep '^BenchmarkLatencyUnderLoad/brim-leaf ' <<<"$rest")" ping-p50-ms)
unb=$(get "$(grep '^BenchmarkLatencyUnderLoad/unbounded-leaf ' <<<"$rest")" ping-p50-ms)
hand=$(get "$(grep '^BenchmarkLatencyUnderLoad/hand-made-class ' <<<"$rest")" ping-p50-ms)
awk -v a="$brim" -v u="$unb" -v h="$hand" 'BEGIN { printf "ping p50 ratio brim/hand-made: %.2f (unbounded leaf: %.2f)\n", a / h, u / h }'
