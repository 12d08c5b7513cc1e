#!/bin/sh
# tests/gpu/bundle.sh DEST (make gpu-bundle): the device check bundle, one
# folder that runs, copied anywhere, on a machine with nothing but an
# NVIDIA driver (no compiler, no CUDA toolkit, no Go, no network):
#
#   run.sh                 the checks (tests/gpu/run.sh); --help
#   bin/                   gocollrun; mpicc, mpicxx, mpif90 (they find
#                          include/ and lib/ from where they are)
#   lib/                   libgocoll.so, libgocoll-preload.so (with their
#                          sonames), mpich-abi/libmpich.so.12
#   include/               mpi.h, mpi-ext.h, mpif.h, mpi.f90 and the mpi module
#   tests/gpucoll          tests/gpu/c/gpucoll.c built against gocoll's
#                          mpi.h (rpath $ORIGIN/../lib), and against Open
#                          MPI's and MPICH's (gpucoll-openmpi,
#                          gpucoll-mpich) where those are installed here,
#                          for the LD_PRELOAD runs; the source beside them
#   tests/gpucalls         tests/gpu/c/gpucalls.c (the other calls that
#                          take buffers, point-to-point among them) against
#                          gocoll's mpi.h only: under LD_PRELOAD those are
#                          the host MPI's
#   stub/                  the stand-in libcuda.so.1 and libcudart.so.12
#                          (tests/gpu/c) for run.sh --self-test
#   examples/allreduce.c   what --self-test compiles with bin/mpicc
#   BUILD                  what was built, from which commit
#
# build/ must be built (make build). The bundle is made in a temporary
# folder beside DEST and renamed into place; an older DEST is moved
# aside first and removed after.
set -eu
dest=${1:?usage: tests/gpu/bundle.sh DEST}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
parent=$(dirname "$dest")
mkdir -p "$parent"
tmp=$(mktemp -d "$parent/.gpu-bundle.XXXXXX")
trap 'rm -rf "$tmp" "$tmp.old"' EXIT
mkdir -p "$tmp/bin" "$tmp/lib/mpich-abi" "$tmp/include" "$tmp/tests" "$tmp/stub" "$tmp/examples"
cp build/bin/gocollrun build/bin/mpicc build/bin/mpicxx build/bin/mpif90 "$tmp/bin/"
# Each library's file, soname link and .so link (Makefile, lib).
for n in libgocoll libgocoll-preload; do
	soname=$(readlink "build/lib/$n.so")
	cp -P "build/lib/$n.so" "build/lib/$soname" "build/lib/$(readlink "build/lib/$soname")" "$tmp/lib/"
done
cp -P build/lib/mpich-abi/libmpich.so.12 "$tmp/lib/mpich-abi/"
cp include/mpi.h include/mpi-ext.h include/mpif.h include/mpi.f90 build/include/mpi.mod "$tmp/include/"
cp tests/gpu/run.sh "$tmp/run.sh"
cp tests/gpu/c/gpucoll.c tests/gpu/c/gpucalls.c "$tmp/tests/"
cp examples/c/allreduce.c "$tmp/examples/"

CFLAGS="-O2 -g -std=gnu11 -Wall"
src=tests/gpu/c/gpucoll.c
echo "cc $CFLAGS -Iinclude -o gpu-bundle/tests/gpucoll $src -Lbuild/lib -lgocoll -Wl,-rpath,'\$ORIGIN/../lib' -ldl -lm"
# $CFLAGS is split into words on purpose (sh has no arrays); $ORIGIN is
# the loader's, not the shell's.
# shellcheck disable=SC2086,SC2016
cc $CFLAGS -I"$tmp/include" -o "$tmp/tests/gpucoll" $src -L"$tmp/lib" -lgocoll -Wl,-rpath,'$ORIGIN/../lib' -ldl -lm
built="gpucoll (gocoll's mpi.h)"
echo "cc $CFLAGS -Iinclude -o gpu-bundle/tests/gpucalls tests/gpu/c/gpucalls.c -Lbuild/lib -lgocoll -Wl,-rpath,'\$ORIGIN/../lib' -ldl"
# shellcheck disable=SC2086,SC2016
cc $CFLAGS -I"$tmp/include" -o "$tmp/tests/gpucalls" tests/gpu/c/gpucalls.c -L"$tmp/lib" -lgocoll -Wl,-rpath,'$ORIGIN/../lib' -ldl
built="$built, gpucalls (gocoll's mpi.h)"
for m in openmpi mpich; do
	if command -v mpicc.$m >/dev/null 2>&1; then
		echo "mpicc.$m $CFLAGS -o gpu-bundle/tests/gpucoll-$m $src -ldl -lm"
		# shellcheck disable=SC2086
		mpicc.$m $CFLAGS -o "$tmp/tests/gpucoll-$m" $src -ldl -lm
		built="$built, gpucoll-$m ($(mpicc.$m -show 2>/dev/null | tr ' ' '\n' | grep -m1 -- '-lmpi' || echo "-lmpi"))"
	else
		echo "gpu-bundle: no mpicc.$m here: the bundle has no gpucoll-$m for LD_PRELOAD runs over it" >&2
	fi
done
echo "gcc -O2 -shared -fPIC -o gpu-bundle/stub/libcuda.so.1 tests/gpu/c/stubcuda.c -lm"
cc -O2 -g -Wall -shared -fPIC -o "$tmp/stub/libcuda.so.1" tests/gpu/c/stubcuda.c -lm
echo "gcc -O2 -shared -fPIC -o gpu-bundle/stub/libcudart.so.12 tests/gpu/c/stubcudart.c -ldl"
cc -O2 -g -Wall -shared -fPIC -o "$tmp/stub/libcudart.so.12" tests/gpu/c/stubcudart.c -ldl

commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit with uncommitted changes"
{
	echo "gocoll device check bundle, built $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -n) from commit $commit"
	echo "programs: $built"
	echo "needs there: Linux x86-64, glibc >= $(for f in "$tmp"/bin/gocollrun "$tmp"/lib/*.so "$tmp"/tests/gpucoll*; do
		objdump -T "$f" 2>/dev/null; done | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1), the NVIDIA driver (libcuda.so.1)"
} >"$tmp/BUILD"
chmod -R a+rX "$tmp"

[ -e "$dest" ] && mv -T "$dest" "$tmp.old"
mv -T "$tmp" "$dest"
echo "gpu-bundle: $dest, $(du -sh "$dest" | cut -f1): $dest/run.sh (--help; --self-test without a GPU)"
