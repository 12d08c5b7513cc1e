#!/bin/sh
# The main job (make demo): builds the examples with gocoll's compiler
# wrappers, runs each under gocollrun on 4 ranks with GOCOLL_DEBUG=info
# (one line per collective call: which algorithm ran and why), then times
# every algorithm of every collective with bench/collbench.c and prints a
# table of microseconds per call.
set -e
cd "$(dirname "$0")/.."
B=build/bin
OUT=build/examples
NP=${NP:-4}
mkdir -p $OUT
for c in allreduce reduce_scatter allgather; do
    $B/mpicc -O2 -o $OUT/$c examples/c/$c.c
done
$B/mpif90 -w -o $OUT/fallreduce examples/fortran/allreduce.f90
$B/mpicc -O2 -o $OUT/collbench bench/collbench.c

for prog in allreduce reduce_scatter allgather fallreduce; do
    echo "== gocollrun -n $NP $OUT/$prog   (GOCOLL_DEBUG=info)"
    # One line per distinct call (every rank prints its own), and each
    # rank's PASS or FAIL; a rank's failure is gocollrun's exit status.
    GOCOLL_DEBUG=info $B/gocollrun -n $NP $OUT/$prog >$OUT/$prog.log 2>&1 ||
        { cat $OUT/$prog.log; echo "demo: $prog failed" >&2; exit 1; }
    grep -v "transports map" $OUT/$prog.log | sed 's/^gocoll: rank [0-9]*:/  gocoll, each rank:/' | sort -u
done

echo
# collbench's pattern (its `#` lines say it): a barrier before every
# call; MPI_FLOAT sums, sized by the whole vector; MPI_Allgather of
# MPI_CHAR, sized by what each rank sends. 64 B is the smallest size every
# collective runs at up to 16 ranks (MPI_Reduce_scatter_block needs a
# float per rank).
echo "== time per call on $NP ranks (µs, average over ranks; collbench: MPI_FLOAT sums of the whole vector, MPI_Allgather of MPI_CHAR per rank)"
printf "%-26s %-20s %10s %10s %10s\n" collective algorithm "64 B" "64 KiB" "1 MiB"
for coll in allreduce reduce_scatter_block allgather; do
    var=GOCOLL_$(echo $coll | tr a-z A-Z)_ALGORITHM
    # "force MPI_X's algorithm: auto, a, b, c; on CUDA memory also d; under LD_PRELOAD ...":
    # the host algorithms, up to the first semicolon
    algs=$($B/gocollrun --info | awk -v v="$var" '$1 == v { sub(/;.*/, ""); sub(/.*algorithm: auto, /, ""); gsub(/,/, ""); print }')
    [ -n "$algs" ] || { echo "demo: no algorithms listed for $var by gocollrun --info" >&2; exit 1; }
    for alg in auto $algs; do
        line=""
        for size in 64 65536 1048576; do
            t=$(env $var=$alg $B/gocollrun -n $NP $OUT/collbench -c $coll -m $size -i 50 -il 20 -w 10 -wl 2 | awk '!/^#/ {print $3}')
            [ -n "$t" ] || { echo "demo: collbench failed: $var=$alg, $size bytes" >&2; exit 1; }
            line="$line $(printf '%10s' "$t")"
        done
        name=$(echo $coll | sed 's/^./\U&/')
        printf "%-26s %-20s%s\n" "MPI_$name" "$alg" "$line"
    done
done
