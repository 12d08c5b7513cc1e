package tests

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/tests/internal/harness"
)

// mpirunOpenMPI is Open MPI's launcher with what it needs here: root
// allowed, more ranks than cores. The test skips only where Open MPI is
// not installed (tools/deps.sh installs it).
func mpirunOpenMPI(t *testing.T, n int, prog string) (argv, env []string) {
	bin, err := exec.LookPath("mpirun.openmpi")
	if err != nil {
		t.Skip("mpirun.openmpi is not installed: apt-get install openmpi-bin")
	}
	return []string{bin, "--oversubscribe", "-np", fmt.Sprint(n), prog},
		[]string{"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "GOCOLL_DEBUG=info"}
}

// Standalone gocoll programs started by Open MPI's mpirun join one job
// through PMIx (rank, size, node map and the exchange of cards from
// mpirun's PMIx server), never n jobs of one rank: every rank prints its
// own PASS for the right size, and says it started under PMIx.
func TestOpenMPILaunch(t *testing.T) {
	mpicc := filepath.Join(harness.Bin, "mpicc")
	progs := map[string]string{
		"allreduce":      "examples/c/allreduce.c",
		"reduce_scatter": "examples/c/reduce_scatter.c",
		"allgather":      "examples/c/allgather.c",
	}
	for name, src := range progs {
		bin := compile(t, mpicc, src, name)
		for n := 1; n <= 4; n++ {
			argv, env := mpirunOpenMPI(t, n, bin)
			out, code := run(t, time.Minute, env, argv...)
			what := fmt.Sprintf("%s under mpirun -np %d", name, n)
			if code != 0 || strings.Contains(out, "FAIL") {
				t.Errorf("%s: exit %d:\n%s", what, code, out)
				continue
			}
			for r := range n {
				if k := strings.Count(out, fmt.Sprintf("on %d ranks, rank %d: PASS\n", n, r)); k != 1 {
					t.Errorf("%s: rank %d printed %d PASS lines for %d ranks, want 1:\n%s", what, r, k, n, out)
				}
				if !strings.Contains(out, fmt.Sprintf("gocoll: rank %d: start-up under PMIx (Open MPI mpirun)", r)) {
					t.Errorf("%s: rank %d did not start under PMIx:\n%s", what, r, out)
				}
			}
		}
	}
	// The exported subset, each rank checking its own results.
	bin := compile(t, mpicc, "tests/c/subset.c", "subset")
	for n := 1; n <= 4; n++ {
		argv, env := mpirunOpenMPI(t, n, bin)
		out, code := run(t, 2*time.Minute, env, argv...)
		expectCounts(t, fmt.Sprintf("subset under mpirun -np %d", n), out, code)
	}
}
