#!/usr/bin/env bash
# The Debian root the package test installs brim.deb into
# (integration/deb_install_test.go, make test): a minimal debootstrap
# (variant minbase) of the host's release with the package's Depends
# (dist/nfpm.yaml) and nothing else, so that `dpkg -i` there finds out what
# the package forgot to declare.
#
# Cached in bin/debroot/root (gitignored), made once: 1–2 minutes and
# 190 MB the first time (measured here), nothing after. bin/debroot/root.key records what
# the root was made of (suite, mirror, packages); when that changes (a new
# Depends) the root is made again. The test never writes to it: it mounts
# an overlay over it. `rm -rf bin/debroot` to start afresh.
#
# Environment: DEBROOT_SUITE (default: the host's VERSION_CODENAME; brim
# links the host's glibc, so the root must not be older), DEBROOT_MIRROR
# (default http://deb.debian.org/debian, as /etc/apt/sources.list.d/ names).
# Run as root. Prints the root's path.
set -euo pipefail
trap 'echo "debroot: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
cd "$(dirname "$0")/.."
top=$PWD
cache=$top/bin/debroot
root=$cache/root

# shellcheck disable=SC1091
suite=${DEBROOT_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-}")}
[ -n "$suite" ] || { echo "debroot: no VERSION_CODENAME in /etc/os-release; set DEBROOT_SUITE" >&2; exit 1; }
mirror=${DEBROOT_MIRROR:-http://deb.debian.org/debian}
# The package's Depends: the list under `depends:` in dist/nfpm.yaml.
pkgs=$(awk '/^depends:/ {on=1; next} on && /^  - / {print $2; next} on {exit}' dist/nfpm.yaml | sort | paste -sd, -)
[ -n "$pkgs" ] || { echo "debroot: no depends: list in dist/nfpm.yaml" >&2; exit 1; }
key="suite=$suite mirror=$mirror include=$pkgs"

if [ -e "$root/etc/debian_version" ] && [ "$(cat "$root.key" 2>/dev/null)" = "$key" ]; then
  echo "$root"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "debroot: debootstrap needs root" >&2
  exit 1
fi
command -v debootstrap >/dev/null || { echo "debroot: debootstrap is not installed (make deps)" >&2; exit 1; }
echo "debroot: making a $suite root with $pkgs in $root (once; 1-2 minutes)" >&2
mkdir -p "$cache"
rm -rf "$root" "$root.key" "$root.tmp"
start=$(date +%s)
if ! debootstrap --variant=minbase --include="$pkgs" "$suite" "$root.tmp" "$mirror" >"$cache/debootstrap.log" 2>&1; then
  tail -n 30 "$cache/debootstrap.log" >&2
  rm -rf "$root.tmp"
  echo "debroot: debootstrap $suite from $mirror failed (log: $cache/debootstrap.log)" >&2
  exit 1
fi
# The downloaded .debs are not needed again.
rm -f "$root.tmp"/var/cache/apt/archives/*.deb
mv "$root.tmp" "$root"
echo "$key" >"$root.key"
echo "debroot: made in $(($(date +%s) - start)) s" >&2
echo "$root"
