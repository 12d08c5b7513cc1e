#!/bin/bash
# tests/gpu/without-mpi.sh COMMAND...: runs COMMAND as on a machine with
# no MPI installed, the GPU machine's case: in a private mount namespace
# (unshare -m, as root), overlayfs whiteouts take out of /usr/bin the MPI
# launchers and compilers (mpiexec*, mpirun*, hydra_*, mpicc*, ...) and
# out of /usr/lib/x86_64-linux-gnu Open MPI's and MPICH's libraries and
# what MPICH needs that the bundle carries (hwloc, Slurm, UCX and its
# modules, numa, udev). Exit status 3, before anything runs, when the
# namespace or the overlays cannot be made here. Used by
# tests/gpu/script_test.go (TestWithoutMPI) on the bundle's self-test.
set -eu
if [ "${1:-}" != --inside ]; then
	if ! unshare -m true 2>/dev/null; then
		echo "without-mpi.sh: cannot make a mount namespace here (unshare -m: root is needed)" >&2
		exit 3
	fi
	exec unshare -m "$0" --inside "$@"
fi
shift
fail() { echo "without-mpi.sh: $*" >&2; exit 3; }
mount --make-rprivate / || fail "cannot make the mounts private"
ov=$(mktemp -d /tmp/without-mpi.XXXXXX) || fail "no temporary folder"
# The mounts end with the namespace; the folder is on /tmp for good.
trap 'umount -l /usr/lib/x86_64-linux-gnu /usr/bin 2>/dev/null; umount -l "$ov" 2>/dev/null; rmdir "$ov"' EXIT
mount -t tmpfs none "$ov" || fail "cannot mount a tmpfs"
# hide DIR PATTERN: an overlay on DIR without the names PATTERN matches.
hide() {
	local d=$1 key n
	key=$(echo "$d" | tr / _)
	mkdir -p "$ov/$key/up" "$ov/$key/work"
	for n in $(find "$d" -mindepth 1 -maxdepth 1 -printf '%f\n' | grep -E "$2"); do
		mknod "$ov/$key/up/$n" c 0 0
	done
	mount -t overlay overlay -o "lowerdir=$d,upperdir=$ov/$key/up,workdir=$ov/$key/work" "$d" || fail "no overlayfs here"
}
hide /usr/bin '^(mpiexec|mpirun|orterun|hydra_|mpicc|mpicxx|mpic\+\+|mpif|mpifort|ompi_)'
hide /usr/lib/x86_64-linux-gnu '^(libmpich|libmpi|libopen-|libmca_|libhwloc|libslurm|libucp|libucs|libuct|libucm|libnuma|libudev)|^(ucx|hwloc|openmpi|mpich)$'
for p in mpiexec.mpich mpiexec mpirun mpirun.openmpi hydra_pmi_proxy; do
	if command -v "$p" >/dev/null; then fail "$p is still here"; fi
done
if ldconfig -p | awk '/libmpich\.so\.12 /{ print $NF }' | xargs -r ls >/dev/null 2>&1; then fail "libmpich.so.12 is still here"; fi
echo "without-mpi.sh: no MPI launcher, libmpich, hwloc, Slurm, UCX, numa or udev library here now"
"$@"
