package tests

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gocoll/gocoll/tests/internal/harness"
)

// The nonblocking and persistent collectives from C (tests/c/nonblocking.c:
// every form, each completion call, several in flight on several
// communicators mixed with blocking calls and point-to-point, Test loops)
// at p = 1..8; each rank judges its own checks.
func TestNonblocking(t *testing.T) {
	bin := compile(t, filepath.Join(harness.Bin, "mpicc"), "tests/c/nonblocking.c", "nonblocking")
	for n := 1; n <= 8; n++ {
		out, code := run(t, time.Minute, nil, gocollrun(n, bin)...)
		harness.ExpectRanks(t, fmt.Sprintf("nonblocking on %d ranks", n), out, code, n)
	}
}

// The same program with the progress thread, which completes requests
// while the ranks compute or spin on MPI_Test.
func TestNonblockingProgressThread(t *testing.T) {
	bin := compile(t, filepath.Join(harness.Bin, "mpicc"), "tests/c/nonblocking.c", "nonblocking")
	for _, n := range []int{2, 4} {
		out, code := run(t, time.Minute, []string{"GOCOLL_PROGRESS_THREAD=1"}, gocollrun(n, bin)...)
		harness.ExpectRanks(t, fmt.Sprintf("nonblocking with GOCOLL_PROGRESS_THREAD=1 on %d ranks", n), out, code, n)
	}
}

// The Fortran bindings of the nonblocking and persistent collectives and
// of the completion calls (1-based indices from Waitany and Testany).
func TestNonblockingFortran(t *testing.T) {
	bin := compile(t, filepath.Join(harness.Bin, "mpif90"), "tests/fortran/nonblocking.f90", "fnonblocking")
	for _, n := range []int{1, 2, 3} {
		out, code := run(t, time.Minute, nil, gocollrun(n, bin)...)
		harness.ExpectRanks(t, fmt.Sprintf("fortran nonblocking on %d ranks", n), out, code, n)
	}
}

// nonblocking.c passes on Open MPI and MPICH themselves, so that its
// checks are MPI's semantics and not gocoll's reading of them.
func TestNonblockingOnHostMPIs(t *testing.T) {
	for _, m := range []struct {
		name, cc string
		argv     []string
	}{
		// Open MPI 4.1 is MPI 3.1: the program takes its MPIX_ persistent
		// collectives and leaves the _c forms out.
		{"openmpi", "mpicc.openmpi", []string{"mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader", "-np", "2"}},
		// MPICH 4.0's recursive-doubling schedule, which it picks for
		// MPI_Allgather_init at power-of-two sizes, leaves the peer's block
		// unwritten when the request is started again: ring instead.
		{"mpich", "mpicc.mpich", []string{"mpiexec.mpich", "-n", "2", "-genv", "MPIR_CVAR_IALLGATHER_INTRA_ALGORITHM", "sched_ring"}},
	} {
		for _, tool := range []string{m.cc, m.argv[0]} {
			if _, err := exec.LookPath(tool); err != nil {
				t.Fatalf("%s is missing: `make deps` installs Open MPI and MPICH", tool)
			}
		}
		bin := compile(t, m.cc, "tests/c/nonblocking.c", "nonblocking-"+m.name)
		out, code := run(t, time.Minute, nil, append(m.argv, bin)...)
		harness.ExpectRanks(t, "nonblocking.c on "+m.name+" at 2 ranks", out, code, 2)
	}
}
