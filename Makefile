# brim — see README.md. Every target that needs packages or modules installs
# them first (hack/deps.sh, idempotent).

GO        ?= go
TAGS      ?= seccomp
BIN       := bin/brim
SHIM      := bin/brim-shim
PKGS      := ./...
# Kernel-facing tests share cgroups, CPUs and netlink; run packages two at a
# time and bound the whole suite.
TESTFLAGS ?= -p 2 -count=1 -timeout 30m

export CGO_ENABLED := 1

.PHONY: all deps build test test-v2 test-short bench demo lint generate clean

all: build

deps:
	@bash hack/deps.sh

## build: bin/brim (everything) and bin/brim-shim (the container shim alone,
## which starts faster; the agent uses it when it sits next to bin/brim)
build: deps
	$(GO) build -tags '$(TAGS)' -o $(BIN) ./cmd/brim
	$(GO) build -tags '$(TAGS)' -o $(SHIM) ./cmd/brim-shim

## test: the whole suite, as root (privileged tests fail instead of skipping
## when CI=true), then the cgroup v2 lane
test: deps build
	BRIM_BINARY=$(CURDIR)/$(BIN) BRIM_SHIM_BINARY=$(CURDIR)/$(SHIM) $(GO) test -tags '$(TAGS)' $(TESTFLAGS) $(PKGS)
	$(MAKE) test-v2

## test-v2: the kernel-facing packages' tests on a real cgroup v2 kernel
## (Debian's cloud kernel under qemu, pinned in hack/vm/kernel.env; cached in bin/vm)
test-v2: deps
	GO=$(GO) TAGS='$(TAGS)' bash hack/vm/lane.sh

## test-short: the pure tests only (no root needed)
test-short:
	$(GO) test -short $(PKGS)

## bench: benchmarks that print ratios against a baseline measured in the same run
bench: deps build
	BRIM_BINARY=$(CURDIR)/$(BIN) BRIM_SHIM_BINARY=$(CURDIR)/$(SHIM) bash bench/run.sh

## demo: the main job, end to end (as root)
demo: deps build
	BRIM_BINARY=$(CURDIR)/$(BIN) BRIM_SHIM_BINARY=$(CURDIR)/$(SHIM) GO=$(GO) bash hack/demo.sh

lint: deps
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags '$(TAGS)' $(PKGS)
	bin/tools/staticcheck -tags '$(TAGS)' $(PKGS)

## generate: rebuild committed generated code (protobuf, bpf2go objects)
generate: deps
	PATH=$(CURDIR)/bin/tools:$$PATH $(GO) generate $(PKGS)

clean:
	rm -rf bin
