#!/bin/sh
# rank.sh DIR PROG [ARGS...]: one rank of a preload test job. Runs PROG
# with its standard error in DIR/rank-N, N its world rank (so that
# GOCOLL_DEBUG lines are counted per rank, never cut by the launcher's
# output forwarding), and, if PRELOAD_TEST_HOSTS=k is set, with
# GOCOLL_HOST naming one of k emulated hosts (rank mod k), so that ranks
# of one machine use both of gocoll's transports; if PRELOAD_TEST_EXCLUDE
# is set, rank 1 alone gets it as GOCOLL_PRELOAD_EXCLUDE (the ranks must
# agree on the route all the same). Runs under LD_PRELOAD
# itself: a shell that never calls MPI must not mind the library.
dir=$1
shift
r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
if [ -n "$PRELOAD_TEST_HOSTS" ]; then
	GOCOLL_HOST=host$((r % PRELOAD_TEST_HOSTS))
	export GOCOLL_HOST
fi
if [ -n "$PRELOAD_TEST_EXCLUDE" ] && [ "$r" = 1 ]; then
	GOCOLL_PRELOAD_EXCLUDE=$PRELOAD_TEST_EXCLUDE
	export GOCOLL_PRELOAD_EXCLUDE
fi
# The file name carries the process id too: no two processes can ever
# share (and truncate) one file.
exec 2>"$dir/rank-$r.$$"
# A first line of the shell's own, which runRanks looks for. Its loss
# (once in ~150 runs) found the cause: the preloaded library's Go runtime,
# starting beside the shell, took a descriptor dash frees to reuse
# (`exec 2>`, `echo >&2`: close(1); dup2(2, 1)) and closed it; internal/loadwait now
# holds the loading until the runtime has started.
echo "rank.sh: rank $r, shell $$" >&2
exec "$@"
