// Package cluster runs gocoll where clusters run it: under a real Slurm
// (Debian's slurm-wlm and munge), started on this machine as a one-node
// cluster by the tests themselves (slurm_test.go) and stopped after them.
// It needs root. Every srun has a time limit of its own (--time) and of
// the test's (a hang fails the test).
package cluster

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/tests/internal/harness"
)

func TestMain(m *testing.M) { harness.Main(m, 2, "build", nil) }

// srunLimit bounds one srun: start-up of a step takes well under a second
// here, the programs less.
const srunLimit = 60 * time.Second

// TestSlurm starts one Slurm for all its subtests.
func TestSlurm(t *testing.T) {
	s := StartSlurm(t)
	pmiprog := harness.BuildGo(t, "pmi/testdata/pmiprog", "pmiprog")
	allreduce := harness.Compile(t, filepath.Join(harness.Bin, "mpicc"), "allreduce", nil, "examples/c/allreduce.c")

	t.Run("mpi-list", func(t *testing.T) {
		out, code := s.Srun(t, srunLimit, nil, "--mpi=list")
		if code != 0 {
			t.Fatalf("srun --mpi=list: exit %d\n%s", code, out)
		}
		for _, plugin := range []string{"pmi2", "pmix"} {
			if !strings.Contains(out, plugin) {
				t.Errorf("srun --mpi=list has no %s:\n%s", plugin, out)
			}
		}
	})

	// The PMI-2 client itself: rank, size, put/fence/get, long values,
	// Allgather of blobs over several values.
	t.Run("pmi2-client", func(t *testing.T) {
		for n := 1; n <= 4; n++ {
			out, code := s.Srun(t, srunLimit, nil, "--mpi=pmi2", "-n", strconv.Itoa(n), pmiprog)
			expectLines(t, out, code, n, "PASS rank %d of %d via PMI-2 (Slurm)")
		}
	})

	// Slurm's pmi2 plugin also speaks PMI-1, but reads a request in one
	// read of 1024 bytes: an Allgather chunk of a full value used to make
	// a longer line and hang the job.
	t.Run("pmi1-client", func(t *testing.T) {
		out, code := s.Srun(t, srunLimit, []string{"GOCOLL_PMI=1"}, "--mpi=pmi2", "-n", "3", pmiprog)
		expectLines(t, out, code, 3, "PASS rank %d of %d via PMI-1")
	})

	// Slurm kills the whole step on a PMI-2 abort (isworld): the tasks
	// die by signal, so srun's status is not the abort's code.
	t.Run("pmi2-abort", func(t *testing.T) {
		out, code := s.Srun(t, srunLimit, []string{"PMIPROG_ABORT=1"}, "--mpi=pmi2", "-n", "3", pmiprog)
		if code == 0 || strings.Contains(out, "PASS") || !strings.Contains(out, "rank 1 aborts the job with code 5") {
			t.Errorf("abort under srun: exit %d, output:\n%s", code, out)
		}
	})

	// A gocoll C program, built with gocoll's mpicc, as users run it.
	for _, mpi := range []string{"pmi2", "pmix"} {
		t.Run("allreduce-"+mpi, func(t *testing.T) {
			for n := 1; n <= 4; n++ {
				out, code := s.Srun(t, srunLimit, nil, "--mpi="+mpi, "-n", strconv.Itoa(n), allreduce)
				expectLines(t, out, code, n, "allreduce of 1003 doubles on %[2]d ranks, rank %[1]d: PASS")
			}
		})
	}

	// Start-up under PMI-2: each rank puts one card, fences once and
	// gets every other rank's card (PMI-2 has no bulk get); the
	// times are logged for the record (go test -v).
	startup := harness.Compile(t, filepath.Join(harness.Bin, "mpicc"), "startup", nil, "bench/startup.c")
	t.Run("startup-pmi2", func(t *testing.T) {
		for _, n := range []int{2, 4, 8} {
			out, code := s.Srun(t, srunLimit, []string{"GOCOLL_DEBUG=info"}, "--mpi=pmi2", "-n", strconv.Itoa(n), startup)
			if code != 0 || !strings.Contains(out, "PASS") {
				t.Fatalf("-n %d: exit %d\n%s", n, code, out)
			}
			want := "gocoll: rank 0: start-up under PMI-2 (Slurm) took "
			traffic := fmt.Sprintf("(1 puts, 1 fences, %d gets, 0 bulk gets, 3 other)", n-1)
			line := ""
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, want) {
					line = l
				}
			}
			if !strings.Contains(line, traffic) {
				t.Errorf("-n %d: rank 0's start-up traffic is not %s:\n%s", n, traffic, out)
			}
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "startup np=") {
					t.Logf("srun --mpi=pmi2 -n %d: %s; %s", n, l, strings.TrimPrefix(line, "gocoll: "))
				}
			}
		}
	})

	// srun without --mpi (and MpiDefault=none) starts n copies that
	// cannot reach each other: each must fail in MPI_Init, saying why,
	// instead of running as a job of one rank.
	t.Run("no-mpi-fails", func(t *testing.T) {
		out, code := s.Srun(t, srunLimit, nil, "-n", "2", allreduce)
		if code == 0 || strings.Contains(out, "PASS") {
			t.Fatalf("srun -n 2 without --mpi: exit %d, output:\n%s", code, out)
		}
		if !strings.Contains(out, "srun") || !strings.Contains(out, "--mpi") {
			t.Errorf("the failure does not tell to use srun --mpi:\n%s", out)
		}
	})
}

// expectLines checks that srun succeeded and every rank of n printed
// format (with rank and n as its arguments).
func expectLines(t *testing.T, out string, code, n int, format string) {
	t.Helper()
	if code != 0 {
		t.Errorf("-n %d: exit %d\n%s", n, code, out)
		return
	}
	for r := range n {
		if want := fmt.Sprintf(format, r, n); !strings.Contains(out, want) {
			t.Errorf("-n %d: no %q in:\n%s", n, want, out)
		}
	}
}
