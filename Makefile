# gocoll — see README.md.
#
#   make          build everything: libgocoll.so, libgocoll-preload.so (the
#                 LD_PRELOAD library), the Fortran module, the compiler
#                 wrappers, gocollrun and the Go commands
#   make demo     the main job (see the README)
#   make install  into PREFIX (default /usr/local; DESTDIR stages it):
#                 bin/, lib/ (sonames; lib/pkgconfig: gocoll,
#                 gocoll-preload; lib/cmake/gocoll), include/gocoll/,
#                 share/man, share/doc/gocoll (tools/install.sh)
#   make uninstall  what make install put there, nothing else
#   make deb      build/gocoll_<version>_<arch>.deb: the same layout in
#                 /usr (wrappers only as mpicc.gocoll...), depending on
#                 libc6 only (tools/deb.sh)
#   make gpu-bundle
#                 build/gpu-bundle/: the device check, a folder to copy to
#                 a GPU machine that has only the NVIDIA driver, and run
#                 there (run.sh; see docs/cuda.md)
#   make test     every test: vet, gofmt, go test (Go, C and Fortran)
#   make test-cluster
#                 tests/cluster alone: a one-node Slurm started by the
#                 tests (as root), srun --mpi=pmi2 and pmix (~15 s)
#   make bench    the Go benchmarks (kernels, collectives); not part of test
#   make compare  gocoll against Open MPI and MPICH on this machine, np=2,
#                 4 and 8: the ratio tables, and results/compare-np*.svg
#                 headed by the command, commit and machine
#   make measure  everything docs/performance.md reports, into results/
#                 (tools/measure.sh, about 40 minutes on an idle machine)

GO      ?= go
ROOT    := $(CURDIR)
BUILD   := build
BIN     := $(BUILD)/bin
LIB     := $(BUILD)/lib
INC     := $(BUILD)/include

# go-nvml (gocollrun --info's GPU topology) calls NVML functions that its
# own header marks deprecated: keep gcc quiet about them.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

PREFIX ?= /usr/local
export PREFIX DESTDIR

.PHONY: install uninstall deb all build deps cluster-deps test-cluster lib fortran wrappers commands gpu-bundle demo test vet fmt-check bench compare measure clean

all: build

build: deps lib fortran wrappers commands

deps:
	@tools/deps.sh

# Slurm and munge for tests/cluster (part of make test too).
cluster-deps:
	@tools/cluster-deps.sh

# The libraries carry a soname, as installed libraries do: the file is
# libgocoll.so.$(VERSION), its soname (what a program linked with -lgocoll
# records) libgocoll.so.$(SOMAJOR), and libgocoll.so links to it for the
# linker; libgocoll-preload the same. VERSION is the one place the
# version is written.
VERSION := $(shell cat VERSION)
SOMAJOR := $(firstword $(subst ., ,$(VERSION)))
# The version in every library and command (gocollrun --version,
# GOCOLL_DEBUG=info's first line).
SETVERSION := -X github.com/gocoll/gocoll/internal/version.Version=$(VERSION)

# Every output is written under a name of its own (the shell's pid) and
# renamed into place: a test or a job using the old file keeps it
# (rewriting a mapped library or a running script in place breaks them),
# and two makes at once (TestMains, a user's shell) never write one file.
# sharedlib NAME: the symlinks libNAME.so.$(SOMAJOR) and libNAME.so to the
# file just built, each made under a name of its own and renamed too.
sharedlib = ln -sfn $(1).so.$(VERSION) $(LIB)/.$(1).so.$(SOMAJOR).$$$$ && mv -fT $(LIB)/.$(1).so.$(SOMAJOR).$$$$ $(LIB)/$(1).so.$(SOMAJOR) && \
	ln -sfn $(1).so.$(SOMAJOR) $(LIB)/.$(1).so.$$$$ && mv -fT $(LIB)/.$(1).so.$$$$ $(LIB)/$(1).so
lib:
	@mkdir -p $(LIB)/mpich-abi
	$(GO) build -buildmode=c-shared -ldflags '$(SETVERSION) -extldflags "-Wl,-soname,libgocoll.so.$(SOMAJOR)"' \
		-o $(LIB)/.libgocoll.so.$$$$.tmp ./capi && \
		rm -f $(LIB)/.libgocoll.so.$$$$.h && mv -f $(LIB)/.libgocoll.so.$$$$.tmp $(LIB)/libgocoll.so.$(VERSION) && \
		$(call sharedlib,libgocoll)
	@rm -f $(LIB)/libgocoll.h
	@ln -sfn ../libgocoll.so.$(SOMAJOR) $(LIB)/mpich-abi/.libmpich.so.12.$$$$ && \
		mv -fT $(LIB)/mpich-abi/.libmpich.so.12.$$$$ $(LIB)/mpich-abi/libmpich.so.12
	$(GO) build -buildmode=c-shared -ldflags '$(SETVERSION) -extldflags "-Wl,-soname,libgocoll-preload.so.$(SOMAJOR) -Wl,--version-script=$(ROOT)/preload/exports.map"' \
		-o $(LIB)/.libgocoll-preload.so.$$$$.tmp ./preload && \
		rm -f $(LIB)/.libgocoll-preload.so.$$$$.h && mv -f $(LIB)/.libgocoll-preload.so.$$$$.tmp $(LIB)/libgocoll-preload.so.$(VERSION) && \
		$(call sharedlib,libgocoll-preload)
	@rm -f $(LIB)/libgocoll-preload.h

fortran:
	@mkdir -p $(INC)
	@d=$$(mktemp -d $(INC)/.tmp.XXXXXX) && \
		echo gfortran -c -Iinclude -J$(INC) include/mpi.f90 -o $(INC)/mpi.o && \
		gfortran -c -Iinclude -J$$d include/mpi.f90 -o $$d/mpi.o && \
		mv -f $$d/mpi.mod $$d/mpi.o $(INC)/ && rmdir $$d || { rm -rf $$d; exit 1; }

# The wrappers are one script (tools/mpiwrap.in) under three names: it
# takes its language from the name. They have no path built in: they find
# include/ and lib/ from where they are, so that a copy of
# build/gpu-bundle works anywhere.
wrappers:
	@mkdir -p $(BIN)
	@for w in mpicc mpicxx mpif90; do \
		cp tools/mpiwrap.in $(BIN)/.$$w.$$$$.tmp && chmod +x $(BIN)/.$$w.$$$$.tmp && \
		mv -f $(BIN)/.$$w.$$$$.tmp $(BIN)/$$w || exit 1; done

commands:
	@mkdir -p $(BIN)
	@d=$$(mktemp -d $(BIN)/.tmp.XXXXXX) && echo $(GO) build -ldflags \''$(SETVERSION)'\' -o $(BIN)/ ./cmd/... && \
		$(GO) build -ldflags '$(SETVERSION)' -o $$d/ ./cmd/... && mv -f $$d/* $(BIN)/ && rmdir $$d || { rm -rf $$d; exit 1; }

# Built in a temporary folder and renamed into place (tests/gpu/bundle.sh).
gpu-bundle: build
	@tests/gpu/bundle.sh $(BUILD)/gpu-bundle

demo: build
	tools/demo.sh

install: build
	tools/install.sh install

uninstall:
	tools/install.sh uninstall

deb: build
	tools/deb.sh

# The test-only hooks (preload/fault.go) build only with -tags gocolltest:
# vetted both ways.
vet:
	$(GO) vet ./...
	$(GO) vet -tags gocolltest ./preload

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# The packages whose tests compile C or Fortran, or build and run other
# programs (through subprocesses that go test cannot see), are tests/...,
# cmd/gocollrun and cmd/gocoll-soak: their results are never taken from go
# test's cache, which would miss a change to a C file or to a package
# they do not import. The others stay cacheable. make test builds once
# (build and gpu-bundle), before go test, and GOCOLL_TEST_BUILT tells the
# TestMains (tests/internal/harness) that build/ is fresh, so that they
# run no make of their own.
test: build cluster-deps gpu-bundle vet fmt-check
	$(GO) test -timeout 20m $$($(GO) list ./... | grep -v -e '/tests$$' -e '/tests/' -e '/cmd/gocollrun$$' -e '/cmd/gocoll-soak$$')
	GOCOLL_TEST_BUILT=$(ROOT) $(GO) test -count=1 -timeout 20m ./tests/... ./cmd/gocollrun ./cmd/gocoll-soak
	@# Real fuzzing, bounded: 10 s on top of the committed corpus (which
	@# go test ./... has just replayed). New findings land in the Go
	@# build cache's fuzz corpus; a crasher is written to coll/testdata.
	$(GO) test -run XXX -fuzz FuzzCollectives -fuzztime 10s ./coll
	@cat $(BUILD)/tests-preload.txt 2>/dev/null || true

test-cluster: build cluster-deps
	GOCOLL_TEST_BUILT=$(ROOT) $(GO) test -count=1 -timeout 5m ./tests/cluster

bench:
	$(GO) test -run XXX -bench . -benchtime 1s ./ops/ ./coll/

compare: build
	@mkdir -p results
	$(BIN)/gocoll-compare -plot results/compare

measure: build
	tools/measure.sh

clean:
	rm -rf $(BUILD)
