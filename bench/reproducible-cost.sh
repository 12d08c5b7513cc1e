#!/bin/bash
# What reproducible mode costs, measured as users measure: collbench (the
# OSU pattern, bench/collbench.c) built with gocoll's mpicc, run by
# gocollrun with GOCOLL_REPRODUCIBLE=0 and =1 alternating (0 1, then 1 0)
# for ROUNDS rounds; per np, collective and size it prints the median time
# of each mode and the median over rounds of the ratio reproducible/default
# taken within each round (runs seconds apart share this machine's state).
#
#   bench/reproducible-cost.sh OUTDIR "NPS" ROUNDS [collbench args]
#   RUNARGS="--host a:1,b:1,c:1,d:1 --launcher env --bind 127.0.0.1" bench/reproducible-cost.sh ...
#
# RUNARGS go to gocollrun (the second form puts each rank on a host of its
# own: TCP and the schedules instead of the shared-memory engine).
set -e
out=$1; nps=$2; rounds=$3; shift 3
cd "$(dirname "$0")/.."
mkdir -p "$out"
build/bin/mpicc -O2 -o "$out/cb" bench/collbench.c
for np in $nps; do
  for r in $(seq 1 "$rounds"); do
    order="0 1"; [ $((r % 2)) = 0 ] && order="1 0"
    for m in $order; do
      GOCOLL_REPRODUCIBLE=$m build/bin/gocollrun -n "$np" $RUNARGS "$out/cb" "$@" | grep -v '^#' > "$out/np$np.m$m.r$r"
    done
  done
done
python3 - "$out" $nps <<'PY'
import sys, glob, statistics, collections
out = sys.argv[1]
for np in sys.argv[2:]:
    t = collections.defaultdict(dict)
    for f in glob.glob(f"{out}/np{np}.m*.r*"):
        m, r = f.split(".m")[1].split(".")[0], f.split(".r")[-1]
        for line in open(f):
            w = line.split()
            if len(w) >= 3:
                t[(w[0], int(w[1]))][(m, r)] = float(w[2])
    print(f"np={np}: collective bytes default_us reproducible_us ratio")
    for (c, b), d in sorted(t.items()):
        ratio = statistics.median(d[('1', r)] / v for (m, r), v in d.items() if m == '0' and ('1', r) in d)
        t0 = statistics.median(v for (m, _), v in d.items() if m == '0')
        t1 = statistics.median(v for (m, _), v in d.items() if m == '1')
        print(f"np={np} {c:22s} {b:>9d} {t0:9.2f} {t1:9.2f} {ratio:6.2f}")
PY
