#!/usr/bin/env bash
# Interference through the standalone agent (hack/experiment.sh, short
# configuration): the latency-critical probe's p99 beside revocable disk
# antagonists, as a ratio to its solo p99 measured in the same run (same
# agent, just before), for --qos noop and --qos interference. Needs root.
# Knobs: INTERFERENCE_SOLO, INTERFERENCE_CONTENDED (seconds),
# INTERFERENCE_ANTAGONIST (dd, hdd, vm, cpu; default dd).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d /var/tmp/brim-bench-interference.XXXXXX)
trap 'rm -rf "$out"' EXIT

bash hack/experiment.sh --solo "${INTERFERENCE_SOLO:-8}" --contended "${INTERFERENCE_CONTENDED:-12}" --after 0 \
  --antagonist "${INTERFERENCE_ANTAGONIST:-dd}" --out "$out/results"

# row MODE PHASE FIELD: a field of results.tsv (columns: mode phase windows
# p50_us p99_us p99_max_us p99_ratio corrections).
row() { awk -F'\t' -v m="$1" -v p="$2" -v f="$3" '$1 == m && $2 == p { print $f }' "$out/results/results.tsv"; }
ncorr() { jq '[.recent[] | select(.type != "THAW" and .type != "UNTHROTTLE")] | length' "$out/results/$1/explain.json"; }
echo
echo "--- LC p99 with antagonists / solo (same run, same agent; medians of 500 ms windows)"
echo "qos noop:         solo $(row noop solo 5) us, with antagonists $(row noop antagonists 5) us: ratio $(row noop antagonists 7) ($(ncorr noop) corrections)"
echo "qos interference: solo $(row interference solo 5) us, with antagonists $(row interference antagonists 5) us: ratio $(row interference antagonists 7) ($(ncorr interference) corrections)"
if [ -n "$(row interference 'corrected(+1s)' 5)" ]; then
  echo "qos interference, from 1 s after the first correction: $(row interference 'corrected(+1s)' 5) us: ratio $(row interference 'corrected(+1s)' 7); correction: $(row interference before-correction 8)"
fi
