# gocoll — see README.md.
#
#   make          build everything: libgocoll.so, libgocoll-preload.so (the
#                 LD_PRELOAD library), the Fortran module, the compiler
#                 wrappers, gocollrun and the Go commands
#   make demo     the main job (see the README)
#   make test     every test: vet, gofmt, go test (Go, C and Fortran)
#   make bench    the Go benchmarks (kernels, collectives); not part of test
#   make compare  gocoll against Open MPI and MPICH on this machine, np=2
#                 and 4: the ratio table and docs/compare-np*.svg
#   make measure  everything the README's performance section reports
#                 (tools/measure.sh, about 30 minutes on an idle machine)

GO      ?= go
ROOT    := $(CURDIR)
BUILD   := build
BIN     := $(BUILD)/bin
LIB     := $(BUILD)/lib
INC     := $(BUILD)/include

# go-nvml (gocollrun --info's GPU topology) calls NVML functions that its
# own header marks deprecated: keep gcc quiet about them.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

.PHONY: all build deps lib fortran wrappers commands demo test vet fmt-check bench compare measure clean

all: build

build: deps lib fortran wrappers commands

deps:
	@tools/deps.sh

lib:
	$(GO) build -buildmode=c-shared -o $(LIB)/libgocoll.so ./capi
	@rm -f $(LIB)/libgocoll.h
	@mkdir -p $(LIB)/mpich-abi
	@ln -sf ../libgocoll.so $(LIB)/mpich-abi/libmpich.so.12
	@# Built aside and renamed into place: jobs running with the old
	@# library keep it (rewriting a mapped library in place breaks them).
	$(GO) build -buildmode=c-shared -ldflags '-extldflags "-Wl,--version-script=$(ROOT)/preload/exports.map"' \
		-o $(LIB)/.libgocoll-preload.so.tmp ./preload
	@mv -f $(LIB)/.libgocoll-preload.so.tmp $(LIB)/libgocoll-preload.so
	@rm -f $(LIB)/.libgocoll-preload.so.h $(LIB)/libgocoll-preload.h

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
	@# Real fuzzing, bounded: 10 s on top of the committed corpus (which
	@# go test ./... has just replayed). New findings land in the Go
	@# build cache's fuzz corpus; a crasher is written to coll/testdata.
	$(GO) test -run XXX -fuzz FuzzCollectives -fuzztime 10s ./coll
	@cat $(BUILD)/tests-preload.txt 2>/dev/null || true

bench:
	$(GO) test -run XXX -bench . -benchtime 1s ./ops/ ./coll/

compare: build
	@mkdir -p docs
	$(BIN)/gocoll-compare -np 2,4 -plot docs/compare

measure: build
	tools/measure.sh

clean:
	rm -rf $(BUILD)
