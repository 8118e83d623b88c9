#!/usr/bin/env bash
# Container logs: what the shim costs to log a container's output, and
# that a flood stays within the log bound.
#  1. containerlog.BenchmarkWrite: ms per MB of output for lines of 2 and
#     100 bytes and for output without newlines, against writing the same
#     chunks unformatted to a file in the same run (log/raw ratio).
#  2. End to end (real agent, shim, container): `yes` as fast as it can
#     for FLOOD seconds (default 30), once at the agent's default
#     --log-rate and once without a rate: the largest size of the log dir
#     sampled every 0.5 s against the bound (--log-max-size ×
#     --log-max-files, defaults 10MiB × 5), and the shim's CPU time per MB
#     of output and as a share of one CPU, against the container's own CPU
#     time (shim/container ratio). Needs root and bin/brim (make build).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "logs bench: needs root" >&2; exit 1; }
BRIM="${BRIM_BINARY:-$PWD/bin/brim}"
FLOOD="${LOGS_BENCH_SECONDS:-30}"

go test -run '^$' -bench '^BenchmarkWrite$' -benchtime 200x ./internal/containerlog/ |
  awk '/^BenchmarkWrite/ {
         for (i = 3; i < NF; i += 2) m[$(i+1)] = $i
         printf "writer %-16s %7.2f ms/MB  raw %5.2f ms/MB  ratio log/raw %5.2fx  records %.2f bytes/byte\n",
           substr($1, 16), m["ms/MB"], m["raw-ms/MB"], m["log/raw"], m["record-bytes/byte"]
       }'

# What a flood leaves if the script stops half-way: its containers, agent,
# cgroup parent and state dir.
cur_agent="" cur_base="" cur_parent="" cur_sock=""
cleanup() {
  [ -n "$cur_sock" ] && for id in $("$BRIM" container ls --json --socket "$cur_sock" 2>/dev/null | sed -n 's/.*"id": "\([0-9a-f]*\)".*/\1/p'); do
    "$BRIM" container rm -f --socket "$cur_sock" "$id" >/dev/null 2>&1 || true
  done
  [ -n "$cur_agent" ] && { kill "$cur_agent" 2>/dev/null; wait "$cur_agent" 2>/dev/null || true; }
  [ -n "$cur_parent" ] && for c in /sys/fs/cgroup/*"$cur_parent"; do rmdir "$c" 2>/dev/null || true; done
  [ -n "$cur_base" ] && rm -rf "$cur_base"
  cur_agent="" cur_base="" cur_parent="" cur_sock=""
}
trap cleanup EXIT

tick() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
hz=$(getconf CLK_TCK)
flood() { # $1: label, rest: agent flags
  local label=$1; shift
  local base; base=$(mktemp -d /var/tmp/brim-logbench.XXXXXX)
  local parent="/brim-logbench-$$-$RANDOM"
  local sock="$base/agent.sock" state="$base/state"
  "$BRIM" agent --state-dir "$state" --socket "$sock" --cgroup-parent "$parent" \
    --resources "cpus:2;mem:2048" "$@" >"$base/agent.log" 2>&1 &
  local agent=$!
  cur_agent=$agent cur_base=$base cur_parent=$parent cur_sock=$sock
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
  local id; id=$("$BRIM" container run --socket "$sock" --cpus 1 --mem 64 -- \
    sh -c "timeout $FLOOD yes brim-flood-line-of-32-bytes-long")
  local dir="$state/containers/$id" maxdir=0 t0 t1 shim c0
  shim=$(cat "$dir/shim.pid")
  t0=$(tick "$shim")
  c0=$(cat "/sys/fs/cgroup/cpuacct$parent/$id/cpuacct.usage" 2>/dev/null || echo 0)
  local c1=$c0
  while [ "$("$BRIM" container inspect --socket "$sock" "$id" | sed -n 's/.*"state": "\(.*\)",/\1/p')" = running ]; do
    local n; n=$(du -sb "$dir/log" | cut -f1)
    [ "$n" -gt "$maxdir" ] && maxdir=$n
    t1=$(tick "$shim")
    c1=$(cat "/sys/fs/cgroup/cpuacct$parent/$id/cpuacct.usage" 2>/dev/null || echo "$c1")
    sleep 0.5
  done
  local in; in=$(sed -n 's/.*container output logged.* bytes=\([0-9]*\).*/\1/p' "$dir/shim.log" | tail -1)
  awk -v l="$label" -v inb="${in:-0}" -v st=$(( t1 - t0 )) -v hz="$hz" -v c=$(( c1 - c0 )) -v s="$FLOOD" -v d="$maxdir" '
    BEGIN {
      shim = st / hz; cont = c / 1e9; mb = inb / 1048576
      printf "flood %-20s %6.0f MB in %ss; log dir at most %.1f MiB (bound 50 MiB); shim %.2f s CPU = %.1f%% of a CPU, %.2f ms/MB; container %.2f s CPU; shim/container %.2f\n",
        l, mb, s, d / 1048576, shim, 100 * shim / s, (mb > 0 ? 1000 * shim / mb : 0), cont, (cont > 0 ? shim / cont : 0)
    }'
  cleanup
}
flood "default --log-rate" 
flood "--log-rate 0" --log-rate 0
