package reliability

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gocoll/gocoll/tests/internal/harness"
)

// fuzzSeed fixes the harness's random inputs, so that every run of the
// test makes the same calls; the corpus holds the inputs worth keeping.
const fuzzSeed = 20240601

// The C fuzz harness (tests/fuzz/collfuzz.c) over the committed corpus
// and a bounded number of random inputs from a fixed seed: bad handles,
// counts, NULL and MPI_IN_PLACE in every pointer position, overlapping
// buffers, recvcounts and displs, through every exported collective and
// its large-count form. Every invalid call must return one of the error
// classes its arguments call for, every valid one the right result, and
// no call may write outside the receive buffer. With GOCOLL_CHECK=1 at 1
// to 3 ranks, on every path (the C fast path, the shm algorithms, the
// schedule algorithms over shared memory and over TCP); without it, the
// inputs whose validity is the same on every rank. Each rank judges its
// own calls and exits non-zero on a failure: the verdict is every rank's
// line and gocollrun's exit status, not a sum made by gocoll.
func TestCFuzzHarness(t *testing.T) {
	bin := compile(t, "tests/fuzz/collfuzz.c", "collfuzz")
	corpus, _ := filepath.Glob(filepath.Join(harness.Root, "tests", "fuzz", "corpus", "*.hex"))
	if len(corpus) < 40 {
		t.Fatalf("the corpus has %d inputs; tests/fuzz/corpus should hold them", len(corpus))
	}
	check := []string{"GOCOLL_CHECK=1", "GOCOLL_FALLBACK=silent", "GOCOLL_TIMEOUT=30s"}
	runs := []struct {
		name   string
		n      int
		env    []string
		random int
		args   []string
	}{
		{"check", 1, check, 300, nil},
		{"check", 2, check, 300, nil},
		{"check", 3, check, 300, nil},
		{"check, shm transport", 3, append(check, paths[1].env...), 200, nil},
		{"check, tcp", 3, append(check, paths[2].env...), 200, nil},
		{"no check (C fast path)", 2, []string{"GOCOLL_TIMEOUT=30s", "GOCOLL_REPORT=1"}, 300, []string{"-nocheck"}},
		{"no check (C fast path)", 3, []string{"GOCOLL_TIMEOUT=30s", "GOCOLL_REPORT=1"}, 300, []string{"-nocheck"}},
	}
	for _, r := range runs {
		args := append(append([]string{"-random", strconv.Itoa(r.random), "-seed", strconv.Itoa(fuzzSeed)}, r.args...), corpus...)
		out, code := run(t, 2*time.Minute, r.env, gocollrun(r.n, bin, args...)...)
		what := fmt.Sprintf("collfuzz, %s, %d ranks", r.name, r.n)
		passed := expectRanks(t, what, out, code, r.n)
		t.Logf("%s, %d ranks: %d checks passed", r.name, r.n, passed)
		if slices.Contains(r.env, "GOCOLL_REPORT=1") {
			// The runs meant for the C fast path ran calls there: every
			// rank's report counts fast calls of each collective it has.
			rep := harness.ParseReport(t, out)
			for rank := range r.n {
				for _, call := range []string{"MPI_Allreduce", "MPI_Reduce_scatter_block", "MPI_Allgather"} {
					if rep[rank][call]["fast"] == 0 {
						t.Errorf("%s: rank %d ran no %s on the C fast path: %v", what, rank, call, rep[rank][call])
					}
				}
			}
		}
	}
}
