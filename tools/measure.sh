#!/bin/sh
# Re-measures everything the README's performance section reports, on this
# machine (run it when the machine is otherwise idle; about 40 minutes):
#   1. reduction kernels next to memmove (Go benchmarks): docs/kernels.txt
#   2. gocoll against Open MPI and MPICH, one benchmark program built three
#      ways (and the two host builds again under LD_PRELOAD), at 2, 4 and 8
#      ranks: docs/compare-np*.txt, .csv and docs/compare-np*-*.svg (at 8
#      ranks with fewer iterations: MPICH busy-polls, each call takes ms)
#   3. gocoll's own sweep with every algorithm at 2 ranks: docs/sweep-*
#   4. gocoll-tune at 2, 4 and 8 ranks: docs/tune-np*.txt and .json, from
#      which tuner/defaults.go's measured rules are taken
#   5. the LD_PRELOAD latency table, host-native against gocoll (auto and
#      every algorithm) over both MPIs: docs/preload-latency.md (add -write
#      to preload/tune's line to regenerate preload/rules.go as well)
set -e
cd "$(dirname "$0")/.."
make -s build
B=build/bin
mkdir -p docs
go test -run XXX -bench 'Kernel|Memmove' -benchtime 200ms ./ops/ > docs/kernels.txt
$B/gocoll-compare -np 2 -reps 3 -iters 100 -plot docs/compare -csv docs/compare-np2.csv > docs/compare-np2.txt
$B/gocoll-compare -np 4 -reps 3 -iters 50 -plot docs/compare -csv docs/compare-np4.csv > docs/compare-np4.txt
$B/gocoll-compare -np 8 -reps 2 -iters 10 -plot docs/compare -csv docs/compare-np8.csv > docs/compare-np8.txt
$B/gocollrun -n 2 $B/gocoll-bench -c allreduce,reduce_scatter_block,allgather -a all -b 8 -e 64M -f 4 -check -plot docs/sweep -csv docs/sweep-np2.csv > docs/sweep-np2.txt
for np in 2 4 8; do
    $B/gocollrun -n $np $B/gocoll-tune -reps 5 -o docs/tune-np$np.json > docs/tune-np$np.txt
done
go run ./preload/tune -table docs/preload-latency.md > docs/preload-tune.txt
echo "results in docs/"
