#!/usr/bin/env bash
# Launches of real containers end to end through the master
# (internal/launchbench): `brim dev` (a master and an agent) under a cgroup
# parent of its own; tasks of `true` (0.05 cpus, 16 MiB, the agent's
# default user, host root: warm sandboxes serve them). Prints, beside the
# same containers launched on the agent's local API in the same run:
#   - ACCEPT → TASK_RUNNING at the framework, one task at a time, p50/p99,
#     and its p50 over the local launch's (goal ≤ 2);
#   - launches per second sustained from one framework, then from ten
#     (goal ≥ 50), with their ACCEPT → TASK_RUNNING p50/p99 under load;
#   - beside each sustained rate, the node's CPU per launch (brim dev and
#     every process it started), steadier than the rate on a shared host.
# brim dev keeps its containers' runtime state (--run-dir) on a tmpfs the
# bench mounts for it, as /run is under systemd (this VM's /run is on its
# disk); LAUNCH_E2E_RUN_DIR=state runs without one, for comparison.
# runc's figures for the same machine load are bench/10-launch's.
# LAUNCH_E2E_TASKS (default 50) and LAUNCH_E2E_DURATION (default 20s)
# size it.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "launch e2e bench: needs root" >&2; exit 1; }
BRIM=${BRIM_BINARY:-$PWD/bin/brim}
[ -x "$BRIM" ] || { echo "launch e2e bench: $BRIM not built (make build)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/brim-bench-launch-e2e.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/launchbench" ./internal/launchbench
"$tmp/launchbench" -brim "$BRIM" -tasks "${LAUNCH_E2E_TASKS:-50}" -duration "${LAUNCH_E2E_DURATION:-20s}" -frameworks 1,10 -run-dir "${LAUNCH_E2E_RUN_DIR:-tmpfs}"
