#!/bin/sh
# goprof.sh: the Go half of the shared-memory engine (package intranode)
# profiled on each cell issue 29 found losing (BenchmarkCells: 2 goroutine
# ranks, a barrier before every call), one CPU profile per cell, and the
# functions that took the time: the copies (runtime.memmove), the
# reduction kernels (ops.*), the cross-memory reads (Syscall6 under
# linuxsys.VMRead), and the waits (linuxsys.Pause, SchedYield, futex).
#
#   bench/goprof.sh [-t BENCHTIME] [-o DIR] [CELL_REGEXP]
#
# e.g. bench/goprof.sh 'allreduce/1M'; profiles stay in DIR (default a
# temporary folder, printed) for go tool pprof.
set -e
cd "$(dirname "$0")/.."
t=2s dir=""
while :; do
    case "$1" in
    -t) t=$2; shift 2 ;;
    -o) dir=$2; shift 2 ;;
    *) break ;;
    esac
done
[ -n "$dir" ] || dir=$(mktemp -d)
mkdir -p "$dir"
go test -c -o "$dir/intranode.test" ./intranode
cells=$("$dir/intranode.test" -test.run XXX -test.bench "Cells/${1:-.}" -test.benchtime 1x 2>/dev/null | awk '/^BenchmarkCells/ { sub("-[0-9]+$", "", $1); print $1 }')
echo "# uptime: $(uptime)"
echo "# profiles in $dir"
for c in $cells; do
    name=$(echo "$c" | sed 's|BenchmarkCells/||; s|/|_|g')
    GOMAXPROCS=2 "$dir/intranode.test" -test.run XXX -test.bench "^$(echo "$c" | sed 's|/|$/^|g')\$" -test.benchtime "$t" \
        -test.cpuprofile "$dir/$name.out" | grep '^Benchmark'
    go tool pprof -top -nodecount 8 "$dir/intranode.test" "$dir/$name.out" 2>/dev/null | awk '/^ *flat/ { on = 1; next } on'
done
