# brim — see README.md. Every target that needs packages or modules installs
# them first (hack/deps.sh, idempotent).

GO        ?= go
TAGS      ?= seccomp
BIN       := bin/brim
PKGS      := ./...
# Kernel-facing tests share cgroups, CPUs and netlink; run packages two at a
# time and bound the whole suite.
TESTFLAGS ?= -p 2 -timeout 30m

export CGO_ENABLED := 1

.PHONY: all deps build test test-short bench demo lint generate clean

all: build

deps:
	@bash hack/deps.sh

build: deps
	$(GO) build -tags '$(TAGS)' -o $(BIN) ./cmd/brim

## test: the whole suite, as root (privileged tests fail instead of skipping when CI=true)
test: deps build
	BRIM_BINARY=$(CURDIR)/$(BIN) $(GO) test -tags '$(TAGS)' $(TESTFLAGS) $(PKGS)

## test-short: the pure tests only (no root needed)
test-short:
	$(GO) test -short $(PKGS)

## bench: benchmarks that print ratios against a baseline measured in the same run
bench: deps build
	BRIM_BINARY=$(CURDIR)/$(BIN) bash bench/run.sh

## demo: the main job, end to end (as root)
demo: deps build
	BRIM_BINARY=$(CURDIR)/$(BIN) bash hack/demo.sh

lint: deps
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags '$(TAGS)' $(PKGS)
	bin/tools/staticcheck -tags '$(TAGS)' $(PKGS)

## generate: rebuild committed generated code (protobuf, bpf2go objects)
generate: deps
	PATH=$(CURDIR)/bin/tools:$$PATH $(GO) generate $(PKGS)

clean:
	rm -rf bin
