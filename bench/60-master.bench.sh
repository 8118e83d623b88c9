#!/usr/bin/env bash
# The master at scale and real containers through it.
#  1. masterbench: N simulated agents (in-process fakes of the agent side of
#     masterlink, no containers) and M simulated frameworks against one real
#     `brim master` process over gRPC: offers/s, task launches/s, the
#     master's allocation cycle p50/p99 and its RSS; baseline in the same
#     run: the bare allocator's full cycle on the same cluster shape.
#     Targets at 10,000 agents x 100 frameworks: cycle p99 <= 1 s, RSS <= 2 GiB.
#     MASTER_BENCH_MAX="20000 50000" adds larger points toward the paper's
#     50,000 nodes (default: 20000). MASTER_BENCH_SIM=0 skips part 1.
#  2. real containers (root): tasks launched through `brim dev` (master +
#     agent) with `brim run -- true`, against the baseline of the same
#     containers run on the agent's local API (`brim container run --wait`).
set -euo pipefail
cd "$(dirname "$0")/.."
BRIM=${BRIM_BINARY:-$PWD/bin/brim}
[ -x "$BRIM" ] || { echo "60-master: $BRIM not built (make build)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/brim-bench-master.XXXXXX)
DEV_PID=
PARENT=/brim-bench-master-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
cleanup() {
  set +e
  if [ -n "$DEV_PID" ] && kill -0 "$DEV_PID" 2>/dev/null; then
    for id in $("$BRIM" container ls --socket "$tmp/agent.sock" --json 2>/dev/null | jq -r '.[].id'); do
      "$BRIM" container rm -f --socket "$tmp/agent.sock" "$id" >/dev/null
    done
    kill -TERM "$DEV_PID"   # only the brim dev this script started
    wait "$DEV_PID" 2>/dev/null
  fi
  for d in /sys/fs/cgroup/*/"${PARENT#/}"; do
    [ -d "$d" ] && rmdir "$d" 2>/dev/null
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
go build -o "$tmp/masterbench" ./master/internal/masterbench
if [ "${MASTER_BENCH_SIM:-1}" = 1 ]; then
  "$tmp/masterbench" -brim "$BRIM" -agents 1000 -frameworks 10 -duration 10s
  "$tmp/masterbench" -brim "$BRIM" -agents 10000 -frameworks 100 -duration 20s
  for n in ${MASTER_BENCH_MAX:-20000}; do
    "$tmp/masterbench" -brim "$BRIM" -agents "$n" -frameworks 100 -duration 20s -agents-per-conn 500 || echo "agents=$n: failed"
  done
fi

# 1b. failover: two masters on a 3-member etcd, N simulated agents and a
#     framework, each etcd member, master and the agents in a process of
#     its own; the leader is killed (SIGKILL). Time to the new leader
#     (goal <= session TTL + 1 s), its first offer, all agents
#     re-registered; baseline: their first registration, same run.
#     MASTER_BENCH_FAILOVER="1000 10000" chooses the points (default all
#     three); 0 skips. The agents' first registration is ramped at 2,000 a
#     second and their process runs at nice 10: their CPU is the
#     simulation's (docs/ha.md, At scale). About 3 minutes.
if [ "${MASTER_BENCH_FAILOVER:-}" != 0 ]; then
  BRIM_FAILOVER_AGENTS="${MASTER_BENCH_FAILOVER:-1000 10000 50000}" \
  BRIM_FAILOVER_RAMP="${BRIM_FAILOVER_RAMP:-2000}" BRIM_FAILOVER_AGENT_NICE="${BRIM_FAILOVER_AGENT_NICE:-10}" \
    go test -run '^$' -bench '^BenchmarkFailover$' -benchtime 1x -timeout 30m ./master/etcdstore/ |
    grep -E 'agents=[0-9]+ TTL|re-registrations after|scheduling latency|allocation cycles' |
    sed 's/^ *failover_bench_test.go:[0-9]*: /failover: /'
fi

if [ "$(id -u)" != 0 ]; then
  echo "real containers: skipped (needs root)"
  exit 0
fi
N=${MASTER_BENCH_TASKS:-20}
addr=127.0.0.1:$((20000 + RANDOM % 20000))
"$BRIM" dev --state-dir "$tmp/dev" --socket "$tmp/agent.sock" --listen "$addr" --cgroup-parent "$PARENT" \
  --resources "cpus:2;mem:2048" --allocation-interval 100ms --log-level warn 2>"$tmp/dev.log" &
DEV_PID=$!
for _ in $(seq 100); do [ -S "$tmp/agent.sock" ] && curl -fs "http://$addr/state" >/dev/null && break; sleep 0.1; done
now() { date +%s.%N; }
t0=$(now)
for i in $(seq "$N"); do "$BRIM" container run --socket "$tmp/agent.sock" --wait --cpus 0.1 --mem 64 -- true >/dev/null; done
t1=$(now)
for i in $(seq "$N"); do "$BRIM" run --master "$addr" --cpus 0.1 --mem 64 -- true >/dev/null; done
t2=$(now)
awk -v n="$N" -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN {
  base = n / (b - a); via = n / (c - b)
  printf "real containers, %d sequential runs of true: agent local API %.1f/s; through the master (brim run: subscribe, offer, launch, wait) %.1f/s = %.2fx the local API\n", n, base, via, via / base
}'
