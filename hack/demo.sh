#!/usr/bin/env bash
# make demo: start a brim agent with its own state dir, socket and cgroup
# parent; run two containers with different limits; resize one while it
# runs; show ls and stats; clean everything up (only what this script made).
set -euo pipefail
cd "$(dirname "$0")/.."

BRIM=${BRIM_BINARY:-$PWD/bin/brim}
[ "$(id -u)" = 0 ] || { echo "demo: run as root (cgroups, containers)" >&2; exit 1; }
[ -x "$BRIM" ] || { echo "demo: $BRIM not built (make build)" >&2; exit 1; }

BASE=$(mktemp -d /tmp/brim-demo.XXXXXX)
STATE=$BASE/state
SOCK=$BASE/agent.sock
PARENT=/brim-demo-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
AGENT_PID=

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
c() { echo "\$ brim container $(printf '%q ' "$@")" >&2; "$BRIM" container --socket "$SOCK" "$@"; }

cleanup() {
  set +e
  if [ -n "$AGENT_PID" ] && kill -0 "$AGENT_PID" 2>/dev/null; then
    for id in $("$BRIM" container ls --socket "$SOCK" --json 2>/dev/null | jq -r '.[].id'); do
      "$BRIM" container rm -f --socket "$SOCK" "$id" >/dev/null
    done
    kill -TERM "$AGENT_PID"      # only the agent this script started
    wait "$AGENT_PID" 2>/dev/null
  fi
  # The cgroup parent is this demo's own (unique name); remove it if empty.
  for d in /sys/fs/cgroup/*/"${PARENT#/}"; do
    [ -d "$d" ] && rmdir "$d" 2>/dev/null
  done
  rm -rf "$BASE"
  echo "demo: cleaned up (agent, containers, cgroup parent $PARENT, $BASE)"
}
trap cleanup EXIT

step "start an agent: cpus:2;mem:1024, cgroup parent $PARENT"
"$BRIM" agent --state-dir "$STATE" --socket "$SOCK" --cgroup-parent "$PARENT" \
  --resources "cpus:2;mem:1024" --kill-grace 2s >"$BASE/agent.log" 2>&1 &
AGENT_PID=$!
for _ in $(seq 100); do
  [ -S "$SOCK" ] && "$BRIM" agent info --socket "$SOCK" >/dev/null 2>&1 && break
  kill -0 "$AGENT_PID" 2>/dev/null || { cat "$BASE/agent.log"; exit 1; }
  sleep 0.1
done
"$BRIM" agent info --socket "$SOCK"

step "run a cpu burner capped at 0.5 cpu and a memory user limited to 96 MiB"
BURNER=$(c run --name burner --cpus 0.5 --cpu-quota --mem 32 -- sh -c 'while :; do :; done')
MEMUSER=$(c run --name memuser --cpus 0.25 --mem 96 -- sh -c 'head -c 48m /dev/zero > /tmp/blob; echo wrote 48 MiB; sleep 600')
echo "burner=$BURNER memuser=$MEMUSER"
sleep 1
c ls
c stats --interval 2s burner memuser

step "resize the burner to 1.5 cpus while it runs"
echo "cpu.cfs_quota_us before: $(cat /sys/fs/cgroup/cpu/"${PARENT#/}"/"$BURNER"/cpu.cfs_quota_us)"
c update --cpus 1.5 burner
echo "cpu.cfs_quota_us after:  $(cat /sys/fs/cgroup/cpu/"${PARENT#/}"/"$BURNER"/cpu.cfs_quota_us)"
c stats --interval 2s burner memuser

step "the agent's accounting"
"$BRIM" agent info --socket "$SOCK"

step "more than is free is refused"
c run --cpus 1 -- true || true

step "logs, kill with grace, exit status"
c logs memuser
c kill --grace 1s memuser
c kill --grace 1s burner
c ls
