# The two commands of README.md: `make build && ./gpuaas dev`, and `make test`.
GO ?= go

.PHONY: build test test-short vet lint fmt-check bench generate

build:
	$(GO) build -o gpuaas .

## test: the whole suite, race detector on, against real PostgreSQL and NATS.
## -count=1: never trust cached results; e2e drives a binary it builds
## itself, which the test cache cannot see change.
test:
	$(GO) test -race -count=1 -timeout 30m ./...

test-short:
	$(GO) test -short ./...

vet:
	$(GO) vet ./...

lint:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./controld/ ./controld/busauth/

generate:
	$(GO) generate ./...
