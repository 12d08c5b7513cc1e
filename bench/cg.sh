#!/bin/sh
# cg.sh: bench/cg.f90, an application that makes thousands of small
# MPI_Allreduce calls a second, natively and under the preload, over
# Open MPI (and MPICH with MPI=mpich), interleaved: for each round, for
# each rank count, native then preloaded (then backwards the next
# round). Prints one line per run (the solves' wall time) and the load
# average before each round; run from the repository after make lib.
#
#   bench/cg.sh [ROUNDS [NPS [ARGS...]]]     e.g. bench/cg.sh 3 "2 4"
#
# Environment: MPI (openmpi or mpich), PRELOAD (the library), EXTRA
# (more launcher arguments for the preloaded runs, e.g. "-x GOCOLL_TUNE=off"),
# ROUND0 (added to the round number, which picks the order: runs of one
# round each alternate with ROUND0=0, 1, 0, ...).
set -eu
rounds=${1:-3}
nps=${2:-"2 4"}
shift 2 2>/dev/null || shift $#
args="$*"
mpi=${MPI:-openmpi}
preload=${PRELOAD:-$(pwd)/build/lib/libgocoll-preload.so}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"mpif90.$mpi" -O2 -o "$work/cg" bench/cg.f90
run() { # run NP native|preload
    if [ "$mpi" = openmpi ]; then
        if [ "$2" = native ]; then
            mpirun.openmpi --allow-run-as-root --oversubscribe -np "$1" "$work/cg" $args
        else
            mpirun.openmpi --allow-run-as-root --oversubscribe -np "$1" -x LD_PRELOAD="$preload" ${EXTRA:-} "$work/cg" $args
        fi
    else
        if [ "$2" = native ]; then
            mpiexec.mpich -n "$1" "$work/cg" $args
        else
            mpiexec.mpich -n "$1" -genv LD_PRELOAD "$preload" ${EXTRA:-} "$work/cg" $args
        fi
    fi
}
for r in $(seq "$rounds"); do
    echo "# round $r: $(uptime)"
    order="native preload"
    [ $(((r + ${ROUND0:-0}) % 2)) -eq 0 ] && order="preload native"
    for np in $nps; do
        for how in $order; do
            line=$(run "$np" "$how" | grep 'cg: np=')
            echo "$mpi $how $line"
        done
    done
done
