#!/usr/bin/env bash
# Allocator cycle at 1k/10k/50k agents x 1/100/1000 frameworks x 1/100
# roles, against the naive baseline of seed 000 (a heap of dominant shares
# rebuilt for every pick) on the same instances in the same run.
# Target: 50,000 agents x 1,000 frameworks <= 100 ms per cycle.
# BENCHTIME=5x to change the iterations per point (default 3x).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go test -run '^$' -bench '^Benchmark(Naive)?Cycle$' -benchtime "${BENCHTIME:-3x}" -count 1 -timeout 30m \
  ./master/allocator/ | tee "$out" | grep -E '^(Benchmark|ok|FAIL)' >&2
awk '
/^Benchmark(Naive)?Cycle\// {
  split($1, p, "/"); kind = (p[1] ~ /Naive/) ? "naive" : "drf"
  key = p[2] "/" p[3] "/" p[4]; sub(/-[0-9]+$/, "", key)
  if (!(key in seen)) { seen[key] = 1; order[n++] = key }
  for (i = 3; i < NF; i++) {
    if ($(i+1) == "ns/op") ns[kind, key] = $i
    if ($(i+1) == "allocs/op") al[kind, key] = $i
    if ($(i+1) == "offers/s") os[kind, key] = $i
    if ($(i+1) == "offers/cycle") oc[kind, key] = $i
  }
}
END {
  printf "\n%-42s %12s %10s %12s %8s | %12s %10s | %8s\n", "instance", "ms/cycle", "allocs/op", "offers/s", "offers", "naive ms", "allocs", "speedup"
  for (i = 0; i < n; i++) {
    k = order[i]
    r = (ns["drf", k] > 0 && ns["naive", k] > 0) ? ns["naive", k] / ns["drf", k] : 0
    printf "%-42s %12.2f %10d %12.0f %8d | %12.2f %10d | %7.1fx\n", k, ns["drf", k] / 1e6, al["drf", k], os["drf", k], oc["drf", k], ns["naive", k] / 1e6, al["naive", k], r
  }
  k = "agents=50000/frameworks=1000/roles=100"
  if (ns["drf", k] > 0) printf "\nheadline %s: %.1f ms per cycle (target <= 100 ms), %.1fx the naive baseline\n", k, ns["drf", k] / 1e6, ns["naive", k] / ns["drf", k]
  k = "agents=50000/frameworks=1000/roles=1"
  if (ns["drf", k] > 0) printf "headline %s: %.1f ms per cycle (target <= 100 ms), %.1fx the naive baseline\n", k, ns["drf", k] / 1e6, ns["naive", k] / ns["drf", k]
}' "$out"
