#!/usr/bin/env bash
# Installs what brim's build, tests, demo and benchmarks need on a fresh
# Debian machine, idempotently: Debian packages (only those missing), Go
# modules, and pinned Go tools under ./bin/tools. Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(
  gcc make pkg-config libseccomp-dev   # cgo + libcontainer seccomp
  busybox-static                       # minimal rootfs for tests and demo
  runc                                 # baseline for the launch benchmark
  iproute2 iperf3 stress-ng            # network isolator tests, antagonists
  clang llvm libbpf-dev bpftool        # `make generate` (BPF objects are committed)
  linux-perf                           # `perf bench sched pipe` in make bench
  protobuf-compiler                    # `make generate` (generated code is committed)
  python3-grpcio python3-protobuf      # the Python example plugin (examples/python-plugin) and its test
  jq procps util-linux curl
  qemu-system-x86 cpio e2fsprogs       # make test-v2: the cgroup v2 guest and its scratch disk
  docker-registry skopeo tar           # image tests: a real registry on loopback; OCI layouts and docker-archives
  debootstrap                          # make test: the Debian root the .deb is installed into (hack/debroot.sh)
  etcd-server                          # the 3-member etcd of the chaos harness's HA mode (make chaos)
  xfsprogs                             # upper-dir project quotas: an xfs loop file in the tests
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "deps: missing Debian packages (${missing[*]}); run as root" >&2
    exit 1
  fi
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

go mod download

# Developer tools (golangci-lint, protoc plugins) are pinned by the `tool`
# block of tools/go.mod, a module of their own so their dependencies never
# mix with brim's; `make tools` builds them into ./bin/tools when needed.
