package tests

import (
	"fmt"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/gocoll/gocoll/tests/internal/harness"
)

// The test programs' verdicts catch a library that is wrong on one rank
// only: under tests/c/wrongrank.c (LD_PRELOAD), one collective gives a
// wrong result at one rank of three, and every program must then fail
// (non-zero exit status from gocollrun) with that rank naming a failure,
// whatever the other ranks and gocoll's own collectives say. The same
// programs under the same library, with nothing made wrong, pass.
func TestOneWrongRankFailsTheRun(t *testing.T) {
	shim := harness.Compile(t, "gcc", "wrongrank.so",
		[]string{"-shared", "-fPIC", "-I" + filepath.Join(harness.Root, "include"), "-ldl"}, "tests/c/wrongrank.c")
	mpicc, mpif90 := filepath.Join(harness.Bin, "mpicc"), filepath.Join(harness.Bin, "mpif90")
	corpus, _ := filepath.Glob(filepath.Join(harness.Root, "tests", "fuzz", "corpus", "*.hex"))
	progs := []struct {
		name, compiler, src string
		args, env           []string
		wrong               []string // the calls made wrong, one run each
		rank                int
	}{
		{"subset", mpicc, "tests/c/subset.c", nil, nil,
			[]string{"MPI_Allreduce", "MPI_Reduce_scatter_block", "MPI_Reduce_scatter", "MPI_Allgather", "MPI_Bcast", "MPI_Reduce"}, 1},
		{"collfuzz", mpicc, "tests/fuzz/collfuzz.c", corpus,
			[]string{"GOCOLL_CHECK=1", "GOCOLL_TIMEOUT=30s"}, []string{"MPI_Allreduce", "MPI_Reduce_scatter_block", "MPI_Allgather"}, 2},
		{"mismatch", mpicc, "tests/reliability/c/mismatch.c", nil,
			[]string{"GOCOLL_CHECK=1", "GOCOLL_TIMEOUT=10s", "GOCOLL_FALLBACK=silent"}, []string{"MPI_Allreduce"}, 1},
		{"fsubset", mpif90, "tests/fortran/subset.f90", nil, nil, []string{"MPI_Reduce_scatter_block", "MPI_Allreduce"}, 1},
		{"ffixed", mpif90, "tests/fortran/fixed.f", nil, nil, []string{"MPI_Allreduce"}, 2},
		{"allreduce", mpicc, "examples/c/allreduce.c", nil, nil, []string{"MPI_Allreduce"}, 2},
		{"reduce_scatter", mpicc, "examples/c/reduce_scatter.c", nil, nil, []string{"MPI_Reduce_scatter", "MPI_Reduce_scatter_block"}, 1},
		{"allgather", mpicc, "examples/c/allgather.c", nil, nil, []string{"MPI_Allgather"}, 1},
		{"fallreduce", mpif90, "examples/fortran/allreduce.f90", nil, nil, []string{"MPI_Allreduce"}, 1},
	}
	for _, p := range progs {
		bin := harness.Compile(t, p.compiler, p.name, []string{"-lm"}, p.src)
		argv := gocollrun(3, bin, p.args...)
		env := append([]string{"LD_PRELOAD=" + shim}, p.env...)
		if out, code := run(t, 2*time.Minute, env, argv...); code != 0 {
			t.Errorf("%s with nothing made wrong: exit %d\n%s", p.name, code, out)
			continue
		}
		named := regexp.MustCompile(fmt.Sprintf(`(?m)(^|, )rank %d: .*FAIL|^rank %d: \d+ passed, [1-9]\d* failed$`, p.rank, p.rank))
		for _, call := range p.wrong {
			out, code := run(t, 2*time.Minute, append(env, "WRONG_CALLS="+call, fmt.Sprintf("WRONG_RANK=%d", p.rank)), argv...)
			if code == 0 || !named.MatchString(out) {
				t.Errorf("%s with %s wrong at rank %d: exit %d, want non-zero with rank %d reporting a failure\n%s",
					p.name, call, p.rank, code, p.rank, out)
			}
		}
	}
}
