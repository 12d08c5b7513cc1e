# gocoll — see README.md.
#
#   make          build everything: libgocoll.so, the Fortran module, the
#                 compiler wrappers, gocollrun and the Go commands
#   make demo     the main job (see the README)
#   make test     every test: vet, gofmt, go test (Go, C and Fortran)
#   make bench    the Go benchmarks (kernels, collectives); not part of test

GO      ?= go
ROOT    := $(CURDIR)
BUILD   := build
BIN     := $(BUILD)/bin
LIB     := $(BUILD)/lib
INC     := $(BUILD)/include

.PHONY: all build deps lib fortran wrappers commands demo test vet fmt-check bench clean

all: build

build: deps lib fortran wrappers commands

deps:
	@tools/deps.sh

lib:
	$(GO) build -buildmode=c-shared -o $(LIB)/libgocoll.so ./capi
	@rm -f $(LIB)/libgocoll.h
	@mkdir -p $(LIB)/mpich-abi
	@ln -sf ../libgocoll.so $(LIB)/mpich-abi/libmpich.so.12

fortran:
	@mkdir -p $(INC)
	gfortran -c -Iinclude -J$(INC) include/mpi.f90 -o $(INC)/mpi.o

wrappers:
	@mkdir -p $(BIN)
	@for w in mpicc mpicxx mpif90; do sed 's|@ROOT@|$(ROOT)|' tools/$$w.in > $(BIN)/$$w; chmod +x $(BIN)/$$w; done

commands:
	$(GO) build -o $(BIN)/ ./cmd/...

demo: build
	tools/demo.sh

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

test: build vet fmt-check
	$(GO) test -timeout 20m ./...

bench:
	$(GO) test -run XXX -bench . -benchtime 1s ./ops/ ./coll/

clean:
	rm -rf $(BUILD)
