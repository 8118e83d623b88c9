#!/usr/bin/env bash
# Oversubscription benchmarks (monitor, estimator/QoS decisions, QoS reaction
# time). Each prints its figures and a ratio against a baseline or target
# measured in the same run. Needs root (real cgroups).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
TAGS=${TAGS:-seccomp}
RUNS=${QOS_REACTION_RUNS:-10}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# metric NAME UNIT: the value printed before UNIT on the benchmark line NAME.
metric() {
  awk -v b="$1" -v u="$2" '$1 ~ "^"b"(-[0-9]+)?$" { for (i = 2; i <= NF; i++) if ($i == u) print $(i-1) }' "$out" | tail -1
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "n/a"; else printf "%.2f", a / b }'; }

echo "--- monitor: one sampling round over 100 containers"
$GO test -tags "$TAGS" -run '^$' -bench 'BenchmarkSample100$|BenchmarkSampleCgroups100$|BenchmarkHost$' \
  -benchtime 50x ./monitor | tee "$out"
fake=$(metric BenchmarkSample100 ns/op)
real=$(metric BenchmarkSampleCgroups100 ns/op)
pct=$(metric BenchmarkSampleCgroups100 pct-core-at-1Hz)
echo "monitor cpu at 1 Hz with 100 real cgroups: ${pct}% of one core; ratio to the 1 % target: $(ratio "$pct" 1)"
echo "monitor's own work (fake source) vs a real round (wall): $(ratio "$fake" "$real")"

echo "--- qos: one interference decision over 100 containers vs one monitor round (fake source)"
$GO test -tags "$TAGS" -run '^$' -bench 'BenchmarkInterference100$' -benchtime 2000x ./qos | tee "$out"
dec=$(metric BenchmarkInterference100 ns/op)
echo "decision / monitor round: $(ratio "$dec" "$fake")"

echo "--- qos: reaction time to the first correction applied (real cgroups, ${RUNS} runs per mode)"
$GO test -tags "$TAGS" -timeout 30m -run '^$' -bench 'BenchmarkReaction' -benchtime "${RUNS}x" -v ./qos \
  | grep -Ev '^(=== |goos|goarch|pkg|cpu)' | tee "$out"
ev50=$(metric BenchmarkReaction/event p50-onset-ms); ev90=$(metric BenchmarkReaction/event p90-onset-ms)
tk50=$(metric BenchmarkReaction/tick p50-onset-ms); tk90=$(metric BenchmarkReaction/tick p90-onset-ms)
evd=$(metric BenchmarkReaction/event p50-detect-ms); evd90=$(metric BenchmarkReaction/event p90-detect-ms)
tkd=$(metric BenchmarkReaction/tick p50-detect-ms); tkd90=$(metric BenchmarkReaction/tick p90-detect-ms)
echo "from the onset of real degradation (the first of 2 degraded LC windows in a row): event-driven p50 ${evd:-?} ms p90 ${evd90:-?} ms; 1 s ticks p50 ${tkd:-?} ms p90 ${tkd90:-?} ms"
echo "tick p90 from degradation / 2000 ms target: $(ratio "${tkd90:-0}" 2000); event-driven p90 / target: $(ratio "${evd90:-0}" 2000)"
echo "from the antagonists' start (includes the time until the LC degrades): event-driven p50 ${ev50:-?} ms p90 ${ev90:-?} ms; ticks p50 ${tk50:-?} ms p90 ${tk90:-?} ms"
echo "event-driven / tick p50 from degradation: $(ratio "${evd:-0}" "${tkd:-0}")"
