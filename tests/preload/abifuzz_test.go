package preload

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/gocoll/gocoll/tests/internal/harness"
	"github.com/gocoll/gocoll/tuner"
)

// The C ABI fuzzer (tests/fuzz/abifuzz.c) under the preload, built with
// each host MPI's mpicc: bad input to the calls the preload intercepts
// (MPI_Allreduce, MPI_Reduce_scatter(_block), MPI_Allgather, their _c
// forms), at 1 and 3 ranks, under auto and with gocoll's algorithms
// forced (so that gocoll, not the tuner's native choice, meets every
// call it could take). Each call must return an error and no rank may
// crash or report a panic; each rank judges itself, the launcher's exit
// status combines them.
func TestABIFuzz(t *testing.T) {
	forced := round{name: "forced0", env: append(tuner.ForcedRounds()[0], "GOCOLL_FALLBACK=silent")}
	done := regexp.MustCompile(`(?m)^\d+ passed, 0 failed$`)
	for _, m := range hostMPIs {
		t.Run(m.name, func(t *testing.T) {
			need(t, m.cc, m.run)
			prog := harness.Compile(t, m.cc, "abifuzz-"+m.name, nil, "tests/fuzz/abifuzz.c")
			for _, np := range []int{1, 3} {
				for _, rd := range []round{{name: "auto"}, forced} {
					j := job{mpi: m, np: np, round: rd, prog: prog, args: []string{"-preload", "-random", "2000"}}
					start := time.Now()
					r := launch(t, j)
					t.Logf("%v: %d passed, %d failed, exit %d (%.1fs)", j, r.passed, r.failed, r.code, time.Since(start).Seconds())
					if r.code != 0 || r.failed != 0 || r.passed == 0 || len(done.FindAllString(r.out, -1)) != np {
						t.Errorf("%v: %d passed, %d failed, exit %d, want %d ranks with none failed:\n%s\nstderr:\n%s",
							j, r.passed, r.failed, r.code, np, r.out, tail(r.errs))
					}
					if n := len(gocollRE.FindAllString(r.errs, -1)); rd.name != "auto" && n < np {
						// The valid calls between the bad ones are gocoll's.
						t.Errorf("%v: gocoll ran %d calls, want at least one per rank: was the preload loaded?", j, n)
					}
					if m := panicRE.FindString(r.errs + r.out); m != "" {
						t.Errorf("%v: %q in the output:\n%s", j, m, tail(r.errs))
					}
				}
			}
		})
	}
}

// The intercepted calls before MPI_Init and after MPI_Finalize, each in a
// process of its own: the preload hands them to the host MPI, which ends
// the process (non-zero, no panic).
func TestABIFuzzLifecycle(t *testing.T) {
	env := []string{"LD_PRELOAD=" + preloadLib(),
		// Open MPI's singletons, as root
		"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"}
	for _, m := range hostMPIs {
		t.Run(m.name, func(t *testing.T) {
			need(t, m.cc)
			prog := harness.Compile(t, m.cc, "abifuzz-"+m.name, nil, "tests/fuzz/abifuzz.c")
			out, code := harness.Run(t, 2*time.Minute, env, prog, "lifecycle", "-preload")
			harness.ExpectCounts(t, fmt.Sprintf("%s: abifuzz lifecycle -preload", m.name), out, code)
		})
	}
}

var panicRE = regexp.MustCompile(`panic:|goroutine \d+ \[|fatal error:|internal error`)

// tail is the end of a long output.
func tail(s string) string {
	if len(s) > 4000 {
		return "...\n" + s[len(s)-4000:]
	}
	return s
}
