#!/bin/sh
# hostcompare.sh: gocoll against Open MPI and MPICH on the cells of issue
# 29 (host collectives at memory speed), as users measure (collbench: a
# barrier before every call, MPI_FLOAT reductions sized by the vector,
# MPI_CHAR allgather by what each rank sends), configurations interleaved
# round by round, the lowest time of each (gocoll-compare), the load
# beside every table. Run on an idle machine after make build:
#
#   bench/hostcompare.sh [-reps N] [-o DIR]
#
# np=2: every size of the three collectives, 4 B to 4 MiB (the targets:
# gocoll/best-host at most 1.0 everywhere, at most 0.8 for allreduce and
# reduce_scatter from 64 KiB to 4 MiB); np=4 (oversubscribed, against
# Open MPI alone: MPICH busy-polls) where issue 29 found gocoll behind.
# Tables and CSVs go to DIR (default build/hostcompare).
set -e
cd "$(dirname "$0")/.."
reps=7 out=build/hostcompare
while :; do
    case "$1" in
    -reps) reps=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    *) break ;;
    esac
done
mkdir -p "$out"
B=build/bin
run() { # name, gocoll-compare flags
    name=$1
    shift
    {
        echo "# $(date -u +%FT%TZ) uptime before: $(uptime)"
        echo "# $B/gocoll-compare $*"
        $B/gocoll-compare "$@" -csv "$out/$name.csv" 2>/dev/null
        echo "# uptime after: $(uptime)"
    } | tee "$out/$name.txt"
}
run np2 -np 2 -c allreduce,reduce_scatter,allgather -m 4:4194304 -reps "$reps"
run np4 -np 4 -mpi openmpi -c allreduce,reduce_scatter,allgather -m 4:1048576 -reps "$reps"
