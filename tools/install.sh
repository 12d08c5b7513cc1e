#!/bin/sh
# tools/install.sh install|uninstall (make install / make uninstall):
# gocoll's built files (make build) into DESTDIR/PREFIX, laid out as the
# wrappers and gocollrun expect (they find everything from where they
# are, so the tree can also be moved whole):
#
#   bin/                 gocollrun, mpicc.gocoll, mpicxx.gocoll,
#                        mpif90.gocoll (and mpicc, mpicxx, mpif90 linking
#                        to them, but not in /usr), gocoll-bench,
#                        gocoll-tune and the other commands
#   lib/                 libgocoll.so.VERSION, libgocoll-preload.so.VERSION,
#                        their sonames (.so.MAJOR) and .so links,
#                        mpich-abi/libmpich.so.12 (-> ../libgocoll.so.MAJOR)
#   lib/pkgconfig/       gocoll.pc (gocoll's own mpi.h and library) and
#                        gocoll-preload.pc (to link ahead of a host MPI)
#   lib/cmake/gocoll/    gocollConfig.cmake: find_package(gocoll), the
#                        targets gocoll::mpi and gocoll::preload (and
#                        gocollConfigVersion.cmake)
#   include/gocoll/      mpi.h, mpi-ext.h, mpif.h, mpi.f90 and the mpi module
#   share/doc/gocoll/    README.md, docs/ (the pages it links), results/
#                        (the measurements they show), the examples
#   share/man/man1/      a page per command, from its --help (tools/man.sh)
#   share/modulefiles/gocoll/VERSION  for module use / module load gocoll
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
	files=$(cat "$manifest") # which lists itself
	printf '%s\n' "$files" | while read -r f; do rm -f "$root/$f"; done
	# The folders of the files listed, deepest first (sorted in reverse,
	# a subfolder comes before its folder), where now empty.
	printf '%s\n' "$files" | while read -r f; do
		d=${f%/*}
		while [ "$d" != "$f" ]; do
			echo "$d"
			f=$d
			d=${d%/*}
		done
	done | sort -ru | while read -r d; do rmdir "$root/$d" 2>/dev/null || true; done
	echo "gocoll removed from $root"
	exit 0
fi
[ "$cmd" = install ] || { echo "install.sh: unknown command $cmd (install, uninstall)" >&2; exit 2; }
for f in build/bin/gocollrun build/bin/mpicc build/lib/libgocoll.so build/lib/libgocoll-preload.so build/include/mpi.mod; do
	[ -e "$f" ] || { echo "install.sh: $f is missing: run make build first" >&2; exit 1; }
done
version=$(cat VERSION) # the one place the version is written (pkg-config, CMake, the .deb, sonames)
mkdir -p "$root/share/gocoll"
list=$(mktemp)
# The manifest is written however the install ends, with what an earlier
# install listed: uninstall then removes a half-done install, and files
# an older version had.
manifest_out() {
	echo share/gocoll/manifest >>"$list"
	[ -f "$manifest" ] && cat "$manifest" >>"$list"
	sort -u "$list" -o "$list" && cp "$list" "$manifest"
	rm -f "$list"
}
trap manifest_out EXIT
put() { # put SRC DEST-relative-to-root MODE
	mkdir -p "$(dirname "$root/$2")"
	install -m "$3" "$1" "$root/$2.tmp.$$" && mv -f "$root/$2.tmp.$$" "$root/$2"
	echo "$2" >>"$list"
}
write() { # write DEST-relative-to-root: standard input, as a file of mode 644
	tmp=$(mktemp)
	cat >"$tmp" && put "$tmp" "$1" 644
	rm -f "$tmp"
}
link() { # link TARGET NAME-relative-to-root
	mkdir -p "$(dirname "$root/$2")"
	ln -sfn "$1" "$root/$2.tmp.$$" && mv -fT "$root/$2.tmp.$$" "$root/$2"
	echo "$2" >>"$list"
}
# The compiler wrappers are mpicc.gocoll, mpicxx.gocoll and mpif90.gocoll,
# as Debian names each MPI's (mpicc.openmpi, mpicc.mpich), with mpicc,
# mpicxx and mpif90 linking to them, except in /usr: there those names
# are the system's MPI alternatives (update-alternatives), which an
# install must not overwrite.
for f in build/bin/*; do
	n=$(basename "$f")
	case $n in
	mpicc | mpicxx | mpif90)
		put "$f" "bin/$n.gocoll" 755
		[ "$prefix" = /usr ] || link "$n.gocoll" "bin/$n"
		;;
	*) put "$f" "bin/$n" 755 ;;
	esac
done
# Each library as the build made it (Makefile, lib): the file
# libNAME.so.VERSION, its soname libNAME.so.MAJOR and libNAME.so linking
# to it.
for n in libgocoll libgocoll-preload; do
	soname=$(readlink "build/lib/$n.so")
	file=$(readlink "build/lib/$soname")
	put "build/lib/$file" "lib/$file" 755
	link "$file" "lib/$soname"
	link "$soname" "lib/$n.so"
done
link "../$(readlink build/lib/libgocoll.so)" lib/mpich-abi/libmpich.so.12
# include/gocoll/, not include/: gocoll's mpi.h is one MPI's among others
# (Debian's Open MPI and MPICH keep theirs in folders of their own), and
# one in /usr/include would be found by a host MPI program built without
# its MPI's -I.
for f in include/mpi.h include/mpi-ext.h include/mpif.h include/mpi.f90 build/include/mpi.mod; do put "$f" "include/gocoll/$(basename "$f")" 644; done
put tools/cmake/gocollConfig.cmake lib/cmake/gocoll/gocollConfig.cmake 644
# find_package(gocoll 0.1): CMake's SameMajorVersion rule, the soname's.
write lib/cmake/gocoll/gocollConfigVersion.cmake <<CMAKE
set(PACKAGE_VERSION "$version")
set(PACKAGE_VERSION_COMPATIBLE TRUE)
if(PACKAGE_FIND_VERSION)
  if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION OR NOT PACKAGE_FIND_VERSION_MAJOR STREQUAL "${version%%.*}")
    set(PACKAGE_VERSION_COMPATIBLE FALSE)
  elseif(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
CMAKE
put README.md share/doc/gocoll/README.md 644
# The pages the README links, and the measurements they show (results/).
for f in docs/*.md results/*; do put "$f" "share/doc/gocoll/$f" 644; done
# A man page per installed command, made from its --help (tools/man.sh),
# which names the command as it was called (mpicc.gocoll).
for n in $(sed -n 's|^bin/||p' "$list"); do
	page=$("$root/bin/$n" --help | tools/man.sh "$n" "$version") || { echo "install.sh: no man page for $n (its --help)" >&2; exit 1; }
	printf '%s\n' "$page" | write "share/man/man1/$n.1"
done
for f in examples/c/*.c; do put "$f" "share/doc/gocoll/examples/$(basename "$f")" 644; done
# A modulefile (Environment Modules and Lmod read this Tcl form) for a
# module tree: module use PREFIX/share/modulefiles; module load gocoll.
# The prefix is found from the file's own place (links followed), as the
# wrappers find it.
write "share/modulefiles/gocoll/$version" <<MODULE
#%Module1.0
module-whatis "gocoll $version: MPI collectives (MPI_Allreduce, MPI_Reduce_scatter, MPI_Allgather) in Go"
proc ModulesHelp { } {
    puts stderr "gocoll $version: gocollrun, mpicc.gocoll, pkg-config gocoll and gocoll-preload, find_package(gocoll); man gocollrun"
}
# A site's tree may link to this file: the prefix is the link's target's.
set f \$ModulesCurrentModulefile
while {[file type \$f] eq "link"} {
    set f [file join [file dirname \$f] [file readlink \$f]]
}
set prefix [file normalize [file join [file dirname \$f] .. .. ..]]
prepend-path PATH \$prefix/bin
# An empty MANPATH element: man-db keeps its default path (a MANPATH of
# gocoll's folder alone would hide every other page).
if {![info exists ::env(MANPATH)] || \$::env(MANPATH) eq {}} {
    append-path MANPATH {}
}
prepend-path MANPATH \$prefix/share/man
prepend-path PKG_CONFIG_PATH \$prefix/lib/pkgconfig
prepend-path CMAKE_PREFIX_PATH \$prefix
MODULE
pc() { # pc NAME DESCRIPTION CFLAGS LIBS
	write "lib/pkgconfig/$1.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: $1
Description: $2
Version: $version
Cflags: $3
Libs: -L\${libdir} -Wl,-rpath,\${libdir} $4
PC
}
pc gocoll "gocoll's MPI collectives, with its own mpi.h (standalone)" '-I${includedir}/gocoll' -lgocoll
# No Cflags: the program compiles against its host MPI's mpi.h. Kept
# under --as-needed (Debian's and Ubuntu's default), wherever it stands and
# whatever names the program calls (MPICH's mpi_f08 calls none of gocoll's):
# dropped, it would be silently absent; kept, it runs or says why not.
pc gocoll-preload "gocoll's collectives linked ahead of Open MPI or MPICH" '' '-Wl,--push-state,--no-as-needed -lgocoll-preload -Wl,--pop-state'
manifest_out
trap - EXIT
echo "gocoll installed in $root ($(wc -l <"$manifest") files): $prefix/bin/mpicc.gocoll, $prefix/bin/gocollrun, pkg-config gocoll"
