// Package envvar lists every GOCOLL_ environment variable with its default
// and meaning (All): the one place docs/tuning.md, `gocoll-demo -info` and
// `gocollrun --info` take them from, so none goes undocumented; and
// it parses the user's settings among them, once, into one typed value
// (Settings, settings.go), which every other package reads.
//
// envvar imports no gocoll package but algorithms (for the collectives'
// and algorithms' names), so that all of them can import it.
package envvar

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/gocoll/gocoll/algorithms"
)

// Var is one environment variable.
type Var struct {
	Name    string
	Default string
	Help    string
}

// All lists every variable gocoll reads.
var All = append(forceVars(), []Var{
	{"GOCOLL_FALLBACK", "warn", "when a forced algorithm cannot run a call (e.g. ring with a non-commutative op): warn (use the tuned choice, say so once on stderr), silent, or error"},
	{"GOCOLL_REPRODUCIBLE", "0", "1: every reduction whose result depends on the order of its terms (MPI_SUM and MPI_PROD on floating-point types, commutative user-defined ops) returns the canonical association of the ranks' contributions, bit for bit, whatever the algorithm, count, transport, memory or node map: adjacent ranks in pairs, then pairs of pairs (docs/reproducible.md); float16 and bfloat16 are summed in float32 and rounded once. Only algorithms that compute it run such calls (a forced one that does not falls back as GOCOLL_FALLBACK says), and under LD_PRELOAD the host MPI never runs them"},
	{"GOCOLL_TUNING_FILE", "", "JSON rules that override the built-in tuning (first match by collective, size and rank range wins)"},
	{"GOCOLL_FIT", "1", "0: never fit the model's machine in the job. With 1, at the first call the model decides (outside every rule) on a communicator that spans several nodes, every rank of it takes part in a bounded measurement (one pair of ranks across nodes, one within a node, 150 ms at most, about 90 ms on 1 Gbit/s links), and the tuner decides with the fitted machine for the rest of the job; a later communicator agrees on the job's fit instead of measuring again. Not where GOCOLL_TUNING_FILE gives a machine"},
	{"GOCOLL_FIT_SAVE", "", "a path: after an in-job fit, rank 0 of the fitting communicator writes the machine there as a tuning file (its rules, if the file has some, kept), to give the next job as GOCOLL_TUNING_FILE"},
	{"GOCOLL_TUNE", "runtime under LD_PRELOAD, off standalone", "runtime: under LD_PRELOAD, the first calls of each (communicator shape, collective, size class) that the built-in rules or the model decide alternate between the host MPI's collective and gocoll's best algorithm, timed on every rank; the ranks agree on the faster with one small allreduce of their times, and every later call of the class takes it (GOCOLL_DEBUG=info prints each decision). Forced algorithms, GOCOLL_TUNING_FILE's rules, calls the host must not run (GOCOLL_REPRODUCIBLE's among them) and device memory are never tuned. off: the rules decide alone. Standalone gocoll has no host to weigh and ignores runtime"},
	{"GOCOLL_TUNE_CALLS", "8", "run-time tuning: timed calls of each candidate per size class up to 8 KiB, half as many above (after one untimed call of each); every rank makes the same number"},
	{"GOCOLL_TUNE_SAVE", "", "run-time tuning: at MPI_Finalize, rank 0 of MPI_COMM_WORLD writes the decisions it measured (commutative ops) to this file as tuning-file rules with exact ranges, for GOCOLL_TUNING_FILE in the next job"},
	{"GOCOLL_TRANSPORT", "auto", "auto: shared memory between ranks on one host, TCP between hosts (under LD_PRELOAD: the host MPI's point-to-point between hosts); tcp: TCP everywhere; shm: shared memory only (one host); hostmpi (LD_PRELOAD only): the host MPI's point-to-point everywhere"},
	{"GOCOLL_TCP_ADDR", "", "the address the TCP transport listens on; default: loopback when all ranks share a host, else the address that routes to the launcher (gocollrun's proxies set it to that address on remote hosts)"},
	{"GOCOLL_PMI", "", "1 or 2: the PMI version to speak where PMI_FD or PMI_PORT is set; default 2 under srun --mpi=pmi2 (Slurm sets PMI_JOBID), else 1 (gocollrun speaks only PMI-1)"},
	{"GOCOLL_TIMEOUT", "300s", "a peer that makes no progress for this long fails the collective with MPI_ERR_PROC_ABORTED, naming the rank that stalled (a dead peer fails it at once; ranks waiting for each other in a cycle, a deadlock, at the timeout)"},
	{"GOCOLL_CHECK", "0", "1: every collective first checks that all ranks called the same one with the same count, datatype, op and root, and fails on every rank with a message naming the mismatch instead of hanging (costs one small allgather per call)"},
	{"GOCOLL_SHM_SLOT", "", "bytes of each rank's slot in a communicator's shared segment (the shm algorithms), in KiB (128K), and then every step moves at most that many: larger means fewer synchronisations, smaller stays in cache; unset: 1 MiB slots (128 KiB beyond 8 ranks) and steps by size class (allreduce in one step up to 128 KiB, then 512 KiB chunks; reduce-scatter and allgather pieces of at most 512 KiB a block)"},
	{"GOCOLL_PROGRESS_THREAD", "0", "1: a progress thread (goroutine) moves nonblocking and persistent collectives on while the program computes; 0: they move inside gocoll calls (MPI_Test, MPI_Wait, any collective). The shm engine, device and hierarchical shm stages of a nonblocking call run on a goroutine of their own either way"},
	{"GOCOLL_SHM_CMA", "1", "0: the shm allgather copies every block through the shared segment (two copies) instead of reading peers' blocks of 32 KiB and more (1 MiB with more ranks than cores) with cross-memory attach (process_vm_readv, one copy); for comparisons. Where the kernel refuses CMA (Yama, seccomp) it copies anyway, and GOCOLL_DEBUG=info says so"},
	{"GOCOLL_CUDA", "auto", "CUDA device buffers: auto (use the driver, libcuda.so.1, when the machine has one; buffers are device memory once the program has a CUDA context), off (never load it: every buffer is host memory), on (fail at start-up, naming what is missing, without a driver and a device)"},
	{"GOCOLL_CUDA_IPC", "1", "0: device buffers of processes on one node travel staged through pinned host memory instead of CUDA IPC (for comparisons and for drivers where IPC misbehaves)"},
	{"GOCOLL_CUDA_SLOT", "1M", "bytes of each of a rank's two one-shot slots in a communicator's device group (CUDA memory, one node): the largest allreduce the oneshot algorithm takes in one step; K and M suffixes"},
	{"GOCOLL_CUDA_SYNC", "memops", "how the ranks of a device group meet between a call's steps: memops (stream memory operations on flags in each other's mapped memory; no host wait) or host (each rank waits for its stream, then a host barrier); see docs/cuda.md for which is faster where"},
	{"GOCOLL_OPS_ISA", "best", "cap the instruction set of the reduction kernels: avx512, avx2 or go (plain Go); for comparisons and for machines where the wider one misbehaves"},
	{"GOCOLL_DEBUG", "warn", "info prints one line per collective call on stderr: call, communicator, bytes, ranks, algorithm, tuned or forced"},
	{"GOCOLL_REPORT", "0", "1: at MPI_Finalize (and mpi.Finalize) every rank prints on stderr one line per collective with the paths that ran its calls, e.g. `gocoll: rank 0: report: MPI_Allreduce fast=10 go=5 ring=3 shm=2`: the C fast path, gocoll's Go half, each algorithm, fallbacks from a forced algorithm (under LD_PRELOAD also the host MPI and decision-cache hits, and a line per decision run-time tuning made, `gocoll: rank 0: tuned: MPI_Allreduce p=2 on one node, 61-64 bytes: host 0.47 µs, gocoll 0.31 µs -> shm`); it changes nothing about which path runs"},
	{"GOCOLL_JOB_ID", "set by gocollrun", "names the job (random hex); the shared-memory transport names its segments /dev/shm/gocoll-<GOCOLL_JOB_ID>-*, which gocollrun deletes after the job"},
	{"GOCOLL_JOB_SECRET", "set by gocollrun", "random 32 bytes (hex) shared by the ranks of one job, never printed; passed to the remote hosts' proxies on standard input, never on a command line"},
	{"GOCOLL_HOST", "set by gocollrun", "the rank's --host entry (\"localhost\" without --host); ranks with the same value share memory and a node (the node map; MPI_Comm_split_type). Unset: the hostname plus the network namespace"},
	{"GOCOLL_NUM_HOSTS", "set by gocollrun", "the number of hosts the job's ranks run on, so that start-up publishes the TCP transport's address only where ranks span hosts, in its one exchange"},
	{"GOCOLL_PRELOAD_FAULT", "", "testing only, LD_PRELOAD mode, read only by a library built with -tags gocolltest (tests/preload builds its own): the Nth collective gocoll runs panics inside Go, to prove that the panic comes back as MPI_ERR_INTERN through the communicator's error handler"},
	{"GOCOLL_TUNE_TEST", "", "testing only, LD_PRELOAD mode, read only by a library built with -tags gocolltest: RANK:HOST_US:GOCOLL_US,... replaces a rank's measured trial times (skewed timings must still route every rank alike), and host=US or gocoll=US makes that candidate's trials slower on purpose by US microseconds each"},
	{"GOCOLL_PRELOAD_EXCLUDE", "", "testing only, LD_PRELOAD mode: op:datatype pairs (MPI_SUM:MPI_INT,...) this rank keeps from the host MPI as if it were wrong on them, to prove that a communicator's ranks agree on the route"},
}...)

// forceVars describes GOCOLL_<COLLECTIVE>_ALGORITHM for each collective.
func forceVars() []Var {
	var vs []Var
	for _, c := range algorithms.Collectives {
		// Host algorithms first, up to the first semicolon: tools/demo.sh
		// times those.
		var cuda []string
		for _, a := range algorithms.All(c) {
			if !a.OnHost() {
				cuda = append(cuda, a.Name)
			}
		}
		vs = append(vs, Var{ForceVar(c), "auto",
			fmt.Sprintf("force %s's algorithm: auto, %s; on CUDA memory also %s; under LD_PRELOAD also %s (the host MPI's own)",
				c, strings.Join(algorithms.HostNames(c), ", "), strings.Join(cuda, ", "), Native)})
	}
	for _, c := range algorithms.Rooted {
		vs = append(vs, Var{ForceVar(c), "auto",
			fmt.Sprintf("force %s's algorithm: auto, %s (its only one today; forcing it is checked like the others', and GOCOLL_DEBUG=info reports it)", c, strings.Join(algorithms.Names(c), ", "))})
	}
	return vs
}

// secret lists the variables whose value Print never shows.
var secret = map[string]bool{"GOCOLL_JOB_SECRET": true}

// Print writes the table of variables, with the current value of each
// that is set (secrets only as "(set, not shown)").
func Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "variable\tdefault\tnow\tmeaning")
	for _, v := range All {
		def := v.Default
		if def == "" {
			def = "(unset)"
		}
		now := os.Getenv(v.Name)
		if secret[v.Name] && now != "" {
			now = "(set, not shown)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", v.Name, def, now, v.Help)
	}
	tw.Flush()
}
