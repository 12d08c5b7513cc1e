#!/bin/sh
# Builds bench/engineprof.c with the engine's C half (intranode/engine/*.c,
# instrumented with -DGOCOLL_ENGINE_PROFILE) and runs it:
#
#   bench/engineprof.sh [engineprof flags]          time per call and per stage
#   bench/engineprof.sh -ab REV [-r N] [flags]      this tree against revision REV's
#                                                   engine, N rounds interleaved
#   bench/engineprof.sh -callgrind [flags]          instructions per call
#
# -ab builds the same harness with REV's engine (a commit that has the
# profile hooks), runs both in turn (this tree, REV, REV, this tree, ...;
# default 5 rounds), prints every run and then, per size, the lowest
# median of each and their ratio (this tree over REV): on a machine whose
# speed changes from minute to minute, only interleaved runs compare.
#
# -callgrind runs it under valgrind --tool=callgrind (fewer calls) and
# prints, per rank, the instructions of the engine's functions and of
# libc's copies per call: those count exactly whatever the load; the
# waits count polls, which depend on the peers. Examples:
#
#   bench/engineprof.sh -c allreduce -m 1024:8192 -i 5000
#   bench/engineprof.sh -ab main -r 9 -c allreduce -m 1024:8192
#   bench/engineprof.sh -p 4 -c allreduce -m 4:64
#   bench/engineprof.sh -callgrind -c allreduce -m 4096
set -e
cd "$(dirname "$0")/.."
mkdir -p build/bin
CC=${CC:-gcc}
build() { # build OUT ENGINE_DIR
    $CC -O2 -g -DGOCOLL_ENGINE_PROFILE -I"$2" -o "$1.$$" bench/engineprof.c "$2"/*.c ${ENGINE_CFLAGS:-}
    mv -f "$1.$$" "$1"
}
out=build/bin/engineprof
build $out intranode/engine

case "$1" in
-callgrind)
    shift
    dir=$(mktemp -d)
    valgrind -q --tool=callgrind --trace-children=yes --callgrind-out-file="$dir/cg.%p" $out -i 200 -w 20 -noref "$@" >"$dir/out.txt"
    cat "$dir/out.txt"
    echo "# callgrind: instructions per call of the engine's functions and libc's copies (220 calls of one size,"
    echo "# each after a barrier: give -m one size); the waits count polls, which depend on the peers"
    for f in "$dir"/cg.*; do
        echo "# $(basename "$f")"
        callgrind_annotate --inclusive=no "$f" 2>/dev/null |
            awk '/file:function/ { on = 1; next } on && /^ *$/ { exit } on && /^ *[0-9,]+ / { print }' |
            grep -E 'engine\.c|kernels|mem(cpy|move|set)' |
            awk '{ n = $1; gsub(",", "", n); f = ""; for (i = 2; i <= NF; i++) if ($i ~ /:/) { f = $i; break }
                   sub(".*/", "", f); printf "%12.0f  %s\n", n / 220, f }'
    done
    rm -rf "$dir"
    ;;
-ab)
    rev=$2
    shift 2
    rounds=5
    if [ "$1" = -r ]; then
        rounds=$2
        shift 2
    fi
    dir=$(mktemp -d)
    git archive "$rev" intranode/engine | tar -x -C "$dir"
    build build/bin/engineprof.ref "$dir/intranode/engine"
    echo "# uptime: $(uptime)"
    echo "# A: this tree; B: $rev ($(git rev-parse --short "$rev")); $rounds rounds, A B B A ..."
    i=1
    while [ $i -le $rounds ]; do
        for x in A B; do
            if [ $((i % 2)) = 0 ]; then x=$(echo $x | tr AB BA); fi
            bin=$out
            [ $x = B ] && bin=build/bin/engineprof.ref
            $bin "$@" | sed "s/^/$x /" | tee -a "$dir/runs.txt"
        done
        i=$((i + 1))
    done
    echo "# per size: the lowest median over the rounds (ns), A over B"
    awk '$2 !~ /^#/ && $4 ~ /^[0-9.]+$/ { k = $2 " " $3; if (!(k in seen)) { seen[k] = 1; order[n++] = k }
             if (!((k, $1) in m) || $4 < m[k, $1]) m[k, $1] = $4 }
         END { printf "%-32s %9s %9s %7s\n", "collective bytes", "A_ns", "B_ns", "A/B"
               for (i = 0; i < n; i++) { k = order[i]
                   if (!((k, "A") in m) || !((k, "B") in m)) { printf "%-32s %9s %9s %7s\n", k, ((k, "A") in m) ? m[k, "A"] : "declined", ((k, "B") in m) ? m[k, "B"] : "declined", "-"; continue }
                   printf "%-32s %9.0f %9.0f %7.2f\n", k, m[k, "A"], m[k, "B"], m[k, "A"] / m[k, "B"] } }' "$dir/runs.txt"
    echo "# uptime: $(uptime)"
    rm -rf "$dir"
    ;;
*)
    echo "# uptime: $(uptime)"
    exec $out "$@"
    ;;
esac
