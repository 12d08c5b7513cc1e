package tests

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/tests/internal/harness"
)

// onHosts is the command line that runs prog with args on 4 ranks placed
// on emulated hosts by spec (gocollrun's --host, e.g. h1:2,h2:2): the
// ranks all run here, started through `env`, and differ only in
// GOCOLL_HOST, which gocollrun sets to each rank's --host entry and which
// decides which ranks share a node. An empty spec runs all on one host.
func onHosts(spec, prog string, args ...string) []string {
	argv := []string{filepath.Join(harness.Bin, "gocollrun"), "-n", "4"}
	if spec != "" {
		argv = append(argv, "--host", spec, "--launcher", "env", "--bind", "127.0.0.1")
	}
	return append(append(argv, prog), args...)
}

// placements are the node maps the topology tests run on: a host string
// (each rank's host, as the programs take it) and gocollrun's --host.
var placements = []struct{ hosts, spec string }{
	{"0011", "h1:2,h2:2"},           // blocks
	{"0101", "h1:1,h2:1,h1:1,h2:1"}, // round-robin
	{"0001", "h1:3,h2:1"},           // uneven
	{"0000", ""},                    // one host
}

// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) through the C ABI on 4 ranks
// of emulated hosts (tests/c/splittype.c): each node communicator, of the
// world and of the halves of a split, holds its host's ranks in key
// order, and an allreduce forced to shm runs on its shared segment (the
// shm algorithm or the C fast path) while one on ranks of two hosts is
// refused; MPI_UNDEFINED gives MPI_COMM_NULL; an unknown split_type is
// MPI_ERR_ARG, and under MPI_ERRORS_ARE_FATAL ends the job naming the call
// and the argument. GOCOLL_DEBUG=info prints each communicator's node map.
func TestCommSplitType(t *testing.T) {
	bin := compile(t, filepath.Join(harness.Bin, "mpicc"), "tests/c/splittype.c", "splittype")
	env := []string{"GOCOLL_ALLREDUCE_ALGORITHM=shm", "GOCOLL_FALLBACK=error"}
	for _, pl := range placements {
		out, code := run(t, 2*time.Minute, env, onHosts(pl.spec, bin, pl.hosts)...)
		harness.ExpectRanks(t, "splittype on hosts "+pl.hosts, out, code, 4)
	}
	out, code := run(t, 2*time.Minute, append(env, "GOCOLL_DEBUG=info"), onHosts("h1:1,h2:1,h1:1,h2:1", bin, "0101")...)
	harness.ExpectRanks(t, "splittype on hosts 0101 with GOCOLL_DEBUG=info", out, code, 4)
	for _, want := range []string{
		"gocoll: rank 1: MPI_COMM_WORLD: p=4 on 2 nodes x 2 (this rank: node 1, local rank 0)",
		"gocoll: rank 1: MPI_COMM_WORLD/shared: p=2 on 1 nodes x 2 (this rank: node 0, local rank 1)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("GOCOLL_DEBUG=info lacks %q:\n%s", want, out)
		}
	}
	out, code = run(t, time.Minute, nil, onHosts("h1:2,h2:2", bin, "0011", "fatal")...)
	refusal := regexp.MustCompile(`gocoll: MPI_Comm_split_type: split_type 99 is not MPI_COMM_TYPE_SHARED`)
	if code == 0 || !refusal.MatchString(out) || strings.Contains(out, "the refused call returned") {
		t.Errorf("an unknown split_type under MPI_ERRORS_ARE_FATAL: exit %d, want the job ended naming the call and split_type:\n%s", code, out)
	}
}

// Comm.SplitShared in a Go program under gocollrun, on the same emulated
// hosts (tests/testdata/gosplitshared): mpi.Init learns the node map from
// the job, and each node communicator has its host's ranks and a shared
// segment.
func TestSplitSharedProcesses(t *testing.T) {
	bin := harness.BuildGo(t, "tests/testdata/gosplitshared", "gosplitshared")
	for _, pl := range placements {
		out, code := run(t, 2*time.Minute, []string{"GOCOLL_FALLBACK=error"}, onHosts(pl.spec, bin, pl.hosts)...)
		harness.ExpectRanks(t, fmt.Sprintf("gosplitshared on hosts %s", pl.hosts), out, code, 4)
	}
}

// The hierarchical algorithms in real processes on emulated hosts
// (bench/collbench.c, which checks every result): forced for each
// collective on each placement of several nodes, they run in the
// shared-memory form (each node's ranks on the engine, slices across the
// nodes), say so under GOCOLL_DEBUG=info, and give the right results at
// sizes from 4 bytes (fewer elements than slices) to 256 KiB.
func TestHierarchicalSharedMemoryProcesses(t *testing.T) {
	bin := compile(t, filepath.Join(harness.Bin, "mpicc"), "bench/collbench.c", "collbench")
	for _, pl := range placements {
		if pl.spec == "" {
			continue // one node: the flat algorithm, no shared-memory form
		}
		for _, c := range []string{"allreduce", "reduce_scatter", "reduce_scatter_block", "allgather"} {
			env := []string{"GOCOLL_" + strings.ToUpper(c) + "_ALGORITHM=hierarchical", "GOCOLL_FALLBACK=error", "GOCOLL_DEBUG=info"}
			out, code := run(t, 2*time.Minute, env, onHosts(pl.spec, bin, "-c", c, "-m", "4:262144", "-i", "2", "-il", "1", "-w", "1", "-wl", "1", "-check")...)
			what := fmt.Sprintf("hierarchical %s on hosts %s", c, pl.hosts)
			if code != 0 || !strings.Contains(out, "check: PASS") {
				t.Errorf("%s: exit %d, want 0 and check: PASS:\n%s", what, code, out)
				continue
			}
			if !strings.Contains(out, "algorithm=hierarchical (forced) form=shm") || strings.Contains(out, "form=schedule") {
				t.Errorf("%s: did not run in the shared-memory form:\n%s", what, out)
			}
		}
	}
}
