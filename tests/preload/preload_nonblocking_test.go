package preload

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/tests/internal/harness"
	"github.com/gocoll/gocoll/tuner"
)

// The nonblocking and persistent collectives under the preload, on both
// hosts at 1 to 4 ranks: tests/c/preload_nonblocking.c checks, with the
// preload's counters, that gocoll ran every MPI_I* call and persistent
// start as a request when its algorithms are forced (gocoll), that the
// host's PMPI_I* and PMPI_*_init ran them when native is (native), and
// that a blocking call made while requests are in flight is not run by
// the engine's C half (shm); tests/c/nonblocking.c, the standalone
// library's test of every form and completion call, runs unchanged.

// forceAll forces alg for every collective.
func forceAll(alg string) []string {
	var env []string
	for _, c := range algorithms.Collectives {
		env = append(env, tuner.ForceVar(c)+"="+alg)
	}
	return env
}

var rankCountsRE = regexp.MustCompile(`(?m)^rank (\d+): (\d+) passed, (\d+) failed$`)

// expectPassed fails the test unless each of np ranks printed its line
// with no failure and the job exited 0.
func expectPassed(t *testing.T, what, out string, code int, errs []string, np int) {
	t.Helper()
	ranks := map[string]bool{}
	for _, m := range rankCountsRE.FindAllStringSubmatch(out, -1) {
		if m[3] != "0" || m[2] == "0" {
			t.Errorf("%s: rank %s: %s passed, %s failed", what, m[1], m[2], m[3])
		}
		ranks[m[1]] = true
	}
	if code != 0 || len(ranks) != np {
		t.Errorf("%s: exit status %d, %d of %d ranks reported\n%s\n%s", what, code, len(ranks), np, out, strings.Join(errs, "\n"))
	}
	for r, e := range errs {
		if strings.Contains(e, "FAIL") {
			t.Errorf("%s: rank %d:\n%s", what, r, e)
		}
	}
}

func TestNonblockingCounters(t *testing.T) {
	for _, m := range hostMPIs {
		need(t, m.cc, m.run)
		prog := compileC(t, m.cc, "preload_nonblocking-"+m.name, "preload_nonblocking.c")
		for np := 1; np <= 4; np++ {
			modes := []struct {
				name string
				env  []string
			}{
				{"gocoll", forceAll("ring")},
				{"native", forceAll("native")},
			}
			if np >= 2 {
				modes = append(modes, struct {
					name string
					env  []string
				}{"shm", append(forceAll("ring"), tuner.ForceVar(algorithms.Allreduce)+"=shm")})
			}
			if m.name == "mpich" {
				// MPICH's blocking calls cannot move gocoll's requests
				// (no progress hook): without the progress thread the
				// forms go to MPICH, with it to gocoll.
				modes = append(modes, struct {
					name string
					env  []string
				}{"native", forceAll("ring")})
				for i := range modes[:len(modes)-1] {
					modes[i].env = append(slices.Clone(modes[i].env), "GOCOLL_PROGRESS_THREAD=1")
				}
			}
			for _, mode := range modes {
				what := fmt.Sprintf("%s np=%d %s %v", m.name, np, mode.name, mode.env)
				env := append([]string{"PRELOAD_EXPECT=" + mode.name}, mode.env...)
				out, code, errs := runRanks(t, what, m, np, env, prog)
				expectPassed(t, what, out, code, errs, np)
			}
		}
	}
}

// TestNonblockingForms runs the standalone library's test of every
// nonblocking and persistent form under the preload: gocoll forced, and
// native on Open MPI (MPICH 4.0's own persistent allgather and its
// MPI_Testall on persistent collectives fail that test without the
// preload, at 2 ranks and more).
func TestNonblockingForms(t *testing.T) {
	for _, m := range hostMPIs {
		need(t, m.cc, m.run)
		prog := compileC(t, m.cc, "nonblocking-"+m.name, "nonblocking.c")
		for np := 1; np <= 4; np++ {
			envs := map[string][]string{"gocoll": forceAll("ring"),
				"mixed": {tuner.ForceVar(algorithms.Allreduce) + "=ring"}}
			if m.name == "openmpi" || np == 1 {
				envs["native"] = forceAll("native")
			}
			for name, env := range envs {
				if m.name == "mpich" && name == "mixed" && np == 2 {
					continue // MPICH's persistent allgather, as above
				}
				if m.name == "mpich" && name != "native" {
					env = append(slices.Clone(env), "GOCOLL_PROGRESS_THREAD=1") // as in TestNonblockingCounters
				}
				what := fmt.Sprintf("%s np=%d %s nonblocking.c", m.name, np, name)
				out, code, errs := runRanks(t, what, m, np, env, prog)
				expectPassed(t, what, out, code, errs, np)
			}
		}
	}
}

// compileC builds a program of tests/c once per compiler.
func compileC(t *testing.T, compiler, name, src string) string {
	t.Helper()
	return harness.Compile(t, compiler, name, nil, filepath.Join("tests", "c", src))
}
