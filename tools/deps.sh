#!/bin/sh
# Installs what gocoll's build and tests need, when it is missing: gfortran
# (the Fortran module and examples), Open MPI and MPICH (the preload library
# and the comparison benchmarks), iproute2 (emulated hosts in tests),
# pkg-config, cmake, man-db and environment-modules (the install test),
# dpkg-dev (make deb).
# Debian packages; needs root (or sudo).
set -e
missing=""
need() { command -v "$1" >/dev/null 2>&1 || missing="$missing $2"; }
need gfortran gfortran
need mpicc.openmpi "openmpi-bin libopenmpi-dev"
need mpicc.mpich "mpich libmpich-dev"
need ip iproute2
need pkg-config pkg-config # tests/install_test.go: the installed .pc files
need cmake cmake           # tests/install_test.go: find_package(gocoll)
need man man-db            # tests/install_layout_test.go: the installed man pages render
need dpkg-shlibdeps dpkg-dev # make deb (tools/deb.sh): the package's Depends
need modulecmd environment-modules # tests/install_layout_test.go: module load gocoll
[ -z "$missing" ] && exit 0
echo "gocoll: installing$missing" >&2
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq $missing >/dev/null
