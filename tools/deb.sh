#!/bin/sh
# tools/deb.sh [OUT.deb] (make deb): gocoll's built files (make build) as a
# Debian package that installs into /usr, laid out by tools/install.sh
# (the one place the layout is decided: this script stages its install
# and adds only DEBIAN/control). OUT defaults to
# build/gocoll_<version>_<arch>.deb. Needs dpkg-dev (dpkg-shlibdeps);
# no network.
#
# The package depends only on what its ELF files need at run time
# (dpkg-shlibdeps on their NEEDED entries: libc6 today), never on an MPI
# or CUDA: the preload library finds the host MPI already loaded in the
# process, and CUDA and NVML are dlopened when present.
#
# DPKG_DEB_COMPRESSOR_TYPE and _LEVEL (dpkg-deb's own variables) choose
# the compression; xz by default.
set -eu
cd "$(dirname "$0")/.."
umask 022 # the package's folders and files readable by all, whatever the caller's umask
version=$(cat VERSION)
arch=$(dpkg --print-architecture)
out=${1:-build/gocoll_${version}_$arch.deb}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
stage=$tmp/debian/gocoll
mkdir -p "$stage"
chmod 755 "$stage" # the package's ./, which mktemp made 700
DESTDIR=$stage PREFIX=/usr tools/install.sh install >/dev/null

# dpkg-shlibdeps reads debian/control from its working folder: a minimal
# one, in tmp. -S: a library the package itself ships (none is NEEDED
# today) is looked up in the stage first. --warnings=2: not the warnings
# for symbols found in no NEEDED library, which gocollrun's NVML calls
# are by design (go-nvml dlopens libnvidia-ml at run time).
printf 'Source: gocoll\n\nPackage: gocoll\nArchitecture: any\n' >"$tmp/debian/control"
# DEBIAN/ first: dpkg-shlibdeps finds the package's root by it.
mkdir -p "$stage/DEBIAN"
elfs=$(find "$stage/usr" -type f -exec sh -c 'head -c4 "$1" | grep -q "^.ELF"' sh {} \; -print)
[ -n "$elfs" ] || { echo "deb.sh: no ELF files staged" >&2; exit 1; }
# shellcheck disable=SC2086 # the file names have no spaces (install.sh's layout)
depends=$(cd "$tmp" && dpkg-shlibdeps -O --warnings=2 -S"$stage" $elfs | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "deb.sh: dpkg-shlibdeps found no dependencies" >&2; exit 1; }

# As dpkg-gencontrol counts it: KiB per file, rounded up, and 1 for each
# folder and link.
size=$(find "$stage" -mindepth 1 -printf '%y %s\n' | awk '{ k += ($1 == "f") ? int(($2 + 1023) / 1024) : 1 } END { print k }')

# Version: VERSION alone, no +git<hash>: Debian orders versions, and hashes
# do not sort (0.1.0+git9f... would be "newer" than 0.1.0+git1a... whatever
# the commits' order); pkg-config and CMake report the same 0.1.0. A
# snapshot that must upgrade an installed 0.1.0 needs a VERSION change.
#
# Recommends: a C compiler, because the main way in is building programs
# with the installed mpicc (gocoll's mpi.h, -lgocoll); apt installs it by
# default, and --no-install-recommends leaves a runtime-only install (the
# LD_PRELOAD library and gocollrun need none).
# Suggests: g++ (mpicxx); gfortran (mpif90 and the mpi module, which only
# a gfortran with the same module format, '15' from GCC 8 on, can read);
# pkg-config and cmake (the gocoll and gocoll-preload .pc files,
# find_package(gocoll)); an MPI, for linking libgocoll-preload.so ahead
# of it or preloading it into its programs. None is needed to run.
cat >"$stage/DEBIAN/control" <<CONTROL
Package: gocoll
Version: $version
Architecture: $arch
Maintainer: ${DEBFULLNAME:-gocoll maintainers} <${DEBEMAIL:-maintainers@users.noreply.a-seed-efaa9cfa.example}>
Installed-Size: $size
Depends: $depends
Recommends: gcc | c-compiler
Suggests: g++ | c++-compiler, gfortran, pkg-config, cmake, mpi-default-dev
Section: devel
Priority: optional
Description: MPI-compatible collective operations written in Go
 gocoll implements MPI_Allreduce, MPI_Reduce_scatter(_block) and
 MPI_Allgather(v), each with several algorithms (ring, recursive doubling
 and halving, Rabenseifner, Bruck, pairwise exchange); a tuner picks one
 per call.
 .
 Standalone, programs compile against its own mpi.h with the mpicc,
 mpicxx and mpif90 included and run under gocollrun; over an existing
 Open MPI or MPICH, libgocoll-preload.so linked ahead of the MPI library
 (or loaded with LD_PRELOAD) takes over the collectives. pkg-config
 files (gocoll, gocoll-preload) and a CMake package (find_package(gocoll))
 are included.
CONTROL

# The shared libraries in /usr/lib, as Debian ships them: ldconfig runs
# after the install (a trigger, no maintainer script), and a shlibs file
# lets a package built against gocoll depend on it through
# dpkg-shlibdeps. Sonames: the Makefile's (libgocoll.so.MAJOR).
major=${version%%.*}
echo "activate-noawait ldconfig" >"$stage/DEBIAN/triggers"
printf 'libgocoll %s gocoll (>= %s)\nlibgocoll-preload %s gocoll (>= %s)\n' "$major" "$version" "$major" "$version" >"$stage/DEBIAN/shlibs"
chmod 644 "$stage/DEBIAN/triggers" "$stage/DEBIAN/shlibs"

mkdir -p "$(dirname "$out")"
part=$(dirname "$out")/.$(basename "$out").$$.tmp
dpkg-deb --build --root-owner-group "$stage" "$part" >/dev/null || { rm -f "$part"; exit 1; }
mv -f "$part" "$out"
echo "$out: gocoll $version ($arch), Depends: $depends"
