#!/bin/bash
# run.sh: gocoll on CUDA device memory, the device check. `make gpu-bundle`
# copies this file into build/gpu-bundle/, a folder with everything it
# runs, built beforehand (tests/gpu/bundle.sh): copy the folder to a
# machine with an NVIDIA GPU and its driver (nothing else: no compiler,
# no CUDA toolkit, no Go, no network) and run its run.sh there. Started
# from the source tree (tests/gpu/run.sh) it checks its arguments, runs
# `make gpu-bundle` and then the bundle's run.sh.
#
# The runs, each a job of N ranks sharing the GPU under the bundle's
# gocollrun, of tests/gpucoll (tests/gpu/c/gpucoll.c: the driver through
# dlopen, the checks of each group against a host reference):
#   gocollrun-npN-ipc      every op and type, four collectives, in place
#                          and not; the default-stream ordering; cudaMalloc
#                          memory when a libcudart is found
#   gocollrun-npN-staged   the same checks with GOCOLL_CUDA_IPC=0
#   realloc-npN-ipc/-staged  allocate, call, free, again at the same address
#   misaligned-npN-ipc/-staged  buffers off an element boundary, then the
#                          context must still work
#   calls-npN(-ipc/-staged)  tests/gpucalls (tests/gpu/c/gpucalls.c): the
#                          other calls that take buffers on device memory
#                          (MPI_Bcast, MPI_Reduce, MPI_Gather, MPI_Allgatherv
#                          with displacements, point-to-point), and the
#                          CUDA queries (MPIX_Query_cuda_support) say 1
#   calls-cuda-off         the queries say 0 with GOCOLL_CUDA=off
#   preload-M-npN(-calls)  under LD_PRELOAD over the host MPI M (Open MPI,
#                          MPICH: installed, or the MPICH runtime the bundle
#                          carries) when the binary built for it loads
#                          (ldd), with an MPI_Allreduce table (device
#                          buffers in gocoll, host buffers where the
#                          preload sends them); NaNs and signed zeros left
#                          out of MPI_MAX/MPI_MIN (the host MPI may run a
#                          call, MPI leaves them open); the -calls run, with
#                          GOCOLL_DEBUG=info, also checks that gocoll, not
#                          the host MPI, ran every call on device memory
#                          (the finalize reports' count of device calls)
#   time-npN               the timing table: MPI_Allreduce,
#                          MPI_Reduce_scatter_block, MPI_Reduce_scatter and
#                          MPI_Allgather on device and host buffers, 8 B to
#                          256 MiB (64 MiB from 8 ranks up), a barrier
#                          before each call, the slowest rank's mean; the
#                          baselines measured in the same run (an empty
#                          kernel's launch + synchronize, the device-to-
#                          device copy bandwidth); each cell's result
#                          checked; within a share of --budget (cells that
#                          do not fit are skipped and said to be); then one
#                          summary line per collective, which the summary
#                          below repeats
#   time-npN-ALG           at 2 and 8 ranks, the small MPI_Allreduce
#                          (to 256 KiB) under each device algorithm forced:
#                          oneshot, oneshot-hostsync (GOCOLL_CUDA_SYNC=host),
#                          hoststaged; their summary lines are marked [ALG]
#   wrapper (first)        the bundle's mpicc compiles examples/allreduce.c
#                          against this copy's include/ and lib/, and it
#                          runs (when a C compiler is here)
#   mpich-runtime          when the LD_PRELOAD runs over MPICH use the
#                          bundle's MPICH runtime (mpich-runtime.tar.xz,
#                          unpacked into this folder for the run): every
#                          library its programs need resolves inside it or
#                          to the C and C++ runtime, and each such run
#                          loaded libmpich.so.12 from it (-mpich lines)
# (npN for N of --ranks; 1 rank: no -ipc/-staged, IPC needs a peer; from 8
# ranks up the checks are --quick, to fit the budget.)
# Each rank judges its own checks (`rank R: N passed, N failed` and its
# exit status; no verdict is combined through MPI). Prints every run's
# output, then a summary and the totals, `N passed, N failed`, last.
# Exit status: 0 all passed, 1 a check failed, 2 something needed is
# missing (said plainly, before anything runs).
set -u

usage() {
	cat <<'EOF'
usage: run.sh [options]   (build/gpu-bundle/run.sh, or tests/gpu/run.sh)

  --quick           fewer counts and cycles, sizes up to 16 MiB
  --ranks "1 2 4 8" rank counts to run (default "1 2 4 8"; from 8 ranks up
                    the checks are --quick and the table stops at 64 MiB)
  --max-bytes N     largest message of the timing table (default 268435456)
  --no-time         no timing table
  --mpi NAME        host MPI for the LD_PRELOAD runs: openmpi, mpich, both,
                    or none (default: openmpi if installed, else mpich,
                    installed or the bundle's own)
  --no-preload      same as --mpi none
  --bundled-mpich   run the LD_PRELOAD runs over MPICH with the bundle's
                    MPICH runtime even where an MPICH is installed (without
                    one it is used anyway)
  --timeout SECS    limit for each run (default 60)
  --budget SECS     limit for the whole script (default 225: under 4
                    minutes); runs that would pass it are not run, and
                    count as failed; each timing table gets a share of it
                    (3% at 1 rank, 7% at 2, 9% at 4, 11% from 8 up, 1% for
                    an LD_PRELOAD run's MPI_Allreduce table) and skips the
                    cells that do not fit
  --self-test       check this script, the bundle and gocoll's device path
                    without a GPU: the bundle's stand-in CUDA driver and
                    runtime (stub/) give "device" memory the CPU cannot
                    touch; also checks that the -ipc runs used CUDA IPC and
                    the -staged ones did not, and compiles with the bundle's
                    mpicc (a C compiler is needed)
  -h, --help        this text

Needs: Linux x86-64 with an NVIDIA GPU and its driver (libcuda.so.1;
nvidia-smi for information only). Nothing else: the programs are built.
A CUDA runtime (libcudart) is used when found, else its checks are said
to be not run; a host MPI (Open MPI or MPICH, or the MPICH runtime the
bundle carries) for the LD_PRELOAD runs, else they are said to be
skipped; a C compiler for the wrapper check, else it is said to be
skipped.
EOF
}

args=("$@")
quick=0 ranks="1 2 4 8" max_bytes=268435456 mpi=auto per_run=60 budget=225 self_test=0 no_time=0 bundled_mpich=0
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) quick=1 ;;
	--ranks) [ $# -ge 2 ] || { echo "run.sh: --ranks needs a value" >&2; exit 2; }; ranks=$2; shift ;;
	--max-bytes) [ $# -ge 2 ] || { echo "run.sh: --max-bytes needs a value" >&2; exit 2; }; max_bytes=$2; shift ;;
	--no-time) no_time=1 ;;
	--mpi) [ $# -ge 2 ] || { echo "run.sh: --mpi needs a value" >&2; exit 2; }; mpi=$2; shift ;;
	--no-preload) mpi=none ;;
	--bundled-mpich) bundled_mpich=1 ;;
	--timeout) [ $# -ge 2 ] || { echo "run.sh: --timeout needs a value" >&2; exit 2; }; per_run=$2; shift ;;
	--budget) [ $# -ge 2 ] || { echo "run.sh: --budget needs a value" >&2; exit 2; }; budget=$2; shift ;;
	--self-test) self_test=1 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "run.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
case "$max_bytes" in '' | *[!0-9]*) echo "run.sh: --max-bytes wants a number of bytes, not '$max_bytes'" >&2; exit 2 ;; esac
case "$per_run" in '' | *[!0-9]* | 0) echo "run.sh: --timeout wants seconds, not '$per_run'" >&2; exit 2 ;; esac
case "$budget" in '' | *[!0-9]* | 0) echo "run.sh: --budget wants seconds, not '$budget'" >&2; exit 2 ;; esac
[ -n "$ranks" ] || { echo "run.sh: --ranks wants rank counts" >&2; exit 2; }
for n in $ranks; do
	case "$n" in '' | *[!0-9]* | 0) echo "run.sh: --ranks wants counts of 1 or more, not '$n'" >&2; exit 2 ;; esac
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

here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
if [ ! -x "$here/bin/gocollrun" ] || [ ! -x "$here/tests/gpucoll" ]; then
	# The source tree's copy: build the bundle, run the bundle's.
	root=$(cd "$here/../.." && pwd)
	[ -f "$root/tests/gpu/bundle.sh" ] || missing "this is neither a bundle (no bin/gocollrun, tests/gpucoll beside run.sh) nor tests/gpu of a checkout"
	echo "run.sh: make gpu-bundle (in $root)"
	log=$(mktemp /tmp/gocoll-gpu-bundle.XXXXXX) || missing "no temporary file"
	if ! make -s -C "$root" gpu-bundle >"$log" 2>&1; then
		tail -20 "$log" >&2
		rm -f "$log"
		missing "make gpu-bundle fails (see above)"
	fi
	tail -1 "$log"
	rm -f "$log"
	exec "$root/build/gpu-bundle/run.sh" "${args[@]}"
fi

start=$(date +%s)
work=$(mktemp -d /tmp/gocoll-gpu.XXXXXX) || missing "no temporary directory"
mpich_dir="" # the bundle's MPICH runtime, once unpacked
trap 'rm -rf "$work" ${mpich_dir:+"$mpich_dir"}' EXIT
have() { command -v "$1" >/dev/null 2>&1; }
echo "run.sh: bundle $here"
[ -f "$here/BUILD" ] && sed 's/^/run.sh: /' "$here/BUILD"

# ---- what the machine must have ----
# The bundle's programs must load here (glibc, their libraries).
for f in bin/gocollrun lib/libgocoll.so lib/libgocoll-preload.so tests/gpucoll; do
	have ldd || break
	out=$(ldd "$here/$f" 2>&1)
	if echo "$out" | grep -qE 'not found|not a dynamic'; then
		echo "$out" | grep -E 'not found|not a dynamic' >&2
		missing "the bundle's $f does not load on this machine (see above; it needs what BUILD says)"
	fi
done
if [ "$self_test" = 1 ]; then
	echo "run.sh: SELF-TEST: no GPU is used. The bundle's stand-in CUDA driver and runtime (stub/, from"
	echo "run.sh: tests/gpu/c/stub*.c) give gocoll \"device\" memory the CPU cannot touch, reduced by the"
	echo "run.sh: driver in C, with CUDA IPC between processes, reused addresses, deferred default streams"
	echo "run.sh: and sticky misaligned-address errors."
	[ -e "$here/stub/libcuda.so.1" ] || missing "no stand-in driver in the bundle (stub/libcuda.so.1)"
	export LD_LIBRARY_PATH="$here/stub${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" # dlopen("libcuda.so.1") finds the stand-in
	export GPUCOLL_STUB_REPORT=1
else
	found=""
	for d in ${LD_LIBRARY_PATH//:/ } /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/nvidia/lib64 /usr/lib/wsl/lib; do
		[ -e "$d/libcuda.so.1" ] && { found=$d/libcuda.so.1; break; }
	done
	[ -n "$found" ] || { ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 ' && found="libcuda.so.1 (ldconfig)"; }
	[ -n "$found" ] || missing "no NVIDIA GPU driver (libcuda.so.1 not found: not in LD_LIBRARY_PATH, the usual library folders or ldconfig's cache)"
	echo "run.sh: CUDA driver library: $found"
	if have nvidia-smi; then
		gpus=$(nvidia-smi -L 2>&1) || missing "nvidia-smi fails: $gpus"
		echo "$gpus" | grep -q '^GPU ' || missing "no NVIDIA GPU (nvidia-smi -L lists none)"
		echo "run.sh: ${gpus//$'\n'/$'\n'run.sh: }"
		echo "run.sh: driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)"
	else
		echo "run.sh: no nvidia-smi (for information only)"
	fi
fi
export GOCOLL_CUDA=on # gocoll must find the driver, or say why not
# The device, as the test program sees it: one rank, no launcher.
probe=$(timeout -k 5 60 "$here/tests/gpucoll" --checks none --no-time 2>&1)
rc=$?
echo "run.sh: probe: ${probe//$'\n'/$'\n'run.sh: probe: }"
[ "$rc" -eq 0 ] || missing "the test program finds no usable CUDA device (exit $rc, above)"

# ---- what to run ----
# launcher_of M: the launcher of host MPI M here (Debian's names, else
# mpirun/mpiexec if it says it is M), or nothing.
launcher_of() {
	case $1 in
	openmpi)
		if have mpirun.openmpi; then echo mpirun.openmpi
		elif have mpirun && mpirun --version 2>&1 | grep -q 'Open MPI'; then echo mpirun; fi ;;
	mpich)
		if have mpiexec.mpich; then echo mpiexec.mpich
		elif have mpiexec && mpiexec --version 2>&1 | grep -q 'HYDRA'; then echo mpiexec; fi ;;
	esac
}
declare -A mpirun_of
for m in openmpi mpich; do mpirun_of[$m]=$(launcher_of $m); done

# MPICH's runtime, carried by the bundle (tests/gpu/bundle.sh) for a
# machine with no MPI: used when the LD_PRELOAD runs go over MPICH and
# none is installed (or --bundled-mpich), unpacked into a folder of this
# bundle's that is removed at exit (or a temporary one, when the bundle
# is read-only). Only the MPICH launcher's environment names it (PATH,
# LD_LIBRARY_PATH: mpich_env), so the ranks of the LD_PRELOAD runs over
# MPICH load its libmpich.so.12, and no gocollrun run sees it.
mpich_env=()
mpich_notes=""
wants_mpich=0
case "$mpi" in mpich | both) wants_mpich=1 ;; auto) [ -z "${mpirun_of[openmpi]}" ] && wants_mpich=1 ;; esac
if [ "$wants_mpich" = 1 ] && { [ -z "${mpirun_of[mpich]}" ] || [ "$bundled_mpich" = 1 ]; }; then
	if [ ! -f "$here/mpich-runtime.tar.xz" ]; then
		[ "$bundled_mpich" = 1 ] && missing "--bundled-mpich: this bundle carries no MPICH runtime (mpich-runtime.tar.xz; no MPICH where it was built)"
	else
		mpich_dir=$(mktemp -d "$here/mpich-runtime.XXXXXX" 2>/dev/null) || mpich_dir=$(mktemp -d "$work/mpich-runtime.XXXXXX")
		if tar -C "$mpich_dir" -xJf "$here/mpich-runtime.tar.xz" 2>"$work/untar.log" ||
			{ have python3 && python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
				"$here/mpich-runtime.tar.xz" "$mpich_dir" 2>>"$work/untar.log"; }; then
			mpirun_of[mpich]=$mpich_dir/mpich/bin/mpiexec.mpich
			mpich_env=(env "PATH=$mpich_dir/mpich/bin:$PATH" "LD_LIBRARY_PATH=$mpich_dir/mpich/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
			echo "run.sh: MPICH: the bundle's runtime (mpich-runtime.tar.xz), unpacked in $mpich_dir/mpich; only the" \
				"LD_PRELOAD runs over MPICH see it (PATH, LD_LIBRARY_PATH)"
		else
			sed 's/^/run.sh:   /' "$work/untar.log"
			echo "run.sh: MPICH: the bundle's runtime does not unpack here (tar with xz, or python3, is needed)"
			mpich_notes=" preload-mpich:cannot-unpack"
			rm -rf "$mpich_dir"
			mpich_dir=""
		fi
	fi
fi
preloads=""
case "$mpi" in
auto) if [ -n "${mpirun_of[openmpi]}" ]; then preloads=openmpi; elif [ -n "${mpirun_of[mpich]}" ]; then preloads=mpich; fi ;;
both) preloads="openmpi mpich" ;;
none) ;;
*) preloads=$mpi ;;
esac
notes=$mpich_notes
ready_preloads=""
# ldd_of M FILE: ldd as the runs over host MPI M see FILE.
ldd_of() {
	if [ "$1" = mpich ]; then "${mpich_env[@]}" ldd "$2"; else ldd "$2"; fi
}
for m in $preloads; do
	if [ ! -x "$here/tests/gpucoll-$m" ]; then
		echo "run.sh: LD_PRELOAD over $m: skipped: the bundle has no gpucoll-$m (no mpicc.$m where it was built)"
		notes="$notes preload-$m:not-built"
	elif [ -z "${mpirun_of[$m]}" ]; then
		echo "run.sh: LD_PRELOAD over $m: skipped: no $m launcher here (mpirun.openmpi or an Open MPI mpirun; mpiexec.mpich or a Hydra mpiexec)"
		notes="$notes preload-$m:no-$m"
	elif have ldd && ldd_of "$m" "$here/tests/gpucoll-$m" 2>&1 | grep -q 'not found'; then
		echo "run.sh: LD_PRELOAD over $m: skipped: gpucoll-$m does not load here:"
		ldd_of "$m" "$here/tests/gpucoll-$m" 2>&1 | grep 'not found' | sed 's/^/run.sh:   /'
		notes="$notes preload-$m:does-not-load"
	else
		ready_preloads="$ready_preloads $m"
	fi
done
if [ -z "$preloads" ] && [ "$mpi" != none ]; then
	echo "run.sh: no host MPI (Open MPI's mpirun, MPICH's mpiexec, or the MPICH runtime a bundle carries): the LD_PRELOAD runs are skipped"
	notes="$notes preload:no-host-mpi"
fi
for m in $ready_preloads; do echo "run.sh: LD_PRELOAD over $m: ${mpirun_of[$m]} ($(command -v "${mpirun_of[$m]}"))"; done

qarg=""
[ "$quick" = 1 ] && qarg=--quick

# ---- run ----
total_pass=0 total_fail=0
summary=""
# add NAME PASSED FAILED NOTE: one line of the summary.
add() {
	total_pass=$((total_pass + $2)) total_fail=$((total_fail + $3))
	summary="$summary$(printf '\n  %-28s %5d passed, %3d failed  %s' "$1" "$2" "$3" "$4")"
}

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
	if [ $((elapsed + limit)) -gt "$budget" ]; then
		limit=$((budget - elapsed))
		if [ "$limit" -lt 10 ]; then
			echo "run.sh: $name: not run, the time budget (${budget}s) is spent"
			add "$name" 0 1 "not run (time budget)"
			return
		fi
	fi
	local t0
	t0=$(date +%s)
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
	add "$name" "$p" "$f" "(${secs}s, exit $rc)"
}

# stub_path NAME N IPC: in a self-test, after the run NAME of N ranks,
# one check that its transfers took the path it is named after, from the
# stand-in driver's account of each process ("stubcuda: pid P: ... IPC
# handles made H, opened O ..."): with IPC on, every process opened a
# peer's handle; with GOCOLL_CUDA_IPC=0 none made or opened one.
stub_path() {
	[ "$self_test" = 1 ] || return
	local name=$1 n=$2 ipc=$3 log="$work/$1.log"
	[ -f "$log" ] || return
	local reports opened made ok=1
	reports=$(grep -c '^stubcuda: pid ' "$log")
	opened=$(sed -nE 's/^stubcuda: pid .* opened ([0-9]+),.*/\1/p' "$log" | tr '\n' ' ')
	made=$(sed -nE 's/^stubcuda: pid .* IPC handles made ([0-9]+),.*/\1/p' "$log" | tr '\n' ' ')
	[ "$reports" -eq "$n" ] || ok=0
	for o in $opened; do
		if [ "$ipc" = 1 ]; then [ "$o" -gt 0 ] || ok=0; else [ "$o" -eq 0 ] || ok=0; fi
	done
	if [ "$ipc" = 0 ]; then for h in $made; do [ "$h" -eq 0 ] || ok=0; done; fi
	echo "run.sh: $name: the stand-in's accounts of $reports processes (want $n): IPC handles made [ $made], opened [ $opened]"
	[ "$ok" = 1 ] || echo "run.sh: $name: FAIL: the transfers did not take the $([ "$ipc" = 1 ] && echo "CUDA IPC" || echo "staged") path"
	add "${name}-path" "$ok" "$((1 - ok))" "($([ "$ipc" = 1 ] && echo "every process opened a peer's IPC handle" || echo "no IPC handle made or opened"))"
}

# reuse_note NAME N: what the realloc run says about addresses reused (in
# a self-test, one check: the stand-in reuses the last freed range, so a
# run where no address came back did not test what it is for).
reuse_note() {
	local name=$1 n=$2 log="$work/$1.log"
	[ -f "$log" ] || return
	local lines
	lines=$(grep -cE '^rank [0-9]+: realloc: a new send buffer was at the address just freed [1-9][0-9]* times' "$log")
	[ "$self_test" = 1 ] || return
	local ok=0
	[ "$lines" -eq "$n" ] && ok=1
	add "${name}-reuse" "$ok" "$((1 - ok))" "(ranks whose new buffers came back at a freed address: $lines of $n)"
}

# GOCOLL_DEBUG=info's line per call: gocoll's, or the host MPI's.
call_re='^gocoll: rank -?[0-9]+: MPI_[A-Za-z_]+ (comm=|-> host MPI \()'

# launcher M N DEBUG: sets launch to the command that starts N ranks
# under LD_PRELOAD over host MPI M, with GOCOLL_DEBUG=DEBUG; the program
# and its arguments follow.
launcher() {
	case $1 in
	openmpi)
		launch=(env GOCOLL_DEBUG="$3" "${mpirun_of[openmpi]}" --allow-run-as-root --oversubscribe -np "$2"
			-x LD_PRELOAD="$here/lib/libgocoll-preload.so" -x GOCOLL_CUDA -x GOCOLL_DEBUG -x LD_LIBRARY_PATH
			${GPUCOLL_STUB_REPORT:+-x GPUCOLL_STUB_REPORT}) ;;
	mpich)
		launch=("${mpich_env[@]}" "${mpirun_of[mpich]}" -n "$2" -genv LD_PRELOAD "$here/lib/libgocoll-preload.so"
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
# the ranks said but their lines per call and counts one more check
# passed if gocoll ran every call on device memory: each check is one
# collective on device buffers per rank, so each rank's finalize report
# ("calls run by gocoll X (on device memory D)") and its lines per call
# with memory=device must count every check, and no call may have gone to
# the host MPI for its device buffer.
check_calls() {
	local name=$1 n=$2 dir=$3 log="$work/$1.log"
	[ -f "$log" ] || return # not run: counted already
	local errs="$work/$1.stderr"
	cat "$dir"/rank-* >"$errs" 2>/dev/null
	grep -vE "$call_re" "$errs"
	local line fails checks r files reports=0 dev lines fell ok=1
	for ((r = 0; r < n; r++)); do
		# this rank's checks, each one collective on device memory
		line=$(grep -E "^rank $r: [0-9]+ passed, [0-9]+ failed\$" "$log" | head -1)
		line=${line#*: }
		checks=0
		fails=${line#*, }
		[ -n "$line" ] && checks=$((${line%% passed*} + ${fails% failed}))
		[ "$checks" -gt 0 ] || ok=0
		files=$(find "$dir" -maxdepth 1 -name "rank-$r.*" | wc -l)
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
	add "${name%-calls}-device" "$ok" "$((1 - ok))" "(gocoll ran the device calls: $reports reports of $n ranks)"
}

# table_budget SHARE: seconds for a timing table, SHARE% of --budget, and
# no more than what is left of the budget or of a run's limit (--timeout),
# less 15 s for the run's start and end.
table_budget() {
	local b=$((budget * $1 / 100)) left=$((budget - ($(date +%s) - start) - 15)) cap=$((per_run - 15))
	[ "$b" -gt "$left" ] && b=$left
	[ "$b" -gt "$cap" ] && b=$cap
	[ "$b" -lt 1 ] && b=1
	echo "$b"
}

# time_algorithms N: at 2 and 8 ranks, the small MPI_Allreduce (8 B to
# 256 KiB) again under each device algorithm that could take it, forced
# (oneshot, synchronised by stream memory operations and on the host;
# hoststaged): what the device rules for small calls are to be measured
# from (docs/cuda.md). Only while a minute of the budget is left; else
# noted, not failed.
time_algorithms() {
	local n=$1 alg name
	[ "$n" = 2 ] || [ "$n" = 8 ] || return
	for alg in oneshot oneshot-hostsync hoststaged; do
		name="time-np$n-$alg"
		if [ $(($(date +%s) - start + 60)) -gt "$budget" ]; then
			notes="$notes $name:time-budget"
			continue
		fi
		local sync=memops
		[ "$alg" = oneshot-hostsync ] && sync=host
		runone "$name" "$n" env GOCOLL_ALLREDUCE_ALGORITHM="${alg%-hostsync}" GOCOLL_CUDA_SYNC=$sync \
			"${g[@]}" "$here/tests/gpucoll" --checks none --colls allreduce --max-bytes 262144 --time-budget "$(table_budget 2)"
	done
}

# check_mpich_runtime: when the bundle's MPICH runtime is used, one check
# that it is whole: every library its programs and libraries need, and
# gpucoll-mpich's, as ldd finds them with the runs' LD_PRELOAD-run
# environment, is inside it or one of the C and C++ runtime's that every
# Linux has (libc, libm, libresolv, libpthread, libdl, librt, the dynamic
# loader, libgcc_s, libstdc++, libz).
check_mpich_runtime() {
	[ -n "$mpich_dir" ] || return
	echo
	echo "==== mpich-runtime ===="
	if ! have ldd; then
		echo "run.sh: mpich-runtime: no ldd here: not checked"
		notes="$notes mpich-runtime:no-ldd"
		return
	fi
	local d=$mpich_dir/mpich f name arrow path inside base outside ok=1
	local sys='^(linux-vdso\.so\.1|libc\.so\.6|libm\.so\.6|libresolv\.so\.2|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|ld-linux-x86-64\.so\.2|libgcc_s\.so\.1|libstdc\+\+\.so\.6|libz\.so\.1)$'
	for f in "$d"/bin/* "$d"/lib/*.so* "$d"/lib/ucx/*.so* "$here/tests/gpucoll-mpich"; do
		if [ ! -f "$f" ] || [ -L "$f" ]; then continue; fi
		inside="" base="" outside=""
		while read -r name arrow path _; do
			[ "$arrow" = "=>" ] || path=$name
			if [ "$path" = "not" ] || [ "$name" = "not" ]; then
				outside="$outside $name(not found)"
			elif [[ "$path" == "$d/"* ]]; then
				inside="$inside $name"
			elif [[ "$(basename "$name")" =~ $sys ]]; then
				base="$base $(basename "$name")"
			else
				outside="$outside $name($path)"
			fi
		done < <("${mpich_env[@]}" ldd "$f" 2>&1 | grep -v -e 'statically linked' -e 'not a dynamic')
		echo "run.sh: mpich-runtime: ${f#"$here/"}: carried:${inside:- none}; the C runtime:${base:- none}${outside:+; ELSEWHERE:$outside}"
		[ -z "$outside" ] || ok=0
	done
	[ "$ok" = 1 ] || echo "run.sh: mpich-runtime: FAIL: the bundle's MPICH runtime needs libraries it does not carry"
	add mpich-runtime "$ok" "$((1 - ok))" "(every library its programs need is carried or the C runtime's)"
}

# mpich_loaded NAME: after the LD_PRELOAD run NAME over MPICH with the
# bundle's runtime, one check that its rank 0 loaded libmpich.so.12 from
# it (gpucoll prints where PMPI_Init came from).
mpich_loaded() {
	[ -n "$mpich_dir" ] && [[ "$1" == preload-mpich-* ]] && [ -f "$work/$1.log" ] || return
	local lib
	lib=$(sed -nE 's/^gpucoll: MPI library: (.*) \(PMPI_Init\)$/\1/p' "$work/$1.log" | head -1)
	echo "run.sh: $1: PMPI_Init from ${lib:-?}"
	if [[ "$lib" == "$mpich_dir/mpich/lib/libmpich.so.12" ]]; then
		add "$1-libmpich" 1 0 "(libmpich.so.12 from the bundle's MPICH runtime)"
	else
		echo "run.sh: $1: FAIL: want PMPI_Init from $mpich_dir/mpich/lib/libmpich.so.12"
		add "$1-libmpich" 0 1 "(libmpich.so.12 not from the bundle's MPICH runtime)"
	fi
}

# check_wrapper: the bundle's mpicc, from wherever this copy is, names
# this copy's include/ and lib/, and what it builds loads this copy's
# libgocoll.so and runs under its gocollrun.
check_wrapper() {
	echo
	echo "==== wrapper ===="
	local cc=${GOCOLL_CC:-cc}
	if ! have "$cc"; then
		if [ "$self_test" = 1 ]; then
			echo "run.sh: wrapper: FAIL: no C compiler ($cc) for the self-test"
			add wrapper 0 1 "(no C compiler)"
		else
			echo "run.sh: wrapper: skipped: no C compiler ($cc) here"
			notes="$notes wrapper:no-cc"
		fi
		return
	fi
	local p=0 f=0 show
	show=$("$here/bin/mpicc" -show x.c)
	echo "$here/bin/mpicc -show x.c: $show"
	if [[ "$show" == *"-I$here/include "* && "$show" == *"-L$here/lib "* && "$show" == *"-Wl,-rpath,$here/lib "* ]]; then
		p=$((p + 1))
	else
		echo "run.sh: wrapper: FAIL: mpicc -show does not name this bundle's include/ and lib/ ($here)"
		f=$((f + 1))
	fi
	if "$here/bin/mpicc" -O2 -o "$work/allreduce" "$here/examples/allreduce.c" >"$work/wrapper-cc.log" 2>&1 &&
		{ ! have ldd || ldd "$work/allreduce" | grep -qF " => $here/lib/libgocoll.so."; }; then
		p=$((p + 1))
		timeout -k 5 "$per_run" "$here/bin/gocollrun" -n 2 "$work/allreduce" >"$work/wrapper.log" 2>&1
		local rc=$?
		cat "$work/wrapper.log"
		if [ "$rc" -eq 0 ] && [ "$(grep -c ': PASS$' "$work/wrapper.log")" -eq 2 ]; then
			p=$((p + 1))
		else
			echo "run.sh: wrapper: FAIL: examples/allreduce.c built with this mpicc: exit $rc, want PASS from 2 ranks"
			f=$((f + 1))
		fi
	else
		cat "$work/wrapper-cc.log"
		ldd "$work/allreduce" 2>&1 | grep libgocoll
		echo "run.sh: wrapper: FAIL: examples/allreduce.c does not build with this mpicc, or does not load $here/lib/libgocoll.so"
		f=$((f + 2))
	fi
	add wrapper "$p" "$f" "(mpicc -show, build and load from this copy, run on 2 ranks)"
}

check_wrapper
check_mpich_runtime
runone "calls-cuda-off" 1 env GOCOLL_CUDA=off "$here/bin/gocollrun" -n 1 --timeout "$((per_run + 5))s" "$here/tests/gpucalls" --no-cuda
for n in $ranks; do
	g=("$here/bin/gocollrun" -n "$n" --timeout "$((per_run + 5))s")
	q=$qarg
	[ "$n" -ge 8 ] && q=--quick # the checks at 8 ranks and more: quick, for the budget
	mb=$max_bytes
	[ "$n" -ge 8 ] && [ "$mb" -gt 67108864 ] && mb=67108864
	if [ "$n" = 1 ]; then
		# No peer for IPC.
		runone "gocollrun-np1" 1 "${g[@]}" "$here/tests/gpucoll" $q --no-time --checks ops,order,cudart
		runone "realloc-np1" 1 "${g[@]}" "$here/tests/gpucoll" $q --no-time --checks realloc
		reuse_note "realloc-np1" 1
		runone "misaligned-np1" 1 "${g[@]}" "$here/tests/gpucoll" $q --no-time --checks misaligned
		runone "calls-np1" 1 "${g[@]}" "$here/tests/gpucalls" $q
	else
		runone "gocollrun-np$n-ipc" "$n" env GOCOLL_CUDA_IPC=1 "${g[@]}" "$here/tests/gpucoll" $q --no-time --checks ops,order,cudart
		stub_path "gocollrun-np$n-ipc" "$n" 1
		runone "gocollrun-np$n-staged" "$n" env GOCOLL_CUDA_IPC=0 "${g[@]}" "$here/tests/gpucoll" $q --no-time --checks ops,order,cudart
		stub_path "gocollrun-np$n-staged" "$n" 0
		for way in ipc staged; do
			ipc=1
			[ "$way" = staged ] && ipc=0
			runone "realloc-np$n-$way" "$n" env GOCOLL_CUDA_IPC=$ipc "${g[@]}" "$here/tests/gpucoll" $q --no-time --checks realloc
			reuse_note "realloc-np$n-$way" "$n"
			runone "misaligned-np$n-$way" "$n" env GOCOLL_CUDA_IPC=$ipc "${g[@]}" "$here/tests/gpucoll" $q --no-time --checks misaligned
			runone "calls-np$n-$way" "$n" env GOCOLL_CUDA_IPC=$ipc "${g[@]}" "$here/tests/gpucalls" $q
		done
		for m in $ready_preloads; do
			# The checks and an MPI_Allreduce table as an application runs
			# them; then the quick ops checks again with GOCOLL_DEBUG=info
			# (which turns the C half's decision cache off), to count the
			# device calls.
			t=(--no-time)
			[ "$no_time" = 0 ] && t=(--colls allreduce --max-bytes "$mb" --time-budget "$(table_budget 1)")
			launcher "$m" "$n" warn
			runone "preload-$m-np$n" "$n" "${launch[@]}" "$here/tests/gpucoll-$m" $q "${t[@]}" --no-special
			mpich_loaded "preload-$m-np$n"
			launcher "$m" "$n" info
			mkdir -p "$work/stderr-$m-np$n"
			runone "preload-$m-np$n-calls" "$n" "${launch[@]}" "$work/rank-stderr.sh" "$work/stderr-$m-np$n" \
				"$here/tests/gpucoll-$m" --quick --no-time --no-special --checks ops
			check_calls "preload-$m-np$n-calls" "$n" "$work/stderr-$m-np$n"
		done
	fi
	# The timing table, last: at the last rank count it may take what the
	# runs before have left of its share.
	if [ "$no_time" = 0 ]; then
		share=11
		case $n in 1) share=3 ;; 2) share=7 ;; 3 | 4) share=9 ;; esac
		runone "time-np$n" "$n" "${g[@]}" "$here/tests/gpucoll" --checks none --max-bytes "$mb" --time-budget "$(table_budget "$share")"
		time_algorithms "$n"
	fi
done
grep -qs '^gpucoll: no libcudart found' "$work"/*.log && notes="$notes cudart:no-libcudart"

echo
echo "==== summary ($(($(date +%s) - start))s) ====$summary"
[ -n "$notes" ] && echo "  not run (not failures):$notes"
# The timing tables' summary lines, as gpucoll printed them.
lines=""
for n in $ranks; do
	log="$work/time-np$n.log"
	[ -f "$log" ] || continue
	lines="$lines$(sed -nE 's/^gpucoll: ([0-9]+ of [0-9]+ cells skipped.*)/  time-np'"$n"': \1/p' "$log")
$(grep -E '^summary ' "$log")
"
	for log in "$work/time-np$n"-*.log; do
		[ -f "$log" ] || continue
		alg=$(basename "$log" .log)
		lines="$lines$(sed -nE 's/^summary /summary ['"${alg#time-np$n-}"'] /p' "$log")
"
	done
done
if [ -n "${lines//[[:space:]]/}" ]; then
	echo "  timing: device buffers, the slowest rank's mean, against the baselines measured in the same run (time-npN)"
	[ "$self_test" = 1 ] && echo "  (self-test: the stand-in driver's times mean nothing; the lines are checked for form only)"
	echo "$lines" | grep -v '^$'
fi
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
