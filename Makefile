# The two commands of README.md: `make dev` (installs what the platform
# needs, builds, runs `gpuaas dev`) and `make test`. Both first run
# scripts/deps, which installs what this machine lacks when it can (apt-get as
# root, go install) and otherwise prints the exact command and stops.
GO ?= go
# Go's own install places, for a shell whose PATH does not have them yet.
export PATH := $(PATH):/usr/local/go/bin:$(HOME)/go/bin
# DEV_FLAGS: flags for `gpuaas dev`, e.g. make dev DEV_FLAGS='--hosts 3 --reset'.
DEV_FLAGS ?=
FAULT_PKGS = ./cli/daemon/
FAULT_PKGS += ./hostd/agent/

.PHONY: build dev deps-dev deps-test deps-bench test test-short vet lint fmt-check bench generate fuzz

build:
	$(GO) build -o gpuaas .

deps-dev:
	@./scripts/deps dev

deps-test:
	@./scripts/deps test

dev: deps-dev build
	./gpuaas dev $(DEV_FLAGS)

## test: the whole suite, race detector on, against real PostgreSQL and NATS.
## -count=1: never trust cached results; e2e drives a binary it builds
## itself, which the test cache cannot see change. e2e builds that binary
## with the faultinject tag (hostd's --fail-phase/--delay-phase, test
## equipment release builds leave out); the second run tests the tagged
## code itself. FAULT_PKGS are the packages with faultinject files.
## -timeout 80m: e2e is the longest package (about 40 min on a quiet
## 2-core machine, an hour loaded); CI's whole budget is 90 min.
test: deps-test
	$(GO) test -race -count=1 -timeout 80m ./...
	$(GO) test -race -count=1 -tags faultinject $(FAULT_PKGS)

test-short:
	$(GO) test -short ./...

vet:
	$(GO) vet ./...
	$(GO) vet -tags faultinject $(FAULT_PKGS)

lint:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 -tags faultinject $(FAULT_PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

deps-bench:
	@./scripts/deps bench

## bench: every benchmark of bench/goals.json, then one table of the goals
## (bench/README.md). BENCH_IDLE_SESSIONS=10000 for the idle-session goal's
## own scale; BENCH_ONLY=REGEXP runs only the matching steps. It needs what
## the tests need too (a running libvirtd for the guest boot, podman for apps).
bench: deps-test deps-bench
	@./scripts/bench

generate:
	$(GO) generate ./...

## fuzz: every fuzz target (found by scripts/fuzz) for FUZZTIME (default
## 3s) each, one at a time; FUZZ_ONLY=REGEXP runs only matching targets.
## deps-test: controld/hosts fuzzes against a real Postgres.
fuzz: deps-test
	@./scripts/fuzz
