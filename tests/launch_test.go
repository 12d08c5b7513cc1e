package tests

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/tests/internal/harness"
)

// A gocoll program whose environment shows a launcher it cannot reach
// fails in MPI_Init with a message that names the launcher and what to
// do; it never runs as a job of one rank while its peers do the same.
// (Real launchers: tests/cluster for srun without --mpi, the Open MPI
// tests for mpirun.)
func TestLoudLauncherFailure(t *testing.T) {
	prog := compile(t, filepath.Join(harness.Bin, "mpicc"), "examples/c/allreduce.c", "allreduce-example")
	for _, tc := range []struct {
		env  []string
		want []string
	}{
		{[]string{"SLURM_STEP_NUM_TASKS=4", "SLURM_STEP_ID=3"}, []string{"MPI_Init", "Slurm's srun", "srun --mpi=pmi2"}},
		{[]string{"OMPI_COMM_WORLD_SIZE=2"}, []string{"MPI_Init", "Open MPI's mpirun"}},
		{[]string{"PMI_PORT=127.0.0.1:1", "MPI_LOCALNRANKS=2"}, []string{"MPI_Init", "hydra", "cannot speak PMI"}},
	} {
		out, code := run(t, 30*time.Second, tc.env, prog)
		if code == 0 || strings.Contains(out, "PASS") {
			t.Errorf("%v: exit %d, ran:\n%s", tc.env, code, out)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: the message does not say %q:\n%s", tc.env, w, out)
			}
		}
	}
	// No launcher at all: one rank, and right.
	if out, code := run(t, 30*time.Second, nil, prog); code != 0 || !strings.Contains(out, "on 1 ranks, rank 0: PASS") {
		t.Errorf("without a launcher: exit %d:\n%s", code, out)
	}
}
