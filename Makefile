# gocoll — see README.md.
#
#   make          build everything (Go packages and commands into build/bin)
#   make demo     the main job: run every collective with every algorithm
#   make test     every test: vet, gofmt, go test
#   make bench    the Go benchmarks (kernels, collectives); not part of test

GO      ?= go
BUILD   := build
BIN     := $(BUILD)/bin
GOFLAGS ?=

.PHONY: all build demo test vet fmt-check bench deps clean

all: build

build:
	$(GO) build ./...
	$(GO) build -o $(BIN)/gocoll-demo ./cmd/gocoll-demo

demo: build
	$(BIN)/gocoll-demo -ranks 2,3,4,8

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

test: vet fmt-check
	$(GO) test -timeout 20m ./...

bench:
	$(GO) test -run XXX -bench . -benchtime 1s ./ops/ ./coll/

clean:
	rm -rf $(BUILD)
