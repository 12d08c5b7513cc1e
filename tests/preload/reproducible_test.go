package preload

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/tests/internal/harness"
)

// GOCOLL_REPRODUCIBLE=1 under the preload (tests/c/reproducible.c, built
// with each host's mpicc): every floating-point sum and product comes to
// gocoll (the host's order is unknown: the finalize report counts no call
// on the host) and each rank's results are the canonical association bit
// for bit, as the program checks, at np = 2..5 over Open MPI and 2..3 over
// MPICH (which busy-polls on 2 cores). A forced native falls back (it
// cannot promise the order), and fails the call with GOCOLL_FALLBACK=error.
func TestReproducible(t *testing.T) {
	ranks := map[string][]int{"openmpi": {2, 3, 4, 5}, "mpich": {2, 3}}
	for _, m := range hostMPIs {
		t.Run(m.name, func(t *testing.T) {
			need(t, m.cc, m.run)
			prog := harness.Compile(t, m.cc, "reproducible-"+m.name, []string{"-lm"}, "tests/c/reproducible.c")
			for _, np := range ranks[m.name] {
				for _, env := range [][]string{{}, nativeEnv()} {
					what := fmt.Sprintf("np=%d %v", np, env)
					env = append(env, "GOCOLL_REPRODUCIBLE=1", "GOCOLL_REPORT=1", "GOCOLL_FALLBACK=silent")
					out, code, errs := runRanks(t, what, m, np, env, prog)
					all := out + strings.Join(errs, "")
					harness.ExpectRanks(t, what, out, code, np)
					rep := harness.ParseReport(t, all)
					for r := range np {
						for _, call := range []string{"MPI_Allreduce", "MPI_Reduce_scatter", "MPI_Reduce_scatter_block"} {
							if n := rep[r][call]["host"]; n != 0 || rep[r][call]["go"]+rep[r][call]["fast"] == 0 {
								t.Errorf("%s: rank %d: %s: %v; want every call gocoll's", what, r, call, rep[r][call])
							}
						}
					}
				}
			}
			env := append(nativeEnv(), "GOCOLL_REPRODUCIBLE=1", "GOCOLL_FALLBACK=error")
			out, code, errs := runRanks(t, "native forced, GOCOLL_FALLBACK=error", m, 2, env, prog)
			if all := out + strings.Join(errs, ""); code == 0 || !strings.Contains(all, "canonical order") {
				t.Errorf("native forced with GOCOLL_FALLBACK=error in reproducible mode: exit %d, want a failure naming the canonical order:\n%s", code, all)
			}
		})
	}
}
