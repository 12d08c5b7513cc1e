#!/bin/sh
# Start-up cost under gocollrun, np = 2..64: bench/startup.c's times and
# each rank's traffic to the launcher (from GOCOLL_DEBUG=info), for one or
# more build folders in turn, interleaved round by round so that they see
# the same machine:
#
#   bench/startup.sh [-r ROUNDS] [-n "2 4 8 16 32 64"] [BUILD ...]
#
# BUILD defaults to build/ of this checkout. Each line: the build, np, the
# slowest and the fastest rank's MPI_Init-to-first-collective time, and
# rank 0's round trips to the launcher.
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
[ $# -gt 0 ] || set -- build
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
i=0
for b in "$@"; do
	i=$((i + 1))
	"$b/bin/mpicc" -O2 -o "$tmp/startup$i" bench/startup.c
done
printf '%-24s %4s %10s %10s  %s\n' build np max_ms min_ms "rank 0's launcher traffic"
for r in $(seq "$rounds"); do
	for np in $nps; do
		i=0
		for b in "$@"; do
			i=$((i + 1))
			GOCOLL_DEBUG=info GOCOLL_STARTUP_TRAFFIC=1 "$b/bin/gocollrun" -n "$np" --timeout 300s "$tmp/startup$i" >"$tmp/out" 2>&1 || {
				cat "$tmp/out" >&2
				exit 1
			}
			t=$(sed -n 's/^startup np=[0-9]* .*first_collective_ms max=\([0-9.]*\) min=\([0-9.]*\) PASS$/\1 \2/p' "$tmp/out")
			[ -n "$t" ] || { cat "$tmp/out" >&2; exit 1; }
			tr=$(grep -m1 'gocoll: rank 0.* start-up.* round trips' "$tmp/out" | sed 's/.*: \([0-9]* round trips\)/\1/')
			printf '%-24s %4s %10s %10s  %s\n' "$b" "$np" $t "$tr"
		done
	done
done
