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
#   mpich-runtime.tar.xz   this machine's MPICH runtime, for the LD_PRELOAD
#                          runs on a machine with no MPI (below)
#   BUILD                  what was built, from which commit
#
# MPICH's runtime: the GPU machine has no MPI and no network to install
# one, and the LD_PRELOAD runs need a host MPI. So the bundle carries this
# machine's MPICH launcher, mpiexec.hydra (also as mpiexec.mpich), its
# proxy hydra_pmi_proxy, and every library ldd says they, libmpich.so.12
# and gpucoll-mpich need but the C and C++ runtime's (libc, libm,
# libresolv, libpthread, libdl, librt, the dynamic loader, libgcc_s,
# libstdc++, libz: every Linux has them). On Debian 12 with MPICH 4.0.2
# (ch4:ucx) that is libmpich.so.12 (MPICH), libhwloc.so.15 (hwloc, the
# topology, for hydra and MPICH), libslurm.so.38 (hydra's Slurm support:
# linked by hydra and its proxy, not used here; it needs only libc, libm
# and libresolv), libucp.so.0, libucs.so.0, libuct.so.0, libucm.so.0 (UCX,
# MPICH's device), libnuma.so.1 (UCX's) and libudev.so.1 (hwloc's); and
# UCX's module ucx/libuct_cma.so.0 (cross-memory attach between the
# processes of a node), which UCX loads from beside libucs.so.0, not its
# ib and rdmacm modules (network transports, which need libibverbs: the
# GPU machine has no network). About 44 MiB, 8 MiB as a tar.xz: run.sh
# unpacks it into the bundle's folder when the LD_PRELOAD runs over MPICH
# need it (no MPICH installed there, or --bundled-mpich) and names it in
# those runs' PATH and LD_LIBRARY_PATH only. xz takes a while on this
# machine: the archive is kept in DEST's parent folder
# (mpich-runtime.tar.xz, with mpich-runtime.list, the files it holds and
# their sizes and times) and made again only when they or this script
# change. Without an mpiexec.mpich here the bundle has no runtime, and
# says so.
#
# build/ must be built (make build). The bundle is made in a temporary
# folder beside DEST and renamed into place; an older DEST is moved
# aside first and removed after. It must stay under 64 MiB (what the GPU
# machine's tool carries); bundle.sh says its size.
set -eu
dest=${1:?usage: tests/gpu/bundle.sh DEST}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
parent=$(dirname "$dest")
mkdir -p "$parent"
tmp=$(mktemp -d "$parent/.gpu-bundle.XXXXXX")
trap 'rm -rf "$tmp" "$tmp.old" "$tmp.mpich" "$tmp.list" "$tmp.txz"' EXIT
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

# ---- MPICH's runtime (see above) ----
# The C and C++ runtime's libraries, which every Linux has: not carried.
base='^(linux-vdso\.so\.1|libc\.so\.6|libm\.so\.6|libresolv\.so\.2|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|ld-linux-x86-64\.so\.2|libgcc_s\.so\.1|libstdc\+\+\.so\.6|libz\.so\.1)$'
carried="none (no mpiexec.mpich, hydra_pmi_proxy or gpucoll-mpich here)"
if launcher=$(command -v mpiexec.mpich) && [ -x "$tmp/tests/gpucoll-mpich" ]; then
	hydra=$(readlink -f "$launcher")
	proxy=$(dirname "$hydra")/hydra_pmi_proxy
	[ -x "$proxy" ] || proxy=$(command -v hydra_pmi_proxy || true)
fi
if [ -n "${proxy:-}" ] && [ -x "$proxy" ]; then
	# libs: "name path" of every library the programs need but the base.
	libs=$(ldd "$hydra" "$proxy" "$tmp/tests/gpucoll-mpich" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u |
		while read -r name path; do echo "$name" | grep -Eq "$base" || echo "$name $path"; done)
	ucs=$(echo "$libs" | awk '$1 == "libucs.so.0" { print $2 }')
	cma=""
	[ -n "$ucs" ] && [ -f "$(dirname "$ucs")/ucx/libuct_cma.so.0" ] && cma="$(dirname "$ucs")/ucx/libuct_cma.so.0"
	if ldd "$hydra" "$proxy" "$tmp/tests/gpucoll-mpich" ${cma:+"$cma"} | grep -q 'not found'; then
		echo "gpu-bundle: MPICH's programs do not load here (ldd: not found): the bundle has no MPICH runtime" >&2
		carried="none (MPICH does not load where the bundle was built)"
	else
		# The list: what is packed, from where, its size and time, and
		# this script's checksum: the cached archive is used only for
		# the same list.
		{
			for f in "$hydra" "$proxy" ${cma:+"$cma"}; do echo "$(basename "$f") $(stat -L -c '%n %s %Y' "$f")"; done
			echo "$libs" | while read -r name path; do echo "$name $(stat -L -c '%n %s %Y' "$path")"; done
			echo "bundle.sh $(cksum <"$0")"
		} >"$tmp.list"
		if [ -f "$parent/mpich-runtime.tar.xz" ] && cmp -s "$tmp.list" "$parent/mpich-runtime.list"; then
			echo "gpu-bundle: MPICH's runtime: $parent/mpich-runtime.tar.xz (made before from the same files)"
		else
			s=$tmp.mpich/mpich
			mkdir -p "$s/bin" "$s/lib/ucx"
			cp "$hydra" "$s/bin/mpiexec.hydra"
			ln -s mpiexec.hydra "$s/bin/mpiexec.mpich"
			cp "$proxy" "$s/bin/hydra_pmi_proxy"
			echo "$libs" | while read -r name path; do cp -L "$path" "$s/lib/$name"; done
			[ -z "$cma" ] || cp -L "$cma" "$s/lib/ucx/libuct_cma.so.0"
			echo "gpu-bundle: MPICH's runtime, $(du -sh "$s" | cut -f1): tar -cJ mpich-runtime.tar.xz (takes a while; kept in $parent)"
			tar -C "$tmp.mpich" -cf - mpich | xz -6 -T2 >"$tmp.txz"
			mv -f "$tmp.txz" "$parent/mpich-runtime.tar.xz"
			cp "$tmp.list" "$parent/mpich-runtime.list"
		fi
		cp "$parent/mpich-runtime.tar.xz" "$tmp/mpich-runtime.tar.xz"
		carried="mpich-runtime.tar.xz ($(du -h "$tmp/mpich-runtime.tar.xz" | cut -f1)): mpich/bin/mpiexec.hydra (and mpiexec.mpich), hydra_pmi_proxy; mpich/lib/$(echo "$libs" | awk '{ print $1 }' | tr '\n' ' ')${cma:+ucx/libuct_cma.so.0}"
	fi
else
	echo "gpu-bundle: no MPICH launcher (mpiexec.mpich, hydra_pmi_proxy) or gpucoll-mpich here: the bundle carries no MPICH runtime" >&2
fi

commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit with uncommitted changes"
{
	echo "gocoll device check bundle, built $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -n) from commit $commit"
	echo "programs: $built"
	echo "MPICH runtime for the LD_PRELOAD runs: $carried"
	echo "needs there: Linux x86-64, glibc >= $(for f in "$tmp"/bin/gocollrun "$tmp"/lib/*.so "$tmp"/tests/gpucoll*; do
		objdump -T "$f" 2>/dev/null; done | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1), the NVIDIA driver (libcuda.so.1)"
} >"$tmp/BUILD"
chmod -R a+rX "$tmp"

[ -e "$dest" ] && mv -T "$dest" "$tmp.old"
mv -T "$tmp" "$dest"
echo "gpu-bundle: $dest, $(du -sh "$dest" | cut -f1): $dest/run.sh (--help; --self-test without a GPU)"
if [ "$(du -sm "$dest" | cut -f1)" -ge 64 ]; then
	echo "gpu-bundle: WARNING: $dest is 64 MiB or more: the GPU machine's tool carries at most 64 MiB" >&2
fi
