# brim — see README.md. Every target that needs packages or modules installs
# them first (hack/deps.sh, idempotent).

GO        ?= go
TAGS      ?= seccomp
BIN       := bin/brim
SHIM      := bin/brim-shim
EXPERIMENT := bin/brim-experiment
PKGS      := ./...
# Kernel-facing tests share cgroups, CPUs and netlink; run packages two at a
# time and bound the whole suite.
TESTFLAGS ?= -p 2 -count=1 -timeout 30m

export CGO_ENABLED := 1

# bin/brim-shim is linked statically (libc and libseccomp included): no
# dynamic loader on its two execs per cold launch, and a warm sandbox's
# exec trampoline (the same binary) runs inside any root filesystem.
SHIM_TAGS    := $(TAGS) osusergo netgo
SHIM_LDFLAGS := -extldflags -static

# Build identity, stamped into every binary (internal/buildinfo). The date is
# the commit's, so that two builds of one commit are the same bytes.
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILDDATE ?= $(shell git log -1 --format=%cI 2>/dev/null)
BI        := github.com/brimnode/brim/internal/buildinfo
LDFLAGS   := -X $(BI).version=$(VERSION) -X $(BI).commit=$(COMMIT) -X $(BI).date=$(BUILDDATE)

.PHONY: all deps tools build man package debroot test test-v2 test-short chaos bench demo lint check-generated cross generate clean

all: build

deps:
	@bash hack/deps.sh

## build: bin/brim (everything), bin/brim-shim (the container shim alone,
## statically linked: it starts faster, and a warm sandbox runs it in any
## root filesystem; the agent uses it when it sits next to bin/brim) and
## bin/brim-experiment (`brim experiment`, with the plotting library)
build: deps
	$(GO) build -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/brim
	$(GO) build -tags '$(SHIM_TAGS)' -ldflags '$(LDFLAGS) $(SHIM_LDFLAGS)' -o $(SHIM) ./cmd/brim-shim
	$(GO) build -ldflags '$(LDFLAGS)' -o $(EXPERIMENT) ./cmd/brim-experiment

## package: bin/brim_<version>_amd64.deb (nfpm, pinned in tools/go.mod) with
## brim, brim-shim, the systemd units and commented default configurations
DEB_VERSION ?= $(shell v=$$(git describe --tags --match 'v[0-9]*' 2>/dev/null) && echo $${v\#v} | tr - + || echo 0.0~git$$(git log -1 --format=%cd --date=format:%Y%m%d%H%M%S 2>/dev/null).$$(git rev-parse --short HEAD 2>/dev/null))
DEB       := bin/brim.deb
package: build bin/tools/nfpm man
	@mkdir -p bin/pkg
	# The packaged agent keeps its containers' runtime state on /run (a
	# tmpfs under systemd; docs/operators.md, Runtime state on tmpfs).
	bin/brim agent config --commented | sed 's|^#run-dir = ""$$|run-dir = "/run/brim-agent"|' > bin/pkg/agent.toml
	grep -qx 'run-dir = "/run/brim-agent"' bin/pkg/agent.toml
	bin/brim master config --commented > bin/pkg/master.toml
	bin/brim completion bash > bin/pkg/brim.bash
	bin/brim completion zsh > bin/pkg/_brim
	bin/brim completion fish > bin/pkg/brim.fish
	BRIM_DEB_VERSION='$(DEB_VERSION)' bin/tools/nfpm package --config dist/nfpm.yaml --packager deb --target $(DEB)

## debroot: the Debian root the package test installs the .deb into
## (debootstrap minbase of the host's release; made once, cached in bin/debroot)
DEBROOT   := bin/debroot/root
debroot: deps
	bash hack/debroot.sh >/dev/null
## man: bin/man/*.1.gz, a manual page per command, generated from the
## commands (brim docs man; dated with the commit, so reproducible)
man: build
	rm -rf bin/man
	bin/brim docs man bin/man
	gzip -9n bin/man/*.1

## test: the whole suite, as root (privileged tests fail instead of skipping
## when CI=true), then the cgroup v2 lane
test: deps build package debroot
	BRIM_BINARY=$(CURDIR)/$(BIN) BRIM_SHIM_BINARY=$(CURDIR)/$(SHIM) BRIM_DEB=$(CURDIR)/$(DEB) BRIM_DEBROOT=$(CURDIR)/$(DEBROOT) $(GO) test -tags '$(TAGS)' $(TESTFLAGS) $(PKGS)
	$(MAKE) test-v2

## test-v2: the kernel-facing packages' tests on a real cgroup v2 kernel
## (Debian's cloud kernel under qemu, pinned in hack/vm/kernel.env; cached in bin/vm)
test-v2: deps
	GO=$(GO) TAGS='$(TAGS)' bash hack/vm/lane.sh

## test-short: the pure tests only (no root needed)
test-short:
	$(GO) test -short $(PKGS)

## chaos: one seeded chaos run (chaos/, docs/chaos.md): real masters, agents
## and frameworks under injected faults, checked against invariants; as root.
## SEED=0 picks a fresh seed (printed); a failing run prints its replay command.
## MASTERS=3 (the default) is HA mode: three masters on a 3-member etcd;
## MASTERS=1 one master on bbolt. AGENTS (2 or 3), FAULTS (comma-separated
## kinds, default all) and TTL (the masters' --session-ttl) shape it.
## The lead's run: make chaos DURATION=30m FAULTS=all
SEED     ?= 0
DURATION ?= 5m
AGENTS   ?= 2
MASTERS  ?= 3
TTL      ?= 4s
FAULTS   ?= all
# CHAOS_TIMEOUT bounds the whole test: DURATION plus setup, drain and
# teardown (the test refuses a timeout under DURATION + 8m).
CHAOS_TIMEOUT ?= 2h
chaos: deps build
	BRIM_BINARY=$(CURDIR)/$(BIN) BRIM_SHIM_BINARY=$(CURDIR)/$(SHIM) $(GO) test -tags '$(TAGS)' -count=1 -v \
	  -timeout $(CHAOS_TIMEOUT) \
	  -run '^TestChaos$$' ./chaos -chaos.seed=$(SEED) -chaos.duration=$(DURATION) \
	  -chaos.agents=$(AGENTS) -chaos.masters=$(MASTERS) -chaos.ttl=$(TTL) -chaos.faults='$(FAULTS)'

## bench: benchmarks that print ratios against a baseline measured in the same run
bench: deps build
	BRIM_BINARY=$(CURDIR)/$(BIN) BRIM_SHIM_BINARY=$(CURDIR)/$(SHIM) bash bench/run.sh

## demo: the main job, end to end (as root)
demo: deps build
	BRIM_BINARY=$(CURDIR)/$(BIN) BRIM_SHIM_BINARY=$(CURDIR)/$(SHIM) GO=$(GO) bash hack/demo.sh

## tools: the pinned developer tools of tools/go.mod, built into bin/tools;
## each is rebuilt only when tools/go.mod or tools/go.sum change
TOOLS := golangci-lint nfpm protoc-gen-go protoc-gen-go-grpc
tools: $(addprefix bin/tools/,$(TOOLS))
bin/tools/%: tools/go.mod tools/go.sum
	cd tools && GOBIN=$(CURDIR)/bin/tools $(GO) install $$($(GO) list tool | grep '/$*$$')
	@touch $@

## lint: gofmt, go vet and golangci-lint (staticcheck, errcheck, gocyclo,
## and the depguard rules that encode the layering in .golangci.yml; every
## package path and file glob a rule names must exist: hack/depguardpaths),
## plus `cross`; a second golangci-lint on the machine waits for the first
lint: deps bin/tools/golangci-lint cross
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags '$(TAGS)' $(PKGS)
	$(GO) run ./hack/depguardpaths -tags '$(TAGS)'
	GO=$(GO) TAGS='$(TAGS)' bash hack/linkcheck.sh
	bin/tools/golangci-lint run --allow-serial-runners $(PKGS)

## cross: the library packages build for other systems (kernel code sits in
## *_linux.go files with stubs elsewhere); cmd, examples and tests are Linux-only
CROSS_PKGS = $$($(GO) list ./... | grep -v -e /cmd/ -e /integration -e /examples/ -e /internal/bpfbench -e /internal/masterbench -e /internal/launchbench)
cross:
	@for os in darwin freebsd windows; do \
	  echo "cross: GOOS=$$os"; GOOS=$$os CGO_ENABLED=0 $(GO) build $(CROSS_PKGS) || exit 1; \
	done

## generate: rebuild committed generated code (protobuf, bpf2go objects)
generate: deps bin/tools/protoc-gen-go bin/tools/protoc-gen-go-grpc
	PATH=$(CURDIR)/bin/tools:$$PATH $(GO) generate $(PKGS)

## check-generated: the committed generated code is what `make generate` makes
check-generated: generate
	@git diff --exit-code -- '*.pb.go' '*_pb2.py' '*_bpfel.go' '*_bpfel.o' || { echo "check-generated: generated code is stale; run make generate and commit"; exit 1; }
	@test -z "$$(git status --porcelain --untracked-files=all -- '*.pb.go' '*_pb2.py' '*_bpfel.go' '*_bpfel.o')" || { echo "check-generated: make generate made new files"; git status --short; exit 1; }

clean:
	rm -rf bin
