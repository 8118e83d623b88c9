#!/usr/bin/env bash
# The cgroup v2 lane (make test-v2): boots Debian's cloud kernel (pinned in
# kernel.env) under qemu with the unified hierarchy only, runs the test
# binaries of the kernel-facing packages (packages.txt) inside as root with
# CI=true, and exits with their status. The guest's console is copied to
# stdout and to bin/vm/console.log.
#
# Cached under bin/vm/ (gitignored): the kernel .deb and its unpacked tree.
# The initramfs is rebuilt on every run (the test binaries come from go's
# build cache, so that is quick).
#
# Environment: VM_TIMEOUT (seconds for the whole guest, default 900),
# VM_TEST_TIMEOUT (go -test.timeout per package, default 6m), VM_PACKAGES
# (a file replacing packages.txt), VM_MEM (MiB, default 3072), VM_ACCEL
# (kvm or tcg; default: kvm when /dev/kvm works, else tcg).
set -euo pipefail
trap 'echo "vm: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
cd "$(dirname "$0")/../.."
top=$PWD
here=hack/vm
# shellcheck source=kernel.env
. $here/kernel.env
vm=$top/bin/vm
mkdir -p "$vm"
log() { printf '\nvm: %s\n' "$*" >&2; } # a line of its own, also after console output

# 1. The kernel, pinned. A version Debian no longer serves fails loudly.
kdir=$vm/kernel-$KERNEL_VERSION
if [ ! -e "$kdir/boot/vmlinuz-$KERNEL_RELEASE" ]; then
  deb=$vm/${KERNEL_PKG}_${KERNEL_VERSION}_amd64.deb
  if [ ! -s "$deb" ]; then
    log "fetching $KERNEL_PKG=$KERNEL_VERSION"
    tmp=$(mktemp -d "$vm/dl.XXXXXX")
    if ! (cd "$tmp" && apt-get download "$KERNEL_PKG=$KERNEL_VERSION") >"$tmp/log" 2>&1; then
      (apt-get update -qq >/dev/null 2>&1 && cd "$tmp" && apt-get download "$KERNEL_PKG=$KERNEL_VERSION") >"$tmp/log" 2>&1 || {
        cat "$tmp/log" >&2
        rm -rf "$tmp"
        log "cannot download the pinned kernel $KERNEL_PKG=$KERNEL_VERSION (no longer served?)."
        log "bump hack/vm/kernel.env to what 'apt-cache policy linux-image-cloud-amd64' offers (see docs/operators.md)"
        exit 1
      }
    fi
    mv "$tmp"/*.deb "$deb"
    rm -rf "$tmp"
  fi
  rm -rf "$kdir.tmp"
  dpkg-deb -x "$deb" "$kdir.tmp"
  mv "$kdir.tmp" "$kdir"
fi
kernel=$kdir/boot/vmlinuz-$KERNEL_RELEASE
kmods=$kdir/lib/modules/$KERNEL_RELEASE

# 2. The guest's root: busybox, the tools the tests call (with their
# libraries), brim, the test binaries and each package's sources (tests
# read testdata/ relative to their package).
root=$vm/root
rm -rf "$root"
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,lib,lib64,etc,proc,sys,dev,tmp,run,root,mnt,opt,home,srv,media,var/tmp,brim/tests,src}
cp /bin/busybox "$root/bin/busybox"
cp $here/init "$root/init"
chmod +x "$root/init"
# nobody: the tests that run a task as another user (TestWarmLaunchIsCold).
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
echo "127.0.0.1 localhost" >"$root/etc/hosts"

copylibs() { # binary: copies its shared libraries (and the loader) into the root
  local lib
  for lib in $(ldd "$1" 2>/dev/null | grep -o '/[^ ]*' || true); do
    [ -e "$root$lib" ] || { mkdir -p "$root$(dirname "$lib")"; cp -L "$lib" "$root$lib"; }
  done
}
tool() { # name: the host's binary, at the same path, with its libraries
  local p
  p=$(command -v "$1") || { log "missing $1 on the host (make deps)"; exit 1; }
  p=$(readlink -f "$p")
  mkdir -p "$root$(dirname "$p")"
  cp "$p" "$root/usr/local/bin/$1"
  copylibs "$p"
}
for t in ip runc iperf3 nsenter mkfs.xfs; do tool "$t"; done
# /bin/sh is dash, as on the host: busybox's `test -w` answers yes to root
# on a read-only mount, dash asks the kernel (access(2)).
cp /bin/dash "$root/bin/sh"
copylibs /bin/dash

GO=${GO:-go}
TAGS=${TAGS:-seccomp}
log "building brim and the test binaries"
$GO build -tags "$TAGS" -o "$root/usr/local/bin/brim" ./cmd/brim
$GO build -tags "$TAGS" -o "$root/usr/local/bin/brim-shim" ./cmd/brim-shim
copylibs "$root/usr/local/bin/brim"
pkgs=${VM_PACKAGES:-$here/packages.txt}
grep -v '^#' "$pkgs" | grep -v '^[[:space:]]*$' >"$root/brim/packages"
while read -r dir _; do
  name=$(echo "$dir" | sed 's|^\./||; s|/|_|g')
  $GO test -c -tags "$TAGS" -o "$root/brim/tests/$name.test" "$dir"
  copylibs "$root/brim/tests/$name.test"
  mkdir -p "$root/src/$dir"
  cp -a "$dir"/. "$root/src/$dir"/
done <"$root/brim/packages"
# The copies are the tests' working directories (their testdata); a go.mod
# of their own keeps them out of the repo's ./... (lint, vet, test).
printf 'module brim-vm-copies\n' >"$root/src/go.mod"
echo "${VM_TEST_TIMEOUT:-6m}" >"$root/brim/timeout"

# Kernel modules: the network ones, overlay, xfs and loop, and their
# dependencies, for modprobe.
mkdir -p "$root/lib/modules/$KERNEL_RELEASE"
cp "$kmods"/modules.* "$root/lib/modules/$KERNEL_RELEASE/"
# overlay, xfs and loop: the image tests (overlay roots, id-mapped layers;
# an xfs loop file with project quotas).
(cd "$kmods" && cp -a --parents kernel/net kernel/drivers/net kernel/drivers/block/virtio_blk.ko kernel/drivers/block/loop.ko \
  kernel/drivers/virtio kernel/lib kernel/crypto kernel/fs/overlayfs kernel/fs/xfs "$root/lib/modules/$KERNEL_RELEASE/")
busybox depmod -b "$root" "$KERNEL_RELEASE" # the package leaves modules.dep to its postinst

# A scratch disk (virtio, ext4, made fresh each run) for the tests of the
# io controller (io.weight, io.max): the initramfs' tmpfs is on no block
# device. The guest mounts it at /mnt/disk (BRIM_TEST_DISK).
disk=$vm/disk.img
rm -f "$disk"
truncate -s 512M "$disk"
mkfs.ext4 -q -F "$disk"

initrd=$vm/initramfs.cpio
(cd "$root" && find . | cpio -o -H newc --quiet) >"$initrd"
log "initramfs $(du -m "$initrd" | cut -f1) MiB"

# 3. Boot. KVM when it works here, TCG otherwise.
# A KVM guest that hung once here (PLATFORM.md: it stops after "Probing
# EDD" on this cloud VM) leaves bin/vm/kvm-hangs, and later runs go straight
# to TCG; remove the file to try KVM again.
accel=${VM_ACCEL:-}
if [ -z "$accel" ]; then
  accel=tcg
  if [ -w /dev/kvm ] && [ ! -e "$vm/kvm-hangs" ]; then accel=kvm; fi
fi
console=$vm/console.log
boot() { # accel timeout-seconds: runs the guest; sets rc
  local a=$1 limit=$2 args=(-machine q35 -m "${VM_MEM:-3072}" -smp 2 -nographic -no-reboot -nic none
    -kernel "$kernel" -initrd "$initrd" -serial "file:$console" -monitor none -display none
    -drive "file=$disk,if=virtio,format=raw,cache=unsafe"
    -append "console=ttyS0 quiet loglevel=3 panic=-1 systemd.unified_cgroup_hierarchy=1 cgroup_no_v1=all")
  # TCG runs the vCPUs on one host thread (thread=single): with one thread
  # per vCPU (thread=multi) the guest kernel wedged here now and then when
  # it patched its text to detach a BPF tracepoint (text_poke_bp waits for
  # an IPI the other vCPU never answered: "soft lockup … CPU#0 stuck",
  # bpf's TestTrackUntrack, about once in 20 runs). 200 runs of it passed
  # single-threaded; the whole lane takes about the same time.
  if [ "$a" = kvm ]; then args+=(-enable-kvm -cpu host,-arch-capabilities); else args+=(-accel tcg,thread=single -cpu max); fi
  : >"$console"
  qemu-system-x86_64 "${args[@]}" </dev/null >"$vm/qemu.log" 2>&1 &
  qpid=$!
  tail -n +1 -f "$console" --pid=$qpid &
  local tpid=$! waited=0
  rc=
  while kill -0 $qpid 2>/dev/null; do
    if [ "$a" = kvm ] && [ $waited -ge 30 ] && ! grep -q "brim-vm:" "$console"; then
      log "kvm guest printed nothing in 30 s: stopping it (qemu pid $qpid), retrying with tcg"
      kill $qpid; wait $qpid 2>/dev/null || true; kill $tpid 2>/dev/null || true
      rc=kvm-hung
      date >"$vm/kvm-hangs"
      return
    fi
    if [ $waited -ge "$limit" ]; then
      log "guest did not finish within $limit s (VM_TIMEOUT): killing qemu pid $qpid"
      kill $qpid; sleep 1; kill -9 $qpid 2>/dev/null || true
      wait $qpid 2>/dev/null || true; kill $tpid 2>/dev/null || true
      rc=timeout
      return
    fi
    sleep 1
    waited=$((waited + 1))
  done
  wait $qpid || { log "qemu exited with $?: $(cat "$vm/qemu.log")"; }
  sleep 0.2
  kill $tpid 2>/dev/null || true
  wait $tpid 2>/dev/null || true
  rc=done
}
start=$(date +%s)
log "booting $KERNEL_PKG ($accel)"
boot "$accel" "${VM_TIMEOUT:-900}"
if [ "$rc" = kvm-hung ]; then
  accel=tcg
  boot tcg "${VM_TIMEOUT:-900}"
fi
log "guest ran $(( $(date +%s) - start )) s ($accel); console in $console"
[ "$rc" = timeout ] && exit 1
status=$(sed -n 's/^brim-vm: exit \([0-9]*\).*/\1/p' "$console" | tr -d '\r' | tail -1)
if [ -z "$status" ]; then
  log "the guest ended without reporting an exit status (crash? see $console)"
  exit 1
fi
grep -a '^brim-vm: === .* exit' "$console" | tr -d '\r' >&2 || true
if [ "$status" != 0 ]; then
  log "FAIL: tests failed in the cgroup v2 guest"
  exit 1
fi
log "ok: every package passed on cgroup v2"
