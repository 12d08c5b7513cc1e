#!/bin/sh
# Re-measures everything the README's performance section reports, on this
# machine (run it when the machine is otherwise idle; about 30 minutes):
#   1. reduction kernels next to memmove (Go benchmarks)
#   2. gocoll against Open MPI and MPICH, one benchmark program built three
#      ways, at 2, 4 and 8 ranks: docs/compare-*.txt and docs/compare-np*.svg
#   3. gocoll's own sweep with every algorithm at 2 ranks: docs/sweep-*.svg
#   4. gocoll-tune at 2, 4 and 8 ranks: docs/tune-np*.txt and .json, from
#      which tuner/defaults.go's measured rules are taken.
set -e
cd "$(dirname "$0")/.."
make -s build
B=build/bin
mkdir -p docs
go test -run XXX -bench 'Kernel|Memmove' -benchtime 200ms ./ops/ > docs/kernels.txt
for np in 2 4 8; do
    $B/gocoll-compare -np $np -reps 3 -iters 100 -plot docs/compare -csv docs/compare-np$np.csv > docs/compare-np$np.txt
done
$B/gocollrun -n 2 $B/gocoll-bench -c allreduce,reduce_scatter_block,allgather -a all -b 8 -e 64M -f 4 -check -plot docs/sweep -csv docs/sweep-np2.csv > docs/sweep-np2.txt
for np in 2 4 8; do
    $B/gocollrun -n $np $B/gocoll-tune -reps 5 -o docs/tune-np$np.json > docs/tune-np$np.txt
done
echo "results in docs/"
