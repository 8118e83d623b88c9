#!/usr/bin/env bash
# brim's own colocation experiments (docs/experiments.md): the LC probe
# beside disk, memory, cpu and cache antagonists on revocable resources,
# under --qos noop, interference and load, in interleaved trials, each
# with a fresh agent — once with an LC that fsyncs every request
# (examples/experiments/colocation.toml) and once with a cpu-bound one
# (colocation-cpu.toml). Every ratio is against the solo phase of the
# same run (same agent, just before the onset); the solo spread beside
# it is the noise of a window with no antagonist. Prints, per spec and
# controller: node cpu, LC p99 ÷ solo (median and worst window),
# breaches of 1.1× (count, longest), first correction after the onset,
# revocable cpu-seconds done and antagonists killed. Needs root; about
# 8 minutes a spec.
# Knobs: EXPERIMENT_SPEC (run this spec alone), EXPERIMENT_OUT (keep the
# results under it, a directory per spec: tables, windows.csv, plots;
# default a temp dir, removed).
set -euo pipefail
cd "$(dirname "$0")/.."
BRIM=${BRIM_BINARY:-$PWD/bin/brim}
tmp=$(mktemp -d /var/tmp/brim-bench-colocation.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# The LC runs as an unprivileged user in its container and must reach the
# probe (mktemp makes the directory 0700).
chmod 0755 "$tmp"
CGO_ENABLED=0 go build -o "$tmp/lc-probe" ./examples/lc-probe
specs=(examples/experiments/colocation.toml examples/experiments/colocation-cpu.toml)
if [[ -n ${EXPERIMENT_SPEC:-} ]]; then
	specs=("$EXPERIMENT_SPEC")
fi
for spec in "${specs[@]}"; do
	name=$(basename "$spec" .toml)
	echo "== $name ($spec)"
	LC_PROBE=$tmp/lc-probe "$BRIM" experiment run "$spec" --out "${EXPERIMENT_OUT:-$tmp/results}/$name"
done
echo "(goal: node cpu >= 80 % with the worst window <= 1.1x solo, or within the solo spread, and no kill of work that was not the cause)"
