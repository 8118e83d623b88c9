#!/usr/bin/env bash
# make bench: every benchmark prints its figures and a ratio against a
# baseline measured in the same run. Scripts bench/*.bench.sh run in order.
set -euo pipefail
cd "$(dirname "$0")/.."
shopt -s nullglob
for b in bench/*.bench.sh; do
  echo "=== $b"
  bash "$b"
done
