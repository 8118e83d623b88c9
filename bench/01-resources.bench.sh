#!/usr/bin/env bash
# resources: parse and arithmetic cost; AddVsFloatMap reports the ratio of
# fixed-point Add to a naive map[string]float64 sum measured in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
go test -run '^$' -bench 'AddVsFloatMap|Contains$|Parse' -benchtime=200000x ./resources
