#!/bin/sh
# Overlap of nonblocking collectives and the cost of persistent ones:
# bench/overlap.c built with gocoll's mpicc and with Open MPI's and
# MPICH's, run at NP ranks for ROUNDS rounds, the targets interleaved
# within each round (A B C D, then D C B A) so that they see the same
# machine:
#
#   bench/overlap.sh [-r ROUNDS] [-n NP] [-p] [-a "OVERLAP ARGS"] [TARGET ...]
#
# TARGET is BUILD:thread (gocoll from the folder BUILD, under its
# gocollrun, GOCOLL_PROGRESS_THREAD=1), BUILD (the same without a progress
# thread), openmpi (mpirun), mpich (mpiexec) or mpich:async (mpiexec,
# MPIR_CVAR_ASYNC_PROGRESS=1: MPICH's own progress thread). The default is
# build:thread build openmpi mpich. OVERLAP ARGS go to every run (e.g.
# "-c iallgather -m 4096:65536"). -p also runs overlap -p each round.
#
# Tables, per size: each target's overlap % and t_pure (median over the
# rounds, and the range or the minimum), t_pure's ratio to the faster of
# Open MPI and MPICH in the same round (median over rounds), and with -p
# the blocking, persistent and nonblocking times. Each run's whole output
# is kept in $OVERLAP_OUT if set.
set -e
cd "$(dirname "$0")/.."
rounds=3
np=2
persistent=
args=
while getopts r:n:pa: o; do
	case $o in
	r) rounds=$OPTARG ;;
	n) np=$OPTARG ;;
	p) persistent=1 ;;
	a) args=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- build:thread build openmpi mpich
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
targets="$*" # folders without spaces
if [ -n "$OVERLAP_OUT" ]; then
	out=$OVERLAP_OUT
	mkdir -p "$out"
else
	out=$(mktemp -d)
	trap 'rm -rf "$out"' EXIT
fi
i=0
for b in $targets; do
	i=$((i + 1))
	case $b in
	openmpi) mpicc.openmpi -O2 -o "$out/overlap$i" bench/overlap.c -lm ;;
	mpich | mpich:async) mpicc.mpich -O2 -o "$out/overlap$i" bench/overlap.c -lm ;;
	*) "${b%:thread}/bin/mpicc" -O2 -o "$out/overlap$i" bench/overlap.c -lm ;;
	esac
done

cores=$(nproc)
echo "# bench/overlap.sh: np=$np on $cores cores, $rounds rounds, targets: $targets; overlap args: ${args:-(defaults)}"
[ "$np" -lt "$cores" ] || echo "# np=$np on $cores cores: a progress thread per rank (gocoll :thread, mpich:async) oversubscribes them"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

modes=o
[ -z "$persistent" ] || modes="o p"
for r in $(seq "$rounds"); do
	order=$(seq "$(echo "$targets" | wc -w)")
	[ $((r % 2)) = 1 ] || order=$(echo "$order" | sort -rn)
	for i in $order; do
		b=$(echo "$targets" | cut -d' ' -f"$i")
		case $b in
		openmpi) launch="mpirun.openmpi --oversubscribe --mca btl self,vader -np $np" ;;
		mpich) launch="mpiexec.mpich -n $np" ;;
		mpich:async) launch="mpiexec.mpich -n $np -genv MPIR_CVAR_ASYNC_PROGRESS 1" ;;
		*:thread) launch="env GOCOLL_PROGRESS_THREAD=1 ${b%:thread}/bin/gocollrun -n $np --timeout 600s" ;;
		*) launch="env -u GOCOLL_PROGRESS_THREAD $b/bin/gocollrun -n $np --timeout 600s" ;;
		esac
		for m in $modes; do
			flag=
			[ "$m" = o ] || flag=-p
			f="$out/$i.$m.r$r"
			# shellcheck disable=SC2086 # launch and args are word lists
			$launch "$out/overlap$i" $flag $args >"$f" 2>&1 || {
				echo "$b round $r failed:" >&2
				cat "$f" >&2
				exit 1
			}
			# A run with wrong results still prints its times: the tables
			# mark them (MPICH 4.0's persistent MPI_Allgather is wrong from
			# the second MPI_Start on).
			grep -q '^check: PASS$' "$f" || grep '^overlap: ' "$f" | sed "s|^|# $b round $r: |"
		done
	done
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" "$rounds" "$persistent" $targets <<'PY'
import sys, statistics as st
out, rounds, persistent, targets = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
R = range(1, rounds + 1)
T = range(1, len(targets) + 1)

wrong = set()  # (target, mode) with a run whose check failed

def read(i, mode, r):
    rows = {}
    if "check: PASS\n" not in open(f"{out}/{i}.{mode}.r{r}").readlines():
        wrong.add((i, mode))
    for line in open(f"{out}/{i}.{mode}.r{r}"):
        w = line.split()
        if not line.startswith("#") and len(w) == 7:
            rows[int(w[0])] = [float(x) for x in w[1:]]
    return rows

def table(rows):
    # columns right-aligned, each as wide as its widest cell
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.rjust(w) for cell, w in zip(row, widths)))

def col(runs, i, b, k):
    return [runs[(i, r)][b][k] for r in R if b in runs[(i, r)]]

o = {(i, r): read(i, "o", r) for i in T for r in R}
sizes = sorted({b for rows in o.values() for b in rows})
hosts = [i for i, t in enumerate(targets, 1) if t in ("openmpi", "mpich")]

print(f"\n# overlap %: median over {rounds} rounds [min..max]")
rows = [["bytes"] + targets]
for b in sizes:
    row = [str(b)]
    for i in T:
        v = col(o, i, b, 3)
        row.append((f"{st.median(v):.0f} [{min(v):.0f}..{max(v):.0f}]" if v else "-") + (" !" if (i, "o") in wrong else ""))
    rows.append(row)
table(rows)

print(f"\n# t_pure us: median over {rounds} rounds (min)" +
      ("; xR: median over rounds of t_pure / the faster host's (Open MPI, MPICH) in the same round" if hosts else ""))
rows = [["bytes"] + targets]
for b in sizes:
    row = [str(b)]
    for i in T:
        v = col(o, i, b, 0)
        cell = f"{st.median(v):.1f} ({min(v):.1f})" if v else "-"
        ratios = [o[(i, r)][b][0] / min(o[(h, r)][b][0] for h in hosts)
                  for r in R if hosts and all(b in o[(j, r)] for j in hosts + [i])]
        if ratios:
            cell += f" x{st.median(ratios):.2f}"
        row.append(cell + (" !" if (i, "o") in wrong else ""))
    rows.append(row)
table(rows)

if persistent:
    p = {(i, r): read(i, "p", r) for i in T for r in R}
    print(f"\n# persistent: median over {rounds} rounds of the blocking call, the persistent one (MPI_Start, MPI_Wait) and "
          "the nonblocking one (I*, MPI_Wait) in us, of each round's persistent/blocking ratio, and the init call's us")
    rows = [["bytes", "target", "blocking", "persistent", "nonblocking", "pers/block", "init"]]
    for b in sorted({b for rows_ in p.values() for b in rows_}):
        for i, t in enumerate(targets, 1):
            v = [col(p, i, b, k) for k in range(5)]
            if v[0]:
                rows.append([str(b), t + (" !" if (i, "p") in wrong else "")] +
                            [f"{st.median(x):.{3 if k == 3 else 1}f}" for k, x in enumerate(v)])
    table(rows)
if wrong:
    print("\n! some round of this target gave wrong results (overlap's check: FAIL; see the lines above)")
PY
