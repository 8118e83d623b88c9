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

echo "--- qos: reaction time from the onset (the antagonists' start) to the first correction applied (real cgroups, ${RUNS} runs per mode)"
$GO test -tags "$TAGS" -timeout 40m -run '^$' -bench 'BenchmarkReaction' -benchtime "${RUNS}x" -v ./qos \
  | grep -Ev '^(=== |goos|goarch|pkg|cpu)' | tee "$out"
for mode in event tick tick-plain; do
  p50=$(metric "BenchmarkReaction/$mode" p50-onset-ms); p90=$(metric "BenchmarkReaction/$mode" p90-onset-ms)
  d50=$(metric "BenchmarkReaction/$mode" p50-detect-ms); d90=$(metric "BenchmarkReaction/$mode" p90-detect-ms)
  missed=$(metric "BenchmarkReaction/$mode" missed-runs)
  echo "$mode: from the onset p50 ${p50:-?} ms p90 ${p90:-?} ms (p90 / 2000 ms target: $(ratio "${p90:-0}" 2000)); from the LC's first degraded report p50 ${d50:-?} ms p90 ${d90:-?} ms; runs without a correction in 20 s: ${missed:-?}"
done
ev=$(metric BenchmarkReaction/event p50-onset-ms); tk=$(metric BenchmarkReaction/tick p50-onset-ms); tp=$(metric BenchmarkReaction/tick-plain p50-onset-ms)
echo "p50 from the onset, event-driven / 1 s ticks with re-check: $(ratio "${ev:-0}" "${tk:-0}"); ticks with re-check / plain 1 s ticks: $(ratio "${tk:-0}" "${tp:-0}")"
