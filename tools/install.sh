#!/bin/sh
# tools/install.sh install|uninstall (make install / make uninstall):
# gocoll's built files (make build) into DESTDIR/PREFIX, laid out as the
# wrappers and gocollrun expect (they find everything from where they
# are, so the tree can also be moved whole):
#
#   bin/                 gocollrun, mpicc, mpicxx, mpif90, gocoll-bench,
#                        gocoll-tune and the other commands
#   lib/                 libgocoll.so, libgocoll-preload.so,
#                        mpich-abi/libmpich.so.12 (-> ../libgocoll.so)
#   lib/pkgconfig/       gocoll.pc (gocoll's own mpi.h and library) and
#                        gocoll-preload.pc (to link ahead of a host MPI)
#   lib/cmake/gocoll/    gocollConfig.cmake: find_package(gocoll), the
#                        targets gocoll::mpi and gocoll::preload
#   include/             mpi.h, mpif.h, mpi.f90 and the mpi module
#   share/doc/gocoll/    README.md, the examples
#   share/gocoll/manifest  every file installed, for uninstall
#
# PREFIX defaults to /usr/local. uninstall removes the files the manifest
# lists (and the folders it leaves empty), nothing else.
set -eu
cmd=${1:?usage: tools/install.sh install|uninstall}
prefix=${PREFIX:-/usr/local}
case $prefix in /*) ;; *) echo "install.sh: PREFIX must be an absolute path, not $prefix" >&2; exit 2 ;; esac
root=${DESTDIR:-}$prefix
manifest=$root/share/gocoll/manifest
cd "$(dirname "$0")/.."

if [ "$cmd" = uninstall ]; then
	[ -f "$manifest" ] || { echo "install.sh: no gocoll installed in $root ($manifest is missing)" >&2; exit 1; }
	while read -r f; do rm -f "$root/$f"; done <"$manifest"
	rm -f "$manifest"
	# The folders the install made, deepest first, where now empty.
	for d in lib/cmake/gocoll lib/cmake share/gocoll share/doc/gocoll/examples share/doc/gocoll lib/pkgconfig lib/mpich-abi include bin lib share/doc share; do
		rmdir "$root/$d" 2>/dev/null || true
	done
	echo "gocoll removed from $root"
	exit 0
fi
[ "$cmd" = install ] || { echo "install.sh: unknown command $cmd (install, uninstall)" >&2; exit 2; }
for f in build/bin/gocollrun build/bin/mpicc build/lib/libgocoll.so build/lib/libgocoll-preload.so build/include/mpi.mod; do
	[ -e "$f" ] || { echo "install.sh: $f is missing: run make build first" >&2; exit 1; }
done
version=$(cat VERSION) # the one place the version is written (pkg-config, CMake, the .deb, sonames)
mkdir -p "$root/bin" "$root/lib/mpich-abi" "$root/lib/pkgconfig" "$root/lib/cmake/gocoll" "$root/include" \
	"$root/share/doc/gocoll/examples" "$root/share/gocoll"
list=$(mktemp)
trap 'rm -f "$list"' EXIT
put() { # put SRC DEST-relative-to-root MODE
	install -m "$3" "$1" "$root/$2.tmp.$$" && mv -f "$root/$2.tmp.$$" "$root/$2"
	echo "$2" >>"$list"
}
for f in build/bin/*; do put "$f" "bin/$(basename "$f")" 755; done
put build/lib/libgocoll.so lib/libgocoll.so 755
put build/lib/libgocoll-preload.so lib/libgocoll-preload.so 755
ln -sfn ../libgocoll.so "$root/lib/mpich-abi/libmpich.so.12"
echo lib/mpich-abi/libmpich.so.12 >>"$list"
for f in include/mpi.h include/mpif.h include/mpi.f90 build/include/mpi.mod; do put "$f" "include/$(basename "$f")" 644; done
put tools/cmake/gocollConfig.cmake lib/cmake/gocoll/gocollConfig.cmake 644
put README.md share/doc/gocoll/README.md 644
for f in examples/c/*.c; do put "$f" "share/doc/gocoll/examples/$(basename "$f")" 644; done
pc() { # pc NAME DESCRIPTION CFLAGS LIBS
	tmp=$(mktemp)
	cat >"$tmp" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: $1
Description: $2
Version: $version
Cflags: $3
Libs: -L\${libdir} -Wl,-rpath,\${libdir} $4
PC
	put "$tmp" "lib/pkgconfig/$1.pc" 644
	rm -f "$tmp"
}
pc gocoll "gocoll's MPI collectives, with its own mpi.h (standalone)" '-I${includedir}' -lgocoll
# No Cflags: the program compiles against its host MPI's mpi.h. Kept
# under --as-needed (Debian's and Ubuntu's default), wherever it stands and
# whatever names the program calls (MPICH's mpi_f08 calls none of gocoll's):
# dropped, it would be silently absent; kept, it runs or says why not.
pc gocoll-preload "gocoll's collectives linked ahead of Open MPI or MPICH" '' '-Wl,--push-state,--no-as-needed -lgocoll-preload -Wl,--pop-state'
echo share/gocoll/manifest >>"$list"
sort -u "$list" >"$manifest"
echo "gocoll installed in $root ($(wc -l <"$manifest") files): $prefix/bin/mpicc, $prefix/bin/gocollrun, pkg-config gocoll"
