#!/bin/sh
# abcoll.sh: gocoll against gocoll, as users measure (bench/collbench.c
# under gocollrun, a barrier before every call), this tree's library
# against another build's, interleaved round by round (A B B A ...), the
# lowest time per size of each and their ratio. For a change's before and
# after on a machine whose speed moves minute by minute; gocoll-compare
# takes the ratios against Open MPI and MPICH.
#
#   bench/abcoll.sh [-r ROUNDS] [-np N] [-ea VAR=VALUE]... [-e VAR=VALUE]... REF_LIB_DIR [collbench flags]
#
# REF_LIB_DIR holds the other libgocoll.so (make lib in a second worktree
# at the commit to compare with: git worktree add --detach DIR REV; cd DIR;
# make lib; then DIR/build/lib). The same collbench binary runs both: the
# library comes from LD_LIBRARY_PATH, which a RUNPATH yields to.
# -ea sets a variable for A only, -e for B only (e.g. GOCOLL_SHM_CMA=0
# with REF_LIB_DIR this tree's build/lib, to compare two settings). Example:
#
#   bench/abcoll.sh -r 7 ../ref/build/lib -c allreduce -m 1024:8192
set -e
cd "$(dirname "$0")/.."
rounds=5 np=2 enva="" envb=""
while :; do
    case "$1" in
    -r) rounds=$2; shift 2 ;;
    -np) np=$2; shift 2 ;;
    -e) envb="$envb $2"; shift 2 ;;
    -ea) enva="$enva $2"; shift 2 ;;
    *) break ;;
    esac
done
ref=$(cd "$1" && pwd)
shift
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
build/bin/mpicc -O2 -o "$dir/collbench" bench/collbench.c
echo "# uptime: $(uptime)"
echo "# A: $(pwd)/build/lib$enva; B: $ref$envb; np=$np; $rounds rounds, A B B A ...; collbench $*"
i=1
while [ $i -le $rounds ]; do
    for x in A B; do
        if [ $((i % 2)) = 0 ]; then x=$(echo $x | tr AB BA); fi
        if [ $x = A ]; then
            env LD_LIBRARY_PATH="$(pwd)/build/lib" $enva build/bin/gocollrun -n "$np" "$dir/collbench" "$@"
        else
            env LD_LIBRARY_PATH="$ref" $envb build/bin/gocollrun -n "$np" "$dir/collbench" "$@"
        fi | grep -v '^#' | sed "s/^/$x /" | tee -a "$dir/runs.txt"
    done
    i=$((i + 1))
done
echo "# per size: the lowest average over ranks of the rounds (us), A over B"
awk '$4 ~ /^[0-9.]+$/ { k = $2 " " $3; if (!(k in seen)) { seen[k] = 1; order[n++] = k }
         if (!((k, $1) in m) || $4 < m[k, $1]) m[k, $1] = $4 }
     END { printf "%-32s %9s %9s %7s\n", "collective bytes", "A_us", "B_us", "A/B"
           for (i = 0; i < n; i++) { k = order[i]; printf "%-32s %9.2f %9.2f %7.2f\n", k, m[k, "A"], m[k, "B"], m[k, "A"] / m[k, "B"] } }' "$dir/runs.txt"
echo "# uptime: $(uptime)"
