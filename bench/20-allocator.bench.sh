#!/usr/bin/env bash
# Allocator cycle at 1k/10k/50k agents x 1/100/1000 frameworks x 1/100
# roles, against the naive baseline of seed 000 (a heap of dominant shares
# rebuilt for every pick) on the same instances in the same run, plus a
# mixed instance (revocable everywhere, reservations, quota, filters).
# Target: 50,000 agents x 1,000 frameworks <= 100 ms per cycle.
# "cpu ms" is the process's user+system time during Allocate (GC included):
# on a shared machine it is steadier than wall time ("ms").
# BENCHTIME=5x changes the iterations per point (default 3x).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
go test -run '^$' -bench '^Benchmark(Naive)?Cycle(Mixed|AllDeclined)?$' -benchtime "${BENCHTIME:-3x}" -count 1 -timeout 30m \
  ./master/allocator/ | tee "$out" | grep -E '^(ok|FAIL)' || true
awk '
/^BenchmarkCycleAllDeclined\// {
  k = ($1 ~ /idle=on/) ? "on" : "off"
  for (i = 3; i < NF; i++) { if ($(i+1) == "ns/op") dns[k] = $i; if ($(i+1) == "cpu-ms/op") dcpu[k] = $i }
  next
}
/^Benchmark(Naive)?Cycle/ {
  split($1, p, "/"); kind = (p[1] ~ /Naive/) ? "naive" : "drf"
  key = (p[1] ~ /Mixed/) ? "mixed: 50000 agents, 1000 fw, 100 roles" : p[2] "/" p[3] "/" p[4]
  sub(/-[0-9]+$/, "", key)
  if (!(key in seen)) { seen[key] = 1; order[n++] = key }
  for (i = 3; i < NF; i++) {
    if ($(i+1) == "ns/op") ns[kind, key] = $i
    if ($(i+1) == "cpu-ms/op") cpu[kind, key] = $i
    if ($(i+1) == "allocs/op") al[kind, key] = $i
    if ($(i+1) == "offers/s") os[kind, key] = $i
    if ($(i+1) == "offers/cycle") oc[kind, key] = $i
  }
}
END {
  if (n == 0) { print "no benchmark output"; exit 1 }
  printf "\n%-42s %9s %9s %7s %10s %7s | %10s %10s %7s | %7s %7s\n", "instance", "ms", "cpu ms", "allocs", "offers/s", "offers", "naive ms", "naive cpu", "allocs", "x wall", "x cpu"
  for (i = 0; i < n; i++) {
    k = order[i]
    if (ns["naive", k] > 0) {
      printf "%-42s %9.2f %9.2f %7d %10.0f %7d | %10.2f %10.2f %7d | %6.1fx %6.1fx\n", k, ns["drf", k] / 1e6, cpu["drf", k], al["drf", k], os["drf", k], oc["drf", k], ns["naive", k] / 1e6, cpu["naive", k], al["naive", k], ns["naive", k] / ns["drf", k], (cpu["drf", k] > 0 ? cpu["naive", k] / cpu["drf", k] : 0)
    } else {
      printf "%-42s %9.2f %9.2f %7d %10.0f %7d | %10s %10s %7s | %7s %7s\n", k, ns["drf", k] / 1e6, cpu["drf", k], al["drf", k], os["drf", k], oc["drf", k], "-", "-", "-", "-", "-"
    }
  }
  if (dns["on"] > 0) printf "%-42s %9.2f %9.2f  (every framework refused every agent; without the idle-agent shortcut: %.2f ms, %.2f cpu ms: %.0fx)\n", "all declined: 2000 agents, 100 fw", dns["on"] / 1e6, dcpu["on"], dns["off"] / 1e6, dcpu["off"], dns["off"] / dns["on"]
  for (j = 0; j < 2; j++) {
    k = (j == 0) ? "agents=50000/frameworks=1000/roles=1" : "agents=50000/frameworks=1000/roles=100"
    if (ns["drf", k] > 0) printf "%sheadline %s: %.1f ms (%.1f cpu ms) per cycle, target <= 100 ms; %.1fx faster than the naive baseline\n", (j == 0 ? "\n" : ""), k, ns["drf", k] / 1e6, cpu["drf", k], ns["naive", k] / ns["drf", k]
  }
}' "$out"
