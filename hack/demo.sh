#!/usr/bin/env bash
# make demo: the main job, end to end, as root, in well under a minute.
#
# Part 1, the node runtime: a brim agent with its own state dir, socket and
# cgroup parent runs two containers with different limits, resizes one
# while it runs, shows ls and stats, and kills them.
#
# Part 2, the cluster: `brim dev` (a master and an agent in one process)
# on 127.0.0.1, two frameworks (examples/drf-demo) with the demand vectors
# of the DRF paper's example scaled to this host, real containers; the
# master's dominant shares are printed next to the paper's prediction and
# checked; `brim run` passes a task's exit code through; then a task runs
# from an OCI image through the master: the script builds a two-layer
# image (busybox and an app layer) as an OCI layout, pushes it with skopeo
# to a docker-registry it starts on loopback, and `brim run --image` has
# the agent pull, verify and run it (docs/images.md).
#
# Everything the script makes (processes, containers, cgroup parents, the
# temp dir) is removed on exit, and checked to be gone. Exit status: 0 when
# every check passed.
set -euo pipefail
cd "$(dirname "$0")/.."

BRIM=${BRIM_BINARY:-$PWD/bin/brim}
GO=${GO:-go}
[ "$(id -u)" = 0 ] || { echo "demo: run as root (cgroups, containers)" >&2; exit 1; }
[ -x "$BRIM" ] || { echo "demo: $BRIM not built (make build)" >&2; exit 1; }
command -v jq >/dev/null || { echo "demo: jq missing (make deps)" >&2; exit 1; }
for tool in docker-registry skopeo sha256sum; do
  command -v "$tool" >/dev/null || { echo "demo: $tool missing (make deps)" >&2; exit 1; }
done

# BRIM_DEMO_TAG names the cgroup parents (default: random), for a caller
# that checks they are gone; the temp dir is made under $TMPDIR.
TAG=${BRIM_DEMO_TAG:-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')}
[[ $TAG =~ ^[a-z0-9-]+$ ]] || { echo "demo: BRIM_DEMO_TAG $TAG: want [a-z0-9-]+" >&2; exit 1; }
BASE=$(mktemp -d "${TMPDIR:-/tmp}/brim-demo.XXXXXX")
STATE=$BASE/agent-state
SOCK=$BASE/agent.sock
PARENT=/brim-demo-$TAG         # part 1's agent
DEV_STATE=$BASE/dev
DEV_SOCK=$DEV_STATE/agent.sock
DEV_PARENT=/brim-demo-dev-$TAG # part 2's brim dev
AGENT_PID= DEV_PID= FW_A= FW_B= REG_PID=
MASTER=

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
note() { printf '\033[2m# %s\033[0m\n' "$*"; }
fail() { printf '\033[31mdemo: FAIL: %s\033[0m\n' "$*" >&2; exit 1; }
ok() { printf '\033[32mok\033[0m %s\n' "$*"; }
c() { echo "\$ brim container $(printf '%q ' "$@")" >&2; "$BRIM" container --socket "$SOCK" "$@"; }
alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }
# The daemons and frameworks run under setsid, in their own session, so
# that a Ctrl-C reaches only this script, whose trap stops them in order
# (the frameworks kill their tasks while the master still runs). setsid
# execs them in place: $! is their PID.

# wait_until SECONDS WHAT CMD…: poll CMD every 0.2 s; fail naming WHAT
# after SECONDS (bounded waits: this machine is shared and may be slow),
# with $LAST, which CMD may set to say what it saw.
LAST=
wait_until() {
  local secs=$1 what=$2 deadline
  shift 2
  deadline=$((SECONDS + secs))
  LAST=
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || fail "timed out after ${secs}s waiting for $what${LAST:+ (last seen: $LAST)}"
    sleep 0.2
  done
}

# stop_pid PID SECONDS: SIGTERM a process this script started, SIGKILL it
# after SECONDS. Returns its exit status.
stop_pid() {
  alive "$1" && kill -TERM "$1" 2>/dev/null
  reap "$@"
}

# reap PID SECONDS: wait for a process this script started and signalled
# (a second SIGTERM would make a framework quit without killing its tasks),
# SIGKILL it after SECONDS. Returns its exit status.
reap() {
  local pid=$1 secs=$2 rc=0
  local deadline=$((SECONDS + secs))
  while alive "$pid" && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
  if alive "$pid"; then
    echo "demo: pid $pid still running after ${secs}s: SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || rc=$?
  return $rc
}

# remove_containers SOCKET: remove every container of the agent at SOCKET
# (only this script's agents: their own sockets under $BASE).
remove_containers() {
  local id
  for id in $("$BRIM" container ls --socket "$1" --json 2>/dev/null | jq -r '.[]?.id'); do
    "$BRIM" container rm -f --socket "$1" "$id" >/dev/null
  done
}

# remove_parent PARENT: remove this script's cgroup parent in every
# hierarchy, children first; fails when something is left. Processes still
# inside (containers of an agent that died before removing them: this
# script's, since the parent is) are SIGKILLed first, by PID.
remove_parent() {
  local d pid left=0 stray
  case $1 in /brim-demo-?*) ;; *) echo "demo: refusing to remove cgroup $1: not the demo's" >&2; return 1 ;; esac
  for d in /sys/fs/cgroup/*/"${1#/}"; do
    [ -d "$d" ] || continue
    stray=$(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -un)
    [ -n "$stray" ] || continue
    echo "demo: killing processes left in $d: $(echo $stray)" >&2
    for pid in $stray; do kill -KILL "$pid" 2>/dev/null; done
  done
  for _ in $(seq 50); do
    [ -z "$(find /sys/fs/cgroup/*/"${1#/}" -name cgroup.procs -exec cat {} + 2>/dev/null)" ] && break
    sleep 0.1
  done
  for d in /sys/fs/cgroup/*/"${1#/}"; do
    [ -d "$d" ] || continue
    find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
    [ -d "$d" ] && { echo "demo: cgroup $d left behind:" >&2; find "$d" -type d >&2; left=1; }
  done
  return $left
}

# start_registry: Debian's docker-registry on a free loopback port, its
# storage under $BASE; sets REGISTRY (host:port) and REG_PID.
REGISTRY=
start_registry() {
  cat >"$BASE/registry.yml" <<EOF
version: 0.1
log:
  level: info
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $BASE/registry
http:
  addr: 127.0.0.1:0
  secret: demo-$TAG
EOF
  setsid docker-registry serve "$BASE/registry.yml" >"$BASE/registry.log" 2>&1 &
  REG_PID=$!
  wait_until 20 "docker-registry to listen" reg_listening
  note "docker-registry on $REGISTRY"
}
reg_listening() {
  alive "$REG_PID" || fail "docker-registry exited"
  REGISTRY=$(sed -n 's/.*msg="listening on \([0-9.:]*\)".*/\1/p' "$BASE/registry.log" | head -1)
  [ -n "$REGISTRY" ]
}

# blob FILE MEDIATYPE: put FILE into the layout's blobs; print its
# descriptor's JSON.
blob() {
  local hex size
  hex=$(sha256sum "$1" | cut -d' ' -f1)
  size=$(stat -c %s "$1")
  cp "$1" "$BASE/image/layout/blobs/sha256/$hex"
  printf '{"mediaType":"%s","digest":"sha256:%s","size":%s}' "$2" "$hex" "$size"
}

# build_image: a two-layer OCI image layout, busybox and an app layer, as
# a build tool writes one (no daemon): $BASE/image/layout, tag hello.
# Sets MANIFEST_HEX.
MANIFEST_HEX=
build_image() {
  local d=$BASE/image l cfg manifest layers="" diffs=""
  mkdir -p "$d"/base/{bin,etc,tmp} "$d"/app/app "$d/layout/blobs/sha256"
  cp /bin/busybox "$d/base/bin/busybox"
  for l in sh cat echo id pwd; do ln -s busybox "$d/base/bin/$l"; done
  printf 'root:x:0:0::/root:/bin/sh\napp:x:1000:1000::/app:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n' >"$d/base/etc/passwd"
  printf 'root:x:0:\napp:x:1000:\nnogroup:x:65534:\n' >"$d/base/etc/group"
  chmod 1777 "$d/base/tmp"
  printf '#!/bin/sh\necho "$GREETING from an image, as uid $(id -u) in $(pwd)"\n' >"$d/app/app/hello.sh"
  chmod 755 "$d/app/app/hello.sh"
  for l in base app; do
    tar -C "$d/$l" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$d/$l.tar" .
    diffs="$diffs${diffs:+,}\"sha256:$(sha256sum "$d/$l.tar" | cut -d' ' -f1)\""
    gzip -n -c "$d/$l.tar" >"$d/$l.tar.gz"
    layers="$layers${layers:+,}$(blob "$d/$l.tar.gz" application/vnd.oci.image.layer.v1.tar+gzip)"
  done
  printf '{"architecture":"amd64","os":"linux","config":{"User":"app","WorkingDir":"/app","Env":["PATH=/bin","GREETING=hello"],"Cmd":["/app/hello.sh"]},"rootfs":{"type":"layers","diff_ids":[%s]}}' \
    "$diffs" >"$d/config.json"
  cfg=$(blob "$d/config.json" application/vnd.oci.image.config.v1+json)
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":%s,"layers":[%s]}' \
    "$cfg" "$layers" >"$d/manifest.json"
  manifest=$(blob "$d/manifest.json" application/vnd.oci.image.manifest.v1+json)
  MANIFEST_HEX=$(sha256sum "$d/manifest.json" | cut -d' ' -f1)
  printf '{"schemaVersion":2,"manifests":[%s,"annotations":{"org.opencontainers.image.ref.name":"hello"}}]}' \
    "${manifest%\}}" >"$d/layout/index.json"
  echo '{"imageLayoutVersion":"1.0.0"}' >"$d/layout/oci-layout"
  note "built $d/layout: busybox, then /app/hello.sh; user app, working dir /app, cmd /app/hello.sh"
}

cleanup() {
  local rc=$? leak=0
  set +e
  trap - EXIT INT TERM
  # Frameworks first: on SIGTERM they kill their tasks through the master.
  # Both at once, so that neither grows into what the other frees.
  # Without a master they cannot: give them a moment only.
  local fw_wait=30
  alive "$DEV_PID" || fw_wait=3
  for pid in "$FW_A" "$FW_B"; do alive "$pid" && kill -TERM "$pid"; done
  for pid in "$FW_A" "$FW_B"; do [ -n "$pid" ] && reap "$pid" "$fw_wait" >/dev/null 2>&1; done
  if alive "$AGENT_PID"; then remove_containers "$SOCK"; fi
  if alive "$DEV_PID"; then remove_containers "$DEV_SOCK"; fi
  for pid in "$AGENT_PID" "$DEV_PID" "$REG_PID"; do [ -n "$pid" ] && stop_pid "$pid" 20 >/dev/null 2>&1; done
  for pid in "$FW_A" "$FW_B" "$AGENT_PID" "$DEV_PID" "$REG_PID"; do
    alive "$pid" && { echo "demo: pid $pid still running" >&2; leak=1; }
  done
  remove_parent "$PARENT" || leak=1
  remove_parent "$DEV_PARENT" || leak=1
  # Container shims run with their cwd in the agents' state dirs: any left
  # is this script's.
  for p in /proc/[0-9]*; do
    case $(readlink "$p/cwd" 2>/dev/null) in
    "$BASE"/*) echo "demo: process ${p#/proc/} left in $BASE: killing it" >&2; kill -KILL "${p#/proc/}"; leak=1 ;;
    esac
  done
  if { [ "$rc" != 0 ] && [ "$rc" != 130 ]; } || [ "$leak" != 0 ]; then # 130: interrupted
    for log in "$BASE"/*.log; do [ -s "$log" ] && { echo "--- tail $log" >&2; tail -20 "$log" >&2; }; done
  fi
  rm -rf "$BASE"
  [ -e "$BASE" ] && leak=1
  if [ "$leak" != 0 ]; then
    echo "demo: cleanup left something behind (see above)" >&2
    [ "$rc" != 0 ] || rc=1
  else
    echo "demo: cleaned up (processes, containers, cgroup parents $PARENT $DEV_PARENT, $BASE)"
  fi
  [ "$rc" = 0 ] && printf '\033[32mdemo: all checks passed\033[0m in %ss\n' "$SECONDS" || echo "demo: FAILED (exit $rc) after ${SECONDS}s" >&2
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The demo framework is built here (its own program, not part of bin/brim).
DRF_DEMO=${DRF_DEMO_BINARY:-}
if [ -z "$DRF_DEMO" ]; then
  DRF_DEMO=$BASE/drf-demo
  "$GO" build -o "$DRF_DEMO" ./examples/drf-demo || fail "build examples/drf-demo"
fi

##############################################################################
# Part 1: the node runtime.

step "part 1: start an agent: cpus:2;mem:1024, cgroup parent $PARENT"
setsid "$BRIM" agent --state-dir "$STATE" --socket "$SOCK" --cgroup-parent "$PARENT" \
  --resources "cpus:2;mem:1024" --kill-grace 2s >"$BASE/agent.log" 2>&1 &
AGENT_PID=$!
agent_ready() {
  alive "$AGENT_PID" || fail "the agent exited"
  [ -S "$SOCK" ] && "$BRIM" agent info --socket "$SOCK" >/dev/null 2>&1
}
wait_until 30 "the agent to answer on $SOCK" agent_ready
"$BRIM" agent info --socket "$SOCK"

step "run a cpu burner capped at 0.5 cpu and a memory user limited to 96 MiB"
BURNER=$(c run --name burner --cpus 0.5 --cpu-quota --mem 32 -- sh -c 'while :; do :; done')
MEMUSER=$(c run --name memuser --cpus 0.25 --mem 96 -- sh -c 'head -c 48m /dev/zero > /tmp/blob; echo wrote 48 MiB; sleep 600')
echo "burner=$BURNER memuser=$MEMUSER"
wait_until 20 "memuser to write its 48 MiB" sh -c "'$BRIM' container logs --socket '$SOCK' memuser 2>/dev/null | grep -q 'wrote 48 MiB'"
c ls
c stats --interval 2s burner memuser

step "resize the burner to 1.5 cpus while it runs"
QUOTA=/sys/fs/cgroup/cpu/${PARENT#/}/$BURNER/cpu.cfs_quota_us
echo "cpu.cfs_quota_us before: $(cat "$QUOTA")"
c update --cpus 1.5 burner
after=$(cat "$QUOTA")
echo "cpu.cfs_quota_us after:  $after"
[ "$after" = 150000 ] || fail "burner's cfs quota is $after after the resize, want 150000 (1.5 cpus)"
ok "burner resized live to 1.5 cpus"
c stats --interval 2s burner memuser

step "the agent's accounting"
"$BRIM" agent info --socket "$SOCK"

step "more than is free is refused"
if c run --cpus 1 -- true; then fail "a container asking more than is free was started"; fi
ok "refused"

step "logs, kill with grace, exit status"
c logs memuser
c kill --grace 1s memuser
c kill --grace 1s burner
c ls
remove_containers "$SOCK"
stop_pid "$AGENT_PID" 20 || true
AGENT_PID=
remove_parent "$PARENT" || fail "part 1 left cgroups behind"
ok "part 1: agent stopped, containers and cgroup parent $PARENT removed"

##############################################################################
# Part 2: brim dev, two frameworks, DRF.

# The DRF paper's example: 9 cpus and 18 GB; user A's tasks need <1 cpu,
# 4 GB>, user B's <3 cpus, 1 GB>. Scaled by 1/10 (1 GB -> 100 MiB) so the
# real containers fit this host; dominant shares do not change.
TOTAL="cpus:0.9;mem:1800"
A_CPUS=0.1 A_MEM=400
B_CPUS=0.3 B_MEM=100
WANT_A=3 WANT_B=2   # DRF: A gets 3 tasks (mem 1200/1800), B 2 (cpus 0.6/0.9)
WANT_SHARE=0.6667   # both dominant shares 2/3

# The registry part 2's last task pulls its image from: started now, so
# that brim dev's agent is told it may speak plain HTTP to it (loopback
# only).
start_registry

step "part 2: brim dev (master + agent in one process) offering $TOTAL, cgroup parent $DEV_PARENT"
mkdir -p "$DEV_STATE"
setsid "$BRIM" dev --state-dir "$DEV_STATE" --listen 127.0.0.1:0 --cgroup-parent "$DEV_PARENT" \
  --resources "$TOTAL" --kill-grace 1s --allocation-interval 250ms --image-insecure-registry "$REGISTRY" >"$BASE/dev.log" 2>&1 &
DEV_PID=$!
master_addr() {
  alive "$DEV_PID" || fail "brim dev exited"
  MASTER=$(sed -n 's/.*msg="master serving".* listen=\([^ ]*\).*/\1/p' "$BASE/dev.log" | head -1)
  [ -n "$MASTER" ]
}
wait_until 30 "brim dev's master to listen" master_addr
# state: the master's /state; errors go to state.log (shown on failure)
# rather than repeating in the polls below.
state() { "$BRIM" state --master "$MASTER" --json 2>>"$BASE/state.log"; }
dev_alive() { alive "$DEV_PID" || fail "brim dev exited"; }
agent_registered() {
  dev_alive
  [ "$(state 2>/dev/null | jq '[.agents[]? | select(.connected)] | length')" = 1 ]
}
wait_until 30 "brim dev's agent to register with the master" agent_registered
echo "master on $MASTER; frameworks connect with --master $MASTER"

step "the DRF paper's example, scaled: prediction"
cat <<EOF
  paper:  9 cpus, 18 GB;     A <1 cpu, 4 GB>         B <3 cpus, 1 GB>
  here:   $TOTAL;  A <cpus:$A_CPUS;mem:$A_MEM>   B <cpus:$B_CPUS;mem:$B_MEM>
  DRF:    A runs $WANT_A tasks (dominant: mem 1200/1800 = 2/3), B runs $WANT_B (dominant: cpus 0.6/0.9 = 2/3)
EOF

step "hold the agent's resources (a reservation for role hold) until both frameworks are subscribed"
note "so that A and B start from zero together, like the paper's users; unreserving releases them at once"
AGENT_ID=$(state | jq -r '.agents[0].id') || fail "read the master's state"
HOLD="cpus(hold):0.9;mem(hold):1800"
echo "\$ brim reserve --agent $AGENT_ID '$HOLD'"
"$BRIM" reserve --master "$MASTER" --agent "$AGENT_ID" "$HOLD"

step "start frameworks A (role a) and B (role b)"
note "each takes one task per offer, so the allocator picks, cycle by cycle, who grows next"
setsid "$DRF_DEMO" --master "$MASTER" --name A --role a --task-cpus "$A_CPUS" --task-mem "$A_MEM" \
  --cmd 'sleep 600' --refuse 200ms --duration 5m &
FW_A=$!
setsid "$DRF_DEMO" --master "$MASTER" --name B --role b --task-cpus "$B_CPUS" --task-mem "$B_MEM" \
  --cmd 'sleep 600' --refuse 200ms --duration 5m &
FW_B=$!
both_subscribed() {
  dev_alive
  alive "$FW_A" || fail "framework A exited"
  alive "$FW_B" || fail "framework B exited"
  [ "$(state | jq '[.frameworks[]? | select(.connected and (.name == "A" or .name == "B"))] | length')" = 2 ]
}
wait_until 30 "frameworks A and B to subscribe" both_subscribed
[ "$(state | jq '[.tasks[]?] | length')" = 0 ] || fail "tasks launched while the resources were reserved for role hold"
HELD=$(state | jq -r '.agents[0].reserved') || fail "read the master's state"
echo "\$ brim unreserve --agent $AGENT_ID '$HELD'"
"$BRIM" unreserve --master "$MASTER" --agent "$AGENT_ID" "$HELD"

# running NAME: the number of RUNNING tasks of framework NAME.
running() {
  state | jq --arg n "$1" '[.frameworks[]? | select(.name == $n) | .id] as $ids
    | [.tasks[]? | select(.state == "RUNNING" and (.frameworkId as $f | $ids | index($f)))] | length'
}
converged() {
  dev_alive
  alive "$FW_A" || fail "framework A exited"
  alive "$FW_B" || fail "framework B exited"
  local a b
  a=$(running A) b=$(running B)
  LAST="A runs $a tasks, B $b"
  [ "$a" = "$WANT_A" ] && [ "$b" = "$WANT_B" ]
}
wait_until 40 "A to run $WANT_A tasks and B $WANT_B" converged
# Stable: nothing changes over a few more allocation cycles.
cycles() { state | jq '.cycles.count'; }
c0=$(cycles) || fail "read the master's state"
more_cycles() {
  local n
  dev_alive
  n=$(cycles)
  [ "${n:-0}" -ge $((c0 + 4)) ]
}
wait_until 20 "4 more allocation cycles" more_cycles
converged || fail "allocation changed after converging: $LAST"
ok "converged: A runs $WANT_A tasks, B runs $WANT_B, stable over 4 more allocation cycles"

# The allocator counts outstanding offers in a framework's share (as
# Mesos does): the memory left over after convergence is offered, declined
# and offered again, so a snapshot taken while such an offer is out shows a
# larger share. Print and check one snapshot with no offer outstanding.
SNAP="$BASE/state.json"
no_offers() {
  dev_alive
  state >"$SNAP" || return 1
  LAST="$(jq '.offers // [] | length' "$SNAP") offers outstanding"
  [ "$(jq '.offers // [] | length' "$SNAP")" = 0 ]
}
wait_until 20 "a moment with no offer outstanding" no_offers

step "the master's view (brim state)"
"$BRIM" state --master "$MASTER"

step "dominant shares: the master vs the DRF prediction (the snapshot with no offer out)"
jq -r --arg want "$WANT_SHARE" '
  (.frameworks // []) as $fws
  | ["FRAMEWORK", "ROLE", "TASKS", "ALLOCATED", "DOMINANT SHARE", "PREDICTED"],
    (.frameworkShares[]? | . as $s | ($fws[] | select(.id == $s.frameworkId)) as $f
      | [$f.name, $s.role, ($f.tasks | tostring), $s.allocated, ($s.share * 10000 | round / 10000 | tostring), $want])
  | @tsv' "$SNAP" | column -t -s $'\t'
shares_ok=$(jq --argjson want 0.6666667 '
  (.frameworks // []) as $fws
  | [.frameworkShares[]? | . as $s | select(any($fws[]; .id == $s.frameworkId and (.name == "A" or .name == "B")))]
  | length == 2 and all(.share - $want | fabs < 0.001)' "$SNAP") || fail "read the master's state"
[ "$shares_ok" = true ] || fail "the master's dominant shares are not 2/3 each (see above)"
ok "both dominant shares are 2/3, as DRF predicts"

step "stop the frameworks: each kills its tasks"
kill -TERM "$FW_A" "$FW_B" # both at once: neither grows into what the other frees
rc=0; reap "$FW_A" 30 || rc=$?
FW_A=
[ "$rc" = 0 ] || fail "framework A exited $rc on SIGTERM, want 0"
rc=0; reap "$FW_B" 30 || rc=$?
FW_B=
[ "$rc" = 0 ] || fail "framework B exited $rc on SIGTERM, want 0"
FW_B=
none_running() { dev_alive; [ "$(running A)" = 0 ] && [ "$(running B)" = 0 ]; }
wait_until 20 "the master to see A's and B's tasks ended" none_running
ok "frameworks stopped, their tasks killed"

step "brim run passes the task's exit code through"
echo "\$ brim run --master $MASTER --cpus 0.1 --mem 32 -- sh -c 'exit 3'"
rc=0
timeout 60 "$BRIM" run --master "$MASTER" --cpus 0.1 --mem 32 -- sh -c 'exit 3' || rc=$?
[ "$rc" = 3 ] || fail "brim run exited $rc, want 3"
ok "brim run exited 3"

step "a task from an OCI image, through the master"
build_image
IMAGE=$REGISTRY/demo/hello:1
echo "\$ skopeo copy oci:$BASE/image/layout:hello docker://$IMAGE"
skopeo copy --quiet --dest-tls-verify=false "oci:$BASE/image/layout:hello" "docker://$IMAGE" || fail "push the image to the registry"
echo "\$ brim run --master $MASTER --task-id demo-image --image $IMAGE"
rc=0
timeout 120 "$BRIM" run --master "$MASTER" --cpus 0.1 --mem 32 --task-id demo-image --image "$IMAGE" || rc=$?
[ "$rc" = 0 ] || fail "brim run --image exited $rc, want 0"
CT=$("$BRIM" container ls --socket "$DEV_SOCK" --json | jq -r --arg i "$IMAGE" '[.[]? | select(.image == $i)][0].id')
[ -n "$CT" ] && [ "$CT" != null ] || fail "no container of $IMAGE on brim dev's agent"
out=$("$BRIM" container logs --socket "$DEV_SOCK" "$CT")
echo "$out"
grep -qx "hello from an image, as uid 1000 in /app" <<<"$out" || fail "the image's task printed: $out"
digest=$("$BRIM" container inspect --socket "$DEV_SOCK" "$CT" | jq -r .imageDigest)
want=sha256:$MANIFEST_HEX
[ "$digest" = "$want" ] || fail "the container's image digest is $digest, want the manifest's $want"
echo "\$ brim image ls"
"$BRIM" image ls --socket "$DEV_SOCK"
ok "the task ran the image's cmd as its user, from its two layers; inspect shows digest $digest"

step "stop brim dev"
left=$("$BRIM" container ls --socket "$DEV_SOCK" --json | jq '[.[]? | select(.state == "running")] | length')
[ "$left" = 0 ] || fail "$left containers still running on brim dev's agent"
remove_containers "$DEV_SOCK"
stop_pid "$DEV_PID" 20 || true
DEV_PID=
remove_parent "$DEV_PARENT" || fail "part 2 left cgroups behind"
ok "brim dev stopped, cgroup parent $DEV_PARENT removed"
