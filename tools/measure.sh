#!/bin/sh
# Re-measures everything docs/performance.md reports, on this
# machine (run it when the machine is otherwise idle; about 40 minutes):
#   1. reduction kernels next to memmove (Go benchmarks): results/kernels.txt
#   2. gocoll against Open MPI and MPICH, one benchmark program built three
#      ways (and the two host builds again under LD_PRELOAD), at 2 ranks,
#      and against Open MPI alone at 4 and 8 (oversubscribed MPICH
#      busy-polls: one np=4 allreduce sweep took 10 minutes):
#      results/compare-np*.txt, .csv and results/compare-np*-*.svg
#   3. gocoll's own sweep with every algorithm at 2 ranks: results/sweep-*
#   4. gocoll-tune at 2, 4 and 8 ranks: results/tune-np*.txt and .json, from
#      which tuner/defaults.go's measured rules are taken
#   5. the LD_PRELOAD latency table, host-native against gocoll (auto and
#      every algorithm), Open MPI at 2 and 4 ranks, MPICH at 2:
#      results/preload-latency.md and the measurements, results/preload-tune.json
#      (`go run ./preload/tune -load results/preload-tune.json -write` derives
#      preload/rules.go from them; add -write here to do it at once)
# Every file is headed by the command that wrote it, the commit (git
# describe --always --dirty: commit the code first, so that it names what
# was measured) and the machine (internal/provenance); results/README.md
# lists them.
set -e
cd "$(dirname "$0")/.."
make -s build
B=build/bin
mkdir -p results
go run ./internal/provenance/headed go test -run XXX -bench 'Kernel|Memmove' -benchtime 200ms ./ops/ > results/kernels.txt
$B/gocoll-compare -np 2 -reps 3 -plot results/compare -csv results/compare-np2.csv > results/compare-np2.txt
$B/gocoll-compare -np 4 -mpi openmpi -reps 3 -plot results/compare -csv results/compare-np4.csv > results/compare-np4.txt
$B/gocoll-compare -np 8 -mpi openmpi -reps 3 -plot results/compare -csv results/compare-np8.csv > results/compare-np8.txt
$B/gocollrun -n 2 $B/gocoll-bench -c allreduce,reduce_scatter_block,allgather -a all -b 8 -e 64M -f 4 -check -plot results/sweep -csv results/sweep-np2.csv > results/sweep-np2.txt
for np in 2 4 8; do
    $B/gocollrun -n $np $B/gocoll-tune -reps 5 -o results/tune-np$np.json > results/tune-np$np.txt
done
go run ./preload/tune -np 2,4 -np-of mpich=2 -save results/preload-tune.json -table results/preload-latency.md > /dev/null 2> results/preload-tune.txt
echo "results in results/ (see results/README.md)"
