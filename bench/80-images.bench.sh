#!/usr/bin/env bash
# images: layer unpack by the image store (both digests checked; then
# syncfs and rename) against `tar -xzf` (then `sync -f`) of the same gzip
# layer on the same disk, as the median of store/tar over the iterations
# (docs/images.md). Goal: within 1.5x. As root.
set -euo pipefail
cd "$(dirname "$0")/.."
go test -tags seccomp -run '^$' -bench BenchmarkUnpack -benchtime 5x -timeout 30m ./image
