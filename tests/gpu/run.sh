#!/bin/bash
# tests/gpu/run.sh: gocoll on CUDA device memory, on a machine with an
# NVIDIA GPU, its driver and the CUDA toolkit (nvcc).
#
# Builds tests/gpu/c/gpucoll.c (cudaMalloc'd buffers, every op and type
# gocoll reduces on the GPU, checked against a host reference; then a
# table of MPI_Allreduce times on device and host buffers, 8 B .. 256 MiB)
# and runs it on 2 and 4 ranks sharing the GPU, under gocollrun (gocoll's
# own mpi.h) and under LD_PRELOAD over the host MPI (Open MPI or MPICH;
# there, NaNs and signed zeros are left out of MPI_MAX/MPI_MIN: the host
# MPI may run a call, and MPI leaves those results open). Each LD_PRELOAD
# run is followed by a second, quick one with GOCOLL_DEBUG=info, which
# also checks that gocoll, not the host MPI, ran every call on device
# memory (the finalize reports' count of device calls; no call handed to
# the host for its device buffer).
# Each rank of a run judges its own checks (`rank R: N passed, N failed`
# and its exit status; no verdict is combined through MPI). Prints every
# run's output, then a summary and the totals, `N passed, N failed`.
# Exit status: 0 all passed, 1 a check failed, 2 something needed is
# missing (said plainly, before anything runs).
set -u

usage() {
	cat <<'EOF'
usage: tests/gpu/run.sh [options]

  --quick           fewer counts and iterations, sizes up to 16 MiB
  --ranks "2 4"     rank counts to run (default "2 4")
  --max-bytes N     largest message of the timing table (default 268435456)
  --mpi NAME        host MPI for the LD_PRELOAD runs: openmpi, mpich, both,
                    or none (default: openmpi if installed, else mpich)
  --no-preload      same as --mpi none
  --timeout SECS    limit for each run (default 65; the whole script stays
                    under 5 minutes with the defaults)
  --self-test       check this script and gocoll's device path without a
                    GPU: a stand-in CUDA driver and runtime (tests/gpu/c)
  --stub-preload    with --self-test, give the LD_PRELOAD runs stand-in
                    device memory too, and check that gocoll ran those
                    calls (by default they get host memory; without
                    --self-test they always get real device memory)
  -h, --help        this text

Needs: an NVIDIA GPU and driver (nvidia-smi, libcuda.so.1), the CUDA
toolkit (nvcc, cuda_runtime_api.h, libcudart; found through nvcc, or
CUDA_HOME), Go and gcc to build gocoll (make build), and for the
LD_PRELOAD runs Open MPI (openmpi-bin libopenmpi-dev) or MPICH.
EOF
}

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
quick=0 ranks="2 4" max_bytes=268435456 mpi=auto per_run=65 self_test=0 stub_preload=0 preload_env="" preload_device=1
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) quick=1 ;;
	--ranks) [ $# -ge 2 ] || { echo "run.sh: --ranks needs a value" >&2; exit 2; }; ranks=$2; shift ;;
	--max-bytes) [ $# -ge 2 ] || { echo "run.sh: --max-bytes needs a value" >&2; exit 2; }; max_bytes=$2; shift ;;
	--mpi) [ $# -ge 2 ] || { echo "run.sh: --mpi needs a value" >&2; exit 2; }; mpi=$2; shift ;;
	--no-preload) mpi=none ;;
	--timeout) [ $# -ge 2 ] || { echo "run.sh: --timeout needs a value" >&2; exit 2; }; per_run=$2; shift ;;
	--self-test) self_test=1 ;;
	--stub-preload) stub_preload=1 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "run.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
case "$max_bytes" in '' | *[!0-9]*) echo "run.sh: --max-bytes wants a number of bytes, not '$max_bytes'" >&2; exit 2 ;; esac
case "$per_run" in '' | *[!0-9]*) echo "run.sh: --timeout wants seconds, not '$per_run'" >&2; exit 2 ;; esac
for n in $ranks; do
	case "$n" in '' | *[!0-9]* | 0 | 1) echo "run.sh: --ranks wants counts of 2 or more, not '$n'" >&2; exit 2 ;; esac
done
case "$mpi" in auto | openmpi | mpich | both | none) ;; *) echo "run.sh: --mpi wants openmpi, mpich, both or none, not '$mpi'" >&2; exit 2 ;; esac
[ "$quick" = 1 ] && [ "$max_bytes" -gt 16777216 ] && max_bytes=16777216
[ "$self_test" = 1 ] && [ "$max_bytes" -gt 65536 ] && max_bytes=65536

# missing says what is missing and stops, with the summary line.
missing() {
	echo "run.sh: cannot run the GPU checks: $*" >&2
	echo "0 passed, 1 failed (setup: $1)"
	exit 2
}

start=$(date +%s)
work=$(mktemp -d /tmp/gocoll-gpu.XXXXXX) || missing "no temporary directory"
trap 'rm -rf "$work"' EXIT

# ---- what the machine must have ----
if [ "$self_test" = 1 ]; then
	echo "run.sh: SELF-TEST: no GPU is used. A stand-in CUDA driver and runtime (tests/gpu/c/stub*.c)"
	echo "run.sh: give gocoll \"device\" memory the CPU cannot touch, reduced by the driver in C; the"
	echo "run.sh: LD_PRELOAD runs use host memory posing as device memory unless --stub-preload."
	cuda_cflags="" cuda_libs="-L$work -lcudart -Wl,-rpath,$work"
	{ gcc -O2 -shared -fPIC -o "$work/libcudart.so" "$ROOT/tests/gpu/c/stubcudart.c" -ldl &&
		gcc -O2 -shared -fPIC -o "$work/libcuda.so.1" "$ROOT/tests/gpu/c/stubcuda.c" -lm; } ||
		missing "gcc cannot build the stand-in CUDA driver and runtime"
	export LD_LIBRARY_PATH="$work${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" # dlopen("libcuda.so.1") finds the stand-in
	export GOCOLL_CUDA=on
	[ "$stub_preload" = 1 ] || preload_env="GPUCOLL_STUB_HOSTMEM=1"
	[ "$stub_preload" = 1 ] || preload_device=0
else
	command -v nvidia-smi >/dev/null 2>&1 ||
		missing "no NVIDIA GPU driver (nvidia-smi not found)"
	gpus=$(nvidia-smi -L 2>&1) || missing "nvidia-smi fails: $gpus"
	echo "$gpus" | grep -q '^GPU ' || missing "no NVIDIA GPU (nvidia-smi -L lists none)"
	{ ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; } || [ -e /usr/lib/x86_64-linux-gnu/libcuda.so.1 ] ||
		[ -e /usr/lib64/libcuda.so.1 ] || missing "no CUDA driver library (libcuda.so.1)"
	nvcc=$(command -v nvcc 2>/dev/null || true)
	[ -z "$nvcc" ] && [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ] && nvcc=$CUDA_HOME/bin/nvcc
	[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
	[ -n "$nvcc" ] || missing "no CUDA toolkit (nvcc not in PATH, \$CUDA_HOME/bin or /usr/local/cuda/bin)"
	cuda=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$nvcc")")")}
	[ -f "$cuda/include/cuda_runtime_api.h" ] || missing "no cuda_runtime_api.h under $cuda/include (set CUDA_HOME)"
	libdir=$cuda/lib64
	[ -e "$libdir/libcudart.so" ] || libdir=$cuda/lib
	[ -e "$libdir/libcudart.so" ] || missing "no libcudart.so under $cuda/lib64 (set CUDA_HOME)"
	cuda_cflags="-DGPUCOLL_CUDA_HEADERS -I$cuda/include"
	cuda_libs="-L$libdir -lcudart -Wl,-rpath,$libdir"
	echo "run.sh: $(echo "$gpus" | head -1); $("$nvcc" --version | tail -1)"
	export GOCOLL_CUDA=on # gocoll must find the driver, or say why not
fi

for f in build/bin/gocollrun build/bin/mpicc build/lib/libgocoll.so build/lib/libgocoll-preload.so; do
	if [ ! -e "$ROOT/$f" ]; then
		echo "run.sh: $f is missing: make build"
		make -s -C "$ROOT" build >"$work/make.log" 2>&1 || { tail -20 "$work/make.log" >&2; missing "make build fails (see above)"; }
		break
	fi
done

# ---- build ----
"$ROOT/build/bin/mpicc" -O2 -std=gnu11 $cuda_cflags -o "$work/gpucoll" "$ROOT/tests/gpu/c/gpucoll.c" $cuda_libs -lm \
	>"$work/cc.log" 2>&1 || { cat "$work/cc.log" >&2; missing "gpucoll.c does not build with gocoll's mpicc"; }

preloads=""
have() { command -v "$1" >/dev/null 2>&1; }
case "$mpi" in
auto) if have mpicc.openmpi && have mpirun.openmpi; then preloads=openmpi; elif have mpicc.mpich && have mpiexec.mpich; then preloads=mpich; fi ;;
both) preloads="openmpi mpich" ;;
none) ;;
*) preloads=$mpi ;;
esac
setup_failures=0 notes=""
built_preloads=""
for m in $preloads; do
	case $m in
	openmpi) cc=mpicc.openmpi run=mpirun.openmpi ;;
	mpich) cc=mpicc.mpich run=mpiexec.mpich ;;
	esac
	if ! have $cc || ! have $run; then
		echo "run.sh: LD_PRELOAD over $m: $cc or $run not found" >&2
		setup_failures=$((setup_failures + 1)) notes="$notes preload-$m:missing"
		continue
	fi
	if ! $cc -O2 -std=gnu11 $cuda_cflags -o "$work/gpucoll-$m" "$ROOT/tests/gpu/c/gpucoll.c" $cuda_libs -lm >"$work/cc-$m.log" 2>&1; then
		cat "$work/cc-$m.log" >&2
		echo "run.sh: gpucoll.c does not build with $cc" >&2
		setup_failures=$((setup_failures + 1)) notes="$notes preload-$m:build"
		continue
	fi
	built_preloads="$built_preloads $m"
done
if [ -z "$preloads" ] && [ "$mpi" != none ]; then
	echo "run.sh: no host MPI for the LD_PRELOAD runs (install openmpi-bin libopenmpi-dev, or pass --no-preload)" >&2
	setup_failures=$((setup_failures + 1)) notes="$notes preload:no-mpi"
fi

args="--max-bytes $max_bytes"
[ "$quick" = 1 ] && args="$args --quick"

# ---- run ----
total_pass=0 total_fail=$setup_failures
summary=""
# rank_counts LOG N: prints the passed and failed checks of the job whose
# output is LOG, summed over its N ranks' own `rank R: N passed, N failed`
# lines (each rank judges itself; no total is made by MPI), and one more
# failure for each rank that printed no such line or more than one.
rank_counts() {
	local log=$1 n=$2 r k p=0 f=0 line
	for ((r = 0; r < n; r++)); do
		k=$(grep -cE "^rank $r: [0-9]+ passed, [0-9]+ failed\$" "$log")
		if [ "$k" -ne 1 ]; then
			echo "run.sh: $(basename "$log" .log): rank $r printed $k verdict lines, want 1" >&2
			f=$((f + 1))
			continue
		fi
		line=$(grep -E "^rank $r: [0-9]+ passed, [0-9]+ failed\$" "$log")
		line=${line#*: }
		p=$((p + ${line%% passed*})) line=${line#*, } f=$((f + ${line%% failed*}))
	done
	echo "$p $f"
}

# runone NAME N COMMAND...: runs one job of N ranks within the time limit
# and adds up its ranks' verdicts (a job that dies or times out counts one
# more failure, as does its non-zero exit status without a failed check).
runone() {
	local name=$1 nranks=$2
	shift 2
	local log="$work/$name.log" elapsed=$(($(date +%s) - start)) limit=$per_run
	echo
	echo "==== $name ===="
	if [ $((elapsed + limit)) -gt 290 ]; then
		limit=$((290 - elapsed))
		if [ "$limit" -lt 10 ]; then
			echo "run.sh: $name: not run, the 5-minute budget is spent"
			total_fail=$((total_fail + 1)) summary="$summary$(printf '\n  %-26s not run (time budget)' "$name")"
			return
		fi
	fi
	local t0=$(date +%s)
	timeout -k 5 "$limit" "$@" >"$log" 2>&1
	local rc=$? secs=$(($(date +%s) - t0))
	cat "$log"
	local p f
	read -r p f < <(rank_counts "$log" "$nranks")
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
		if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
			echo "run.sh: $name: timed out after ${limit}s"
		else
			echo "run.sh: $name: exited with status $rc"
		fi
	fi
	total_pass=$((total_pass + p)) total_fail=$((total_fail + f))
	summary="$summary$(printf '\n  %-26s %5d passed, %3d failed  (%ds, exit %d)' "$name" "$p" "$f" "$secs" "$rc")"
}

# GOCOLL_DEBUG=info's line per call: gocoll's, or the host MPI's.
call_re='^gocoll: rank -?[0-9]+: MPI_[A-Za-z_]+ (comm=|-> host MPI \()'

# launcher M N DEBUG: sets launch to the command that starts N ranks
# under LD_PRELOAD over host MPI M, with GOCOLL_DEBUG=DEBUG; the program
# and its arguments follow.
launcher() {
	case $1 in
	openmpi)
		launch=(env $preload_env GOCOLL_DEBUG="$3" mpirun.openmpi --allow-run-as-root --oversubscribe -np "$2"
			-x LD_PRELOAD="$ROOT/build/lib/libgocoll-preload.so" -x GOCOLL_CUDA -x GOCOLL_DEBUG -x LD_LIBRARY_PATH
			${preload_env:+-x GPUCOLL_STUB_HOSTMEM}) ;;
	mpich)
		launch=(env $preload_env mpiexec.mpich -n "$2" -genv LD_PRELOAD "$ROOT/build/lib/libgocoll-preload.so"
			-genv GOCOLL_CUDA "$GOCOLL_CUDA" -genv GOCOLL_DEBUG "$3") ;;
	esac
}

# rank-stderr.sh DIR PROG ARGS...: one rank, its standard error in
# DIR/rank-R.PID, so that GOCOLL_DEBUG's lines are never cut or mixed by
# the launcher's output forwarding.
cat >"$work/rank-stderr.sh" <<'EOF'
#!/bin/sh
dir=$1
shift
exec "$@" 2>"$dir/rank-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}.$$"
EOF
chmod +x "$work/rank-stderr.sh"

# check_calls NAME N DIR: after the LD_PRELOAD run NAME on N ranks (checks
# only, GOCOLL_DEBUG=info, each rank's standard error in DIR), prints what
# the ranks said but their lines per call and, when the run had device
# memory, counts one more check passed if gocoll ran every call on it:
# each check is one collective on device buffers per rank, so each rank's
# finalize report ("calls run by gocoll X (on device memory D)") and its
# lines per call with memory=device must count every check, and no call
# may have gone to the host MPI for its device buffer.
check_calls() {
	local name=$1 n=$2 dir=$3 log="$work/$1.log"
	[ -f "$log" ] || return # not run: counted already
	local errs="$work/$1.stderr"
	cat "$dir"/rank-* >"$errs" 2>/dev/null
	grep -vE "$call_re" "$errs"
	[ "$preload_device" = 1 ] || return
	local line checks r files reports=0 dev lines fell ok=1
	for ((r = 0; r < n; r++)); do
		# this rank's checks, each one collective on device memory
		line=$(grep -E "^rank $r: [0-9]+ passed, [0-9]+ failed\$" "$log" | head -1)
		line=${line#*: }
		checks=0
		[ -n "$line" ] && checks=$((${line%% passed*} + $(echo "${line#*, }" | sed 's/ failed//')))
		[ "$checks" -gt 0 ] || ok=0
		files=$(ls "$dir"/rank-$r.* 2>/dev/null | wc -l)
		dev=$(cat "$dir"/rank-$r.* 2>/dev/null | sed -nE 's/^gocoll: rank [0-9]+: finalize: .* \(on device memory ([0-9]+)\).*/\1/p')
		lines=$(cat "$dir"/rank-$r.* 2>/dev/null | grep -cE '^gocoll: rank [0-9]+: MPI_[A-Za-z_]+ comm=.* memory=device$')
		fell=$(cat "$dir"/rank-$r.* 2>/dev/null | grep -cF -- '-> host MPI (CUDA device buffer)')
		[ -n "$dev" ] && reports=$((reports + 1))
		echo "run.sh: $name: rank $r: gocoll ran ${dev:-?} calls on device memory (finalize report)," \
			"$lines GOCOLL_DEBUG lines with memory=device, of $checks; $fell went to the host MPI for a device buffer"
		if [ "$files" -ne 1 ] || [ "${dev:-x}" != "$checks" ] || [ "$lines" -ne "$checks" ] || [ "$fell" -ne 0 ]; then
			ok=0
		fi
	done
	if [ "$ok" = 0 ]; then
		grep -F -- '-> host MPI (CUDA device buffer)' "$errs" | head -5
		echo "run.sh: $name: FAIL: gocoll did not run every call on device memory"
	fi
	total_pass=$((total_pass + ok)) total_fail=$((total_fail + 1 - ok))
	summary="$summary$(printf '\n  %-26s %5d passed, %3d failed  (gocoll ran the device calls: %d reports of %d ranks)' \
		"${name%-calls}-device" "$ok" "$((1 - ok))" "$reports" "$n")"
}

for n in $ranks; do
	runone "gocollrun-np$n" "$n" "$ROOT/build/bin/gocollrun" -n "$n" --timeout "$((per_run + 5))s" "$work/gpucoll" $args
	for m in $built_preloads; do
		# The checks and the timing table as an application runs them;
		# then the quick checks again with GOCOLL_DEBUG=info (which turns
		# the C half's decision cache off), to count the device calls.
		launcher "$m" "$n" warn
		runone "preload-$m-np$n" "$n" "${launch[@]}" "$work/gpucoll-$m" $args --no-special
		launcher "$m" "$n" info
		mkdir -p "$work/stderr-$m-np$n"
		runone "preload-$m-np$n-calls" "$n" "${launch[@]}" "$work/rank-stderr.sh" "$work/stderr-$m-np$n" \
			"$work/gpucoll-$m" --quick --no-time --no-special
		check_calls "preload-$m-np$n-calls" "$n" "$work/stderr-$m-np$n"
	done
done

echo
echo "==== summary ($(($(date +%s) - start))s) ====$summary"
[ -n "$notes" ] && echo "  setup problems:$notes"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
