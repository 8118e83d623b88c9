#!/usr/bin/env bash
# Interference experiment on one host with the standalone agent (no master):
# a latency-critical probe (examples/lc-probe) in a non-revocable container,
# best-effort antagonists (stress-ng) in revocable containers. For each QoS
# controller asked for (--qos noop,interference) it starts its own agent,
# measures the probe solo (baseline), then with the antagonists running, and
# prints a table: phase, LC p50/p99 (medians of the probe's windows), p99 /
# solo, and the corrections the controller made (type, container, trigger).
# See docs/experiments.md. Needs root; cleans up everything it made (its
# agents by PID, their containers, cgroup parents and its temp dir).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'EOF'
usage: hack/experiment.sh [options]
  --qos LIST             controllers to compare, in order (default noop,interference)
  --qos-opt K=V          controller option, for every controller but noop (repeatable;
                         without any, interference gets
                         warmup=5 cooldown=1s recover-after=10m floor-app-latency=0.008
                         floor-runqueue-p99=0.02)
  --antagonist KIND      dd, hdd, vm or cpu, comma-separated for a mix (default dd)
  --antagonists N        revocable antagonist containers (default 2), kinds assigned round-robin
  --be-cpus C            cpus of each antagonist (default 0.5)
  --be-mem MIB           memory of each antagonist (default 256)
  --solo SECONDS         solo (baseline) phase (default 10)
  --contended SECONDS    phase with antagonists (default 20)
  --after SECONDS        solo again once the antagonists are removed and their writes
                         synced: shows the machine's drift during the run (default 6; 0: skip)
  --rate R               probe requests per second (default 200)
  --work D               probe cpu work per request (default 200us)
  --fsync-bytes B        probe synced write per request (default 4096; 0: none)
  --touch-kib K          probe memory working set per request (default 0)
  --window D             probe reporting window (default 500ms)
  --lc-cpus C            cpus of the probe's container (default 0.5)
  --estimate RES         fixed estimator's revocable resources (default "cpus:2;mem:1024")
  --no-report            do not forward the probe's windows to the agent (app-latency)
  --no-bpf               run-queue latency from schedstat instead of eBPF
  --metrics-port P       first port of the agents' /metrics (default random in 19100-19899)
  --out DIR              keep the results there (default: a temp dir, removed)
  --brim PATH            brim binary (default $BRIM_BINARY or bin/brim)
EOF
}

BRIM=${BRIM_BINARY:-$PWD/bin/brim}
MODES=noop,interference
QOS_OPTS=()
KINDS=dd
NBE=2
BE_CPUS=0.5
BE_MEM=256
SOLO=10
CONTENDED=20
AFTER=6
RATE=200
WORK=200us
FSYNC=4096
TOUCH=0
WINDOW=500ms
LC_CPUS=0.5
ESTIMATE="cpus:2;mem:1024"
REPORT=1
NOBPF=
PORT=$((19100 + RANDOM % 800))
OUT=

die() { echo "experiment: $*" >&2; exit 2; }
need() { [ $# -ge 2 ] || die "$1 needs a value"; }
while [ $# -gt 0 ]; do
  case $1 in
    --qos) need "$@"; MODES=$2; shift 2 ;;
    --qos-opt) need "$@"; QOS_OPTS+=("$2"); shift 2 ;;
    --antagonist) need "$@"; KINDS=$2; shift 2 ;;
    --antagonists) need "$@"; NBE=$2; shift 2 ;;
    --be-cpus) need "$@"; BE_CPUS=$2; shift 2 ;;
    --be-mem) need "$@"; BE_MEM=$2; shift 2 ;;
    --solo) need "$@"; SOLO=$2; shift 2 ;;
    --contended) need "$@"; CONTENDED=$2; shift 2 ;;
    --after) need "$@"; AFTER=$2; shift 2 ;;
    --rate) need "$@"; RATE=$2; shift 2 ;;
    --work) need "$@"; WORK=$2; shift 2 ;;
    --fsync-bytes) need "$@"; FSYNC=$2; shift 2 ;;
    --touch-kib) need "$@"; TOUCH=$2; shift 2 ;;
    --window) need "$@"; WINDOW=$2; shift 2 ;;
    --lc-cpus) need "$@"; LC_CPUS=$2; shift 2 ;;
    --estimate) need "$@"; ESTIMATE=$2; shift 2 ;;
    --no-report) REPORT=; shift ;;
    --no-bpf) NOBPF=--no-bpf; shift ;;
    --metrics-port) need "$@"; PORT=$2; shift 2 ;;
    --out) need "$@"; OUT=$2; shift 2 ;;
    --brim) need "$@"; BRIM=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown option $1" ;;
  esac
done
# Options given go to every controller but noop; without any, the
# interference controller gets defaults fit for this noisy shared machine.
USER_QOS_OPTS=${#QOS_OPTS[@]}
[ "$USER_QOS_OPTS" -gt 0 ] || QOS_OPTS=(warmup=5 cooldown=1s recover-after=10m floor-app-latency=0.008 floor-runqueue-p99=0.02)
[[ $NBE =~ ^[0-9]+$ && $AFTER =~ ^[0-9]+$ && $SOLO =~ ^[0-9]+$ && $CONTENDED =~ ^[0-9]+$ && $SOLO -ge 2 && $CONTENDED -ge 2 ]] \
  || die "--antagonists, --solo and --contended want integers (phases at least 2 s)"
IFS=, read -r -a KIND_LIST <<<"$KINDS"
for k in "${KIND_LIST[@]}"; do
  case $k in hdd|vm|cpu|dd) ;; *) die "--antagonist $k: want hdd, vm, cpu or dd" ;; esac
done
IFS=, read -r -a MODE_LIST <<<"$MODES"
[ "$(id -u)" = 0 ] || { echo "experiment: run as root (cgroups, containers)" >&2; exit 1; }
[ -x "$BRIM" ] || { echo "experiment: $BRIM not built (make build)" >&2; exit 1; }
for t in jq stress-ng go; do
  command -v "$t" >/dev/null || { echo "experiment: $t not found (make deps)" >&2; exit 1; }
done

# The probe runs from the host root, which containers see read-only at the
# same paths, except /tmp (a tmpfs in the container) and the agent's state
# dir (hidden): so the base dir is under /var/tmp and the state dirs are
# below it.
BASE=$(mktemp -d /var/tmp/brim-exp.XXXXXX)
# Tasks run as the agent's default user (nobody): the probe it runs from
# here must be able to reach the base dir.
chmod 755 "$BASE"
RUN_ID=$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
AGENT_PID= SOCK= PARENT= FWD_PID=
PARENTS=()

log() { printf '%s experiment: %s\n' "$(date -u +%T)" "$*" >&2; }
b() { local sub=$1; shift; "$BRIM" "$sub" --socket "$SOCK" "$@"; }
now_ms() { date +%s%3N; }
# pause SECONDS: sleep in the background so a signal to the script runs its
# cleanup at once (bash runs traps only between foreground commands).
SLEEP_PID=
pause() { sleep "$1" & SLEEP_PID=$!; wait "$SLEEP_PID"; SLEEP_PID=; }

# stop_mode removes the current mode's containers, stops its agent (by
# PID) and its forwarder.
stop_mode() {
  if [ -n "$FWD_PID" ]; then
    kill -TERM "$FWD_PID" 2>/dev/null || true
    wait "$FWD_PID" 2>/dev/null || true
    FWD_PID=
  fi
  if [ -n "$AGENT_PID" ] && kill -0 "$AGENT_PID" 2>/dev/null; then
    for id in $(b container ls --json 2>/dev/null | jq -r '.[].id'); do
      b container rm -f "$id" >/dev/null 2>&1 || log "rm $id failed"
    done
    kill -TERM "$AGENT_PID" 2>/dev/null || true
    wait "$AGENT_PID" 2>/dev/null || true
  fi
  AGENT_PID=
}

# remove_parent removes one of this script's cgroup parents in every
# hierarchy, deepest first (only paths named /brim-exp-<this run>-…).
remove_parent() {
  local p=$1 d try
  case $p in /brim-exp-"$RUN_ID"-*) ;; *) log "refusing to remove cgroup $p"; return ;; esac
  for d in /sys/fs/cgroup/*/"${p#/}" /sys/fs/cgroup/"${p#/}"; do
    [ -d "$d" ] || continue
    for try in $(seq 50); do
      find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
      [ -d "$d" ] || break
      sleep 0.1
    done
    [ -d "$d" ] && log "cgroup $d not removed (processes left?)"
  done
}

cleanup() {
  set +e
  [ -n "$SLEEP_PID" ] && kill "$SLEEP_PID" 2>/dev/null
  stop_mode
  for p in "${PARENTS[@]}"; do remove_parent "$p"; done
  # Mounts the executor may have left under the state dirs.
  awk -v b="$BASE" 'index($5, b) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
    while read -r m; do umount -l "$m"; done
  if [ -n "$OUT" ]; then
    mkdir -p "$OUT"
    for m in "$BASE"/*/; do
      [ -d "$m/results" ] && mkdir -p "$OUT/$(basename "$m")" && cp -a "$m/results/." "$OUT/$(basename "$m")/"
    done
    [ -f "$BASE/results.tsv" ] && cp "$BASE/results.tsv" "$OUT/"
  fi
  rm -rf "$BASE"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "build the probe (static)"
CGO_ENABLED=0 go build -o "$BASE/bin/lc-probe" ./examples/lc-probe

# antagonist_cmd KIND: the command of a revocable antagonist; it waits for
# /mnt/sandbox/go so every antagonist is admitted before the probe runs (a
# correction in force refuses new revocable launches) and all start together.
antagonist_cmd() {
  local run
  case $1 in
    hdd) run="exec stress-ng --hdd 1 --hdd-bytes 64M --hdd-opts fsync --temp-path /mnt/sandbox -t 0 -q" ;;
    vm) run="exec stress-ng --vm 1 --vm-bytes $((BE_MEM / 2))M --vm-keep --temp-path /mnt/sandbox -t 0 -q" ;;
    cpu) run="exec stress-ng --cpu 1 --temp-path /mnt/sandbox -t 0 -q" ;;
    dd) run="while :; do dd if=/dev/zero of=/mnt/sandbox/junk bs=1M count=64 conv=fsync 2>/dev/null; done" ;;
  esac
  echo "while [ ! -e /mnt/sandbox/go ]; do sleep 0.05; done; $run"
}

# forward CSV ID: tails the probe's windows and reports each through the
# agent API (brim agent report-latency), as the application would.
forward() {
  local csv=$1 id=$2 me=$BASHPID ms n p50 p99 p999 rest
  trap 'exit 0' TERM
  while [ ! -e "$csv" ]; do sleep 0.1; done
  while IFS=, read -r ms n p50 p99 p999 rest; do
    [[ $p99 =~ ^[0-9]+$ && $p99 -gt 0 ]] || continue
    b agent report-latency "$id" --p50 "${p50}us" --p99 "${p99}us" --p999 "${p999}us" 2>>"$MDIR/results/report-errors.txt" || true
  done < <(exec tail -n +2 -s 0.1 -F --pid="$me" "$csv" 2>/dev/null)
}

# window_stats CSV FROM TO: windows ending in (FROM, TO] ms: count, median
# p50, median p99, max p99 (µs).
window_stats() {
  local rows
  rows=$(awk -F, -v from="$1" -v to="$2" 'NR > 1 && $1 > from && $1 <= to { print $3, $4 }' "$3")
  if [ -z "$rows" ]; then echo 0 0 0 0; return; fi
  med() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
  echo "$(wc -l <<<"$rows") $(cut -d' ' -f1 <<<"$rows" | med) $(cut -d' ' -f2 <<<"$rows" | med) $(cut -d' ' -f2 <<<"$rows" | sort -n | tail -1)"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == 0 || b == 0) print "n/a"; else printf "%.2f", a / b }'; }

printf 'mode\tphase\twindows\tp50_us\tp99_us\tp99_max_us\tp99_ratio\tcorrections\n' >"$BASE/results.tsv"

# mode_name MODE: a file and cgroup name for a controller spec
# ("plugin:/path args" → "plugin__path_args").
mode_name() { printf %s "$1" | tr -c 'A-Za-z0-9_.-' _; }

for MODE in "${MODE_LIST[@]}"; do
  MNAME=$(mode_name "$MODE")
  MDIR=$BASE/$MNAME
  mkdir -p "$MDIR/results"
  SOCK=$MDIR/agent.sock
  PARENT=/brim-exp-$RUN_ID-$MNAME
  PARENTS+=("$PARENT")
  args=(agent --state-dir "$MDIR/state" --socket "$SOCK" --cgroup-parent "$PARENT"
    --resources "cpus:2;mem:2048" --kill-grace 2s --metrics-listen "127.0.0.1:$PORT"
    --estimator fixed --estimator-opt "resources=$ESTIMATE" --estimator-interval 1s --qos "$MODE")
  if [ "$MODE" = interference ] || { [ "$MODE" != noop ] && [ "$USER_QOS_OPTS" -gt 0 ]; }; then
    for o in "${QOS_OPTS[@]}"; do args+=(--qos-opt "$o"); done
  fi
  [ -n "$NOBPF" ] && args+=("$NOBPF")
  # Flush what earlier phases left dirty so the baseline is not measured
  # during their writeback.
  sync
  log "[$MODE] start agent (cgroup parent $PARENT, metrics 127.0.0.1:$PORT)"
  echo "$BRIM ${args[*]}" >"$MDIR/results/agent-command.txt"
  # Its own session: a Ctrl-C at the terminal reaches this script (which
  # then removes the containers through the agent), not the agent.
  setsid "$BRIM" "${args[@]}" >"$MDIR/results/agent.log" 2>&1 </dev/null &
  AGENT_PID=$!
  for _ in $(seq 200); do
    b agent info >/dev/null 2>&1 && break
    kill -0 "$AGENT_PID" 2>/dev/null || { cat "$MDIR/results/agent.log" >&2; echo "experiment: agent exited" >&2; exit 1; }
    sleep 0.1
  done
  b agent info >/dev/null

  BES=()
  for i in $(seq 0 $((NBE - 1))); do
    kind=${KIND_LIST[$((i % ${#KIND_LIST[@]}))]}
    id=$(b container run --name "be$i-$kind" --revocable --cpus "$BE_CPUS" --mem "$BE_MEM" -- sh -c "$(antagonist_cmd "$kind")")
    BES+=("$id")
  done
  LC=$(b container run --name lc --cpus "$LC_CPUS" --mem 64 -- "$BASE/bin/lc-probe" --quiet \
    --rate "$RATE" --work "$WORK" --window "$WINDOW" --fsync-bytes "$FSYNC" --touch-kib "$TOUCH")
  LC_SANDBOX=$(b container inspect "$LC" | jq -r .sandboxDir)
  CSV=$LC_SANDBOX/lc-probe.csv
  if [ -n "$REPORT" ]; then
    forward "$CSV" "$LC" &
    FWD_PID=$!
  fi
  # Skip the first window (calibration, page cache warm-up).
  for _ in $(seq 100); do [ "$(wc -l 2>/dev/null <"$CSV" || echo 0)" -ge 2 ] && break; sleep 0.1; done
  T_SOLO=$(now_ms)
  log "[$MODE] solo ${SOLO}s"
  pause "$SOLO"
  T_GO=$(now_ms)
  log "[$MODE] antagonists (${KINDS}) ${CONTENDED}s"
  for id in "${BES[@]}"; do
    touch "$(b container inspect "$id" | jq -r .sandboxDir)/go"
  done
  pause "$CONTENDED"
  T_END=$(now_ms)
  for id in "${BES[@]}"; do b container inspect "$id"; done | jq -s . >"$MDIR/results/antagonists.json"
  if [ "$AFTER" -gt 0 ]; then
    log "[$MODE] antagonists removed; solo again ${AFTER}s"
    for id in "${BES[@]}"; do b container rm -f "$id" >/dev/null; done
    sync
    T_AFTER=$(now_ms)
    pause "$AFTER"
  fi
  T_AFTER_END=$(now_ms)

  b agent explain --json >"$MDIR/results/explain.json"
  b agent info >"$MDIR/results/info.txt"
  if command -v curl >/dev/null; then
    curl -fsS "http://127.0.0.1:$PORT/metrics" >"$MDIR/results/metrics.txt" || log "[$MODE] /metrics unreachable"
  else
    log "[$MODE] no curl: /metrics not saved"
  fi
  # SIGTERM: the probe writes its run summary.
  b container kill --grace 5s "$LC" >/dev/null 2>&1 || true
  b container wait "$LC" >/dev/null 2>&1 || true
  cp "$CSV" "$MDIR/results/lc.csv"
  cp "$LC_SANDBOX/lc-probe.json" "$MDIR/results/lc-summary.json" 2>/dev/null || true
  stop_mode

  # Corrections, oldest first: "TYPE container(signal)". Those made before
  # the antagonists started (they were idle) answer the machine's own noise.
  ex=$MDIR/results/explain.json
  jms='def ms: (.[0:19] + "Z" | fromdateiso8601) * 1000 + (((.[19:] | capture("^[.](?<f>[0-9]+)") | .f) // "0") + "00" | .[0:3] | tonumber);'
  pre=$(jq -r --argjson go "$T_GO" "$jms"' [.recent[] | select((.at | ms) < $go)] | length' "$ex")
  corr=$(jq -r --argjson go "$T_GO" "$jms"' [.recent | sort_by(.at)[] | select((.at | ms) >= $go) | "\(.type) \(.container)(\(.trigger.signal))"] | join(", ")' "$ex")
  T_FIRST=$(jq -r --argjson go "$T_GO" --argjson stop "$T_END" "$jms"' [.recent[] | .at | ms | select(. >= $go and . <= $stop)] | min // empty' "$ex")
  corr=${corr:-none}
  [ "$pre" -gt 0 ] && corr="$corr; $pre before onset (noise)"
  read -r sn s50 s99 smax < <(window_stats "$T_SOLO" "$T_GO" "$MDIR/results/lc.csv")
  read -r cn c50 c99 cmax < <(window_stats "$T_GO" "$T_END" "$MDIR/results/lc.csv")
  printf '%s\tsolo\t%s\t%s\t%s\t%s\t%s\t-\n' "$MODE" "$sn" "$s50" "$s99" "$smax" 1.00 >>"$BASE/results.tsv"
  printf '%s\tantagonists\t%s\t%s\t%s\t%s\t%s\t%s\n' "$MODE" "$cn" "$c50" "$c99" "$cmax" "$(ratio "$c99" "$s99")" "$corr" >>"$BASE/results.tsv"
  if [ -n "$T_FIRST" ]; then
    read -r bn b50 b99 bmax < <(window_stats "$T_GO" "$T_FIRST" "$MDIR/results/lc.csv")
    read -r an a50 a99 amax < <(window_stats "$((T_FIRST + 1000))" "$T_END" "$MDIR/results/lc.csv")
    printf '%s\tbefore-correction\t%s\t%s\t%s\t%s\t%s\tfirst %s ms after onset\n' "$MODE" "$bn" "$b50" "$b99" "$bmax" "$(ratio "$b99" "$s99")" "$((T_FIRST - T_GO))" >>"$BASE/results.tsv"
    printf '%s\tcorrected(+1s)\t%s\t%s\t%s\t%s\t%s\t-\n' "$MODE" "$an" "$a50" "$a99" "$amax" "$(ratio "$a99" "$s99")" >>"$BASE/results.tsv"
  fi
  if [ "$AFTER" -gt 0 ]; then
    read -r fn f50 f99 fmax < <(window_stats "$T_AFTER" "$T_AFTER_END" "$MDIR/results/lc.csv")
    printf '%s\tsolo-after\t%s\t%s\t%s\t%s\t%s\t-\n' "$MODE" "$fn" "$f50" "$f99" "$fmax" "$(ratio "$f99" "$s99")" >>"$BASE/results.tsv"
  fi
  {
    echo "# corrections (brim agent explain --json .recent)"
    jq -r '.recent | sort_by(.at)[] | "\(.at) \(.type) \(.container) signal=\(.trigger.signal) value=\(.trigger.value) baseline=\(.trigger.baseline) threshold=\(.trigger.threshold) victim=\(.trigger.victim) \(.error // "")"' "$MDIR/results/explain.json"
    echo "# /metrics"
    grep -E '^brim_qos_corrections_total' "$MDIR/results/metrics.txt" 2>/dev/null || echo "(no corrections counted)"
    echo "# antagonists at the end"
    jq -r '.[] | "\(.id) \(.name) \(.state) \(.exit.reason // "")"' "$MDIR/results/antagonists.json"
  } >"$MDIR/results/corrections.txt"
  PORT=$((PORT + 1))
done

echo
echo "LC probe: rate $RATE/s, work $WORK, fsync $FSYNC B, touch $TOUCH KiB, window $WINDOW; antagonists: $NBE × ${KINDS} (revocable, cpus $BE_CPUS, mem $BE_MEM MiB)"
echo "p50/p99: medians of the probe's windows in the phase (ms); p99/solo against the same mode's solo phase"
awk -F'\t' 'NR == 1 { printf "%-13s %-22s %7s %8s %8s %9s %8s  %s\n", "MODE", "PHASE", "WINDOWS", "P50(ms)", "P99(ms)", "P99MAX", "P99/SOLO", "CORRECTIONS"; next }
  { printf "%-13s %-22s %7d %8.2f %8.2f %9.2f %8s  %s\n", $1, $2, $3, $4/1000, $5/1000, $6/1000, $7, $8 }' "$BASE/results.tsv"
for MODE in "${MODE_LIST[@]}"; do
  echo
  echo "[$MODE]"
  sed 's/^/  /' "$BASE/$(mode_name "$MODE")/results/corrections.txt"
done
[ -n "$OUT" ] && echo && echo "results kept in $OUT (per mode: lc.csv, lc-summary.json, explain.json, info.txt, metrics.txt, agent.log)"
exit 0
