#!/bin/sh
# Start-up cost, np = 2..64: bench/startup.c's times and each rank's
# traffic to the launcher (from GOCOLL_DEBUG=info), for one or more gocoll
# build folders under gocollrun, and for Open MPI (mpirun) and MPICH
# (mpiexec) themselves, in turn, interleaved round by round so that they
# see the same machine:
#
#   bench/startup.sh [-r ROUNDS] [-n "2 4 8 16 32 64"] [BUILD[:mpirun|:mpiexec] | openmpi | mpich ...]
#
# BUILD:mpirun runs gocoll under Open MPI's mpirun (PMIx), BUILD:mpiexec
# under MPICH's (hydra, PMI-1). The default is build/ of this checkout
# (under gocollrun, mpirun and mpiexec), then openmpi and mpich. Each
# line: what ran, np, the slowest and the fastest rank's
# MPI_Init-to-first-collective time, and rank 0's round trips to the
# launcher (gocoll only).
set -e
cd "$(dirname "$0")/.."
rounds=3
nps="2 4 8 16 32 64"
while getopts r:n: o; do
	case $o in
	r) rounds=$OPTARG ;;
	n) nps=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- build build:mpirun build:mpiexec openmpi mpich
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
targets="$*" # folders without spaces
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
i=0
for b in $targets; do
	i=$((i + 1))
	case $b in
	openmpi) mpicc.openmpi -O2 -o "$tmp/startup$i" bench/startup.c ;;
	mpich) mpicc.mpich -O2 -o "$tmp/startup$i" bench/startup.c ;;
	*) "${b%:*}/bin/mpicc" -O2 -o "$tmp/startup$i" bench/startup.c ;;
	esac
done
printf '%-24s %4s %10s %10s  %s\n' build np max_ms min_ms "rank 0's launcher traffic"
for r in $(seq "$rounds"); do
	for np in $nps; do
		i=0
		for b in $targets; do
			i=$((i + 1))
			case $b in
			openmpi) launch="mpirun.openmpi --oversubscribe -np $np" ;;
			mpich) launch="mpiexec.mpich -n $np" ;;
			*:mpirun) launch="env GOCOLL_DEBUG=info mpirun.openmpi --oversubscribe -np $np" ;;
			*:mpiexec) launch="env GOCOLL_DEBUG=info mpiexec.mpich -n $np" ;;
			*) launch="env GOCOLL_DEBUG=info GOCOLL_STARTUP_TRAFFIC=1 $b/bin/gocollrun -n $np --timeout 300s" ;;
			esac
			$launch "$tmp/startup$i" >"$tmp/out" 2>&1 || {
				cat "$tmp/out" >&2
				exit 1
			}
			t=$(sed -n 's/^startup np=[0-9]* .*first_collective_ms max=\([0-9.]*\) min=\([0-9.]*\) PASS$/\1 \2/p' "$tmp/out")
			[ -n "$t" ] || { cat "$tmp/out" >&2; exit 1; }
			tr=$(grep -m1 'gocoll: rank 0.* start-up.* round trips' "$tmp/out" | sed 's/.*: \([0-9]* round trips\)/\1/')
			[ -n "$tr" ] || tr=-
			printf '%-24s %4s %10s %10s  %s\n' "$b" "$np" $t "$tr"
		done
	done
done
