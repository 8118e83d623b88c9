#!/usr/bin/env bash
# Live resize of a running container's cgroup (cpu shares + memory limit):
# brim's isolator/cgroups Update vs containerd/cgroups Update on a twin
# group, interleaved in one run. Target: p50 < 1 ms. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
go test -tags "${TAGS:-seccomp}" -run '^$' -bench '^BenchmarkUpdate$' -benchtime 2000x -count 3 ./isolator/cgroups/ |
  awk '/^Benchmark/ {
         for (i = 3; i < NF; i += 2) m[$(i+1)] = $i
         printf "live-resize p50 %.1f µs  p90 %.1f µs  p99 %.1f µs  containerd p50 %.1f µs  ratio containerd/brim %.2fx\n",
           m["p50-µs"], m["p90-µs"], m["p99-µs"], m["containerd-p50-µs"], m["containerd/brim"]
         if (m["p50-µs"] >= 1000) { print "WARN: p50 above the 1 ms target"; }
       }
       /^(FAIL|ok|PASS)/ { print }'
