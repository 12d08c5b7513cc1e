package preload

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/tuner"
)

// The exact checker (testdata/exact.c): every (op, datatype) pair gocoll
// reduces, full unsigned ranges, through MPI_Allreduce,
// MPI_Reduce_scatter_block and MPI_Reduce_scatter, each call also made
// on the host MPI directly; it fails a call whose result is wrong, and a
// call that went to the host (gocoll_test_counter's "<call>.host") where
// the host's own result is wrong. So under auto, where small calls go to
// the host, it fails if the preload lets a pair the host gets wrong
// reach it (docs/preload.md, "Correct where the host is not").

var (
	exactHostWrongRE = regexp.MustCompile(`(?m)^host-wrong (MPI_\w+) (MPI_\w+) (MPI\w+) \d+$`)
	exactProbedRE    = regexp.MustCompile(`(?m)^gocoll: rank 0: host MPI wrong for (MPI\w+) on (MPI\w+): `)
	exactRoutedRE    = regexp.MustCompile(`(?m)^gocoll: rank (\d+): MPI_\w+ -> gocoll \((.*)\)$`)
	exactReportRE    = regexp.MustCompile(`(?m)^gocoll: rank \d+: report: MPI_\w+ .*corrected=(\d+)`)
)

// exactRun is what one run of the checker printed.
type exactRun struct {
	out            string
	errs           []string
	code           int
	passed, failed int
}

func (r exactRun) String() string {
	errs := strings.Join(r.errs, "")
	if len(errs) > 4000 {
		errs = errs[:2000] + "\n...\n" + errs[len(errs)-2000:]
	}
	out := r.out
	if len(out) > 4000 {
		out = out[:2000] + "\n...\n" + out[len(out)-2000:]
	}
	return fmt.Sprintf("exit %d, %d passed, %d failed\nstdout:\n%s\nstderr of the ranks:\n%s", r.code, r.passed, r.failed, out, errs)
}

func runExact(t *testing.T, m hostMPI, np int, env []string, prog string, args ...string) exactRun {
	t.Helper()
	what := fmt.Sprintf("%s np=%d exact %v %v", m.name, np, args, env)
	out, code, errs := runRanks(t, what, m, np, env, prog, args...)
	r := exactRun{out: out, errs: errs, code: code}
	if c := countsRE.FindAllStringSubmatch(out, -1); len(c) > 0 {
		r.passed, r.failed = atoi(c[len(c)-1][1]), atoi(c[len(c)-1][2])
	}
	totals.runs++
	totals.passed += r.passed
	totals.failed += r.failed
	return r
}

// nativeEnv forces the host's own collectives.
func nativeEnv() []string {
	var env []string
	for _, c := range algorithms.Collectives {
		env = append(env, tuner.ForceVar(c)+"=native")
	}
	return env
}

// exactRanks are the rank counts of the auto runs: MPICH busy-polls, so
// above 2 ranks on this machine's 2 cores it runs one, with fewer counts.
var exactRanks = map[string][]int{"openmpi": {1, 2, 3, 4, 5}, "mpich": {1, 2}}

// Under auto, every result exact on both hosts, and calls corrected
// (routed to gocoll because the host is wrong on their pair) counted in
// the finalize report.
func TestExact(t *testing.T) {
	for _, m := range hostMPIs {
		t.Run(m.name, func(t *testing.T) {
			need(t, m.cc, m.run)
			prog := compile(t, m.cc, "exact-"+m.name, "exact.c")
			type run struct {
				np   int
				args []string
			}
			var runs []run
			for _, np := range exactRanks[m.name] {
				runs = append(runs, run{np, nil})
			}
			if m.name == "mpich" {
				runs = append(runs, run{3, []string{"-quick"}}, run{2, []string{"-f16"}})
			}
			for _, rn := range runs {
				r := runExact(t, m, rn.np, []string{"GOCOLL_REPORT=1"}, prog, rn.args...)
				if r.code != 0 || r.failed != 0 || r.passed == 0 {
					t.Errorf("np=%d %v: %v", rn.np, rn.args, r)
					continue
				}
				corrected := 0
				for _, c := range exactReportRE.FindAllStringSubmatch(strings.Join(r.errs, ""), -1) {
					corrected += atoi(c[1])
				}
				t.Logf("np=%d %v: %d passed; %d calls corrected", rn.np, rn.args, r.passed, corrected)
				if rn.np == 2 && corrected == 0 {
					// At 2 ranks the rules give small calls to the host.
					t.Errorf("np=2 %v: no call counted as corrected in the finalize reports:\n%v", rn.args, r)
				}
			}
		})
	}
}

// The host-wrong pairs: under auto with GOCOLL_DEBUG=info each rank lists
// what its probe found and says why a call went to gocoll instead; with
// the host's collectives forced (native, the user's choice, obeyed) the
// checker finds the host's bugs (it can fail), and every pair on which a
// host collective was wrong is one the probe or the table excludes. Rank
// 1 alone also excludes MPI_SUM on MPI_INT (GOCOLL_PRELOAD_EXCLUDE): rank
// 0 must route those calls to gocoll too (the ranks agree).
func TestHostWrongPairs(t *testing.T) {
	// Open MPI's complex products go wrong from 3 ranks on.
	nativeRanks := map[string]int{"openmpi": 3, "mpich": 2}
	for _, m := range hostMPIs {
		t.Run(m.name, func(t *testing.T) {
			need(t, m.cc, m.run)
			prog := compile(t, m.cc, "exact-"+m.name, "exact.c")
			r := runExact(t, m, 2, []string{"GOCOLL_DEBUG=info", "PRELOAD_TEST_EXCLUDE=MPI_SUM:MPI_INT"}, prog)
			if r.code != 0 || r.failed != 0 || r.passed == 0 {
				t.Fatalf("auto: %v", r)
			}
			excluded := map[string]bool{}
			for _, p := range exactProbedRE.FindAllStringSubmatch(r.errs[0], -1) {
				excluded[p[1]+" "+p[2]] = true
			}
			if len(excluded) == 0 {
				t.Fatalf("rank 0 lists no pair its host MPI is wrong on:\n%v", r)
			}
			routed := map[string]int{}
			for _, e := range r.errs {
				for _, l := range exactRoutedRE.FindAllStringSubmatch(e, -1) {
					routed[l[1]+": "+l[2]]++
				}
			}
			for _, want := range []string{"0: GOCOLL_PRELOAD_EXCLUDE names MPI_SUM on MPI_INT on a rank", "1: GOCOLL_PRELOAD_EXCLUDE names MPI_SUM on MPI_INT on a rank"} {
				if routed[want] == 0 {
					t.Errorf("no call of rank %s -> gocoll:\n%v", want, routed)
				}
			}
			hostWrong := 0
			for k, n := range routed {
				if strings.Contains(k, ": host MPI wrong for ") {
					hostWrong += n
				}
			}
			if hostWrong == 0 {
				t.Errorf("no call said `-> gocoll (host MPI wrong for ...)`:\n%v", routed)
			}
			// The pairs the host is right on still go to it where the rules say.
			if n := len(tunedRE.FindAllString(r.errs[0], -1)); n == 0 {
				t.Errorf("rank 0 gave no call to the host MPI (tuned: native)")
			} else {
				t.Logf("rank 0: %d calls to the host (tuned); both ranks: %d to gocoll because the host is wrong", n, hostWrong)
			}

			np := nativeRanks[m.name]
			n := runExact(t, m, np, nativeEnv(), prog)
			found := map[string]bool{}
			for _, w := range exactHostWrongRE.FindAllStringSubmatch(n.out, -1) {
				found[w[2]+" "+w[3]] = true
			}
			totals.failed -= n.failed // failures wanted here
			if n.code != 0 || n.failed == 0 || len(found) == 0 {
				t.Fatalf("native np=%d: the checker found no wrong result of the host's collectives: %v", np, n)
			}
			var missed []string
			for pair := range found {
				if !excluded[pair] {
					missed = append(missed, pair)
				}
			}
			if len(missed) > 0 {
				t.Errorf("native np=%d: the host's collectives are wrong on pairs neither the probe nor the table excludes: %v\nexcluded: %v", np, missed, excluded)
			}
			t.Logf("native np=%d: the host's collectives were wrong on %d pairs, all excluded (%d excluded)", np, len(found), len(excluded))
		})
	}
}

// Each entry of the table of what the probe cannot see (preload/host.go,
// knownWrong), proven against the real host: MPICH 4.0 aborts on
// MPIX_C_FLOAT16's reductions (the checker runs them under auto, in
// TestExact), Open MPI 4.1's collectives multiply complex numbers
// wrongly from 3 ranks on.
func TestHostTable(t *testing.T) {
	for _, m := range hostMPIs {
		t.Run(m.name, func(t *testing.T) {
			need(t, m.cc, m.run)
			prog := compile(t, m.cc, "exact-"+m.name, "exact.c")
			switch m.name {
			case "mpich":
				r := runExact(t, m, 2, append(nativeEnv(), "GOCOLL_DEBUG=info"), prog, "-f16")
				all := r.out + strings.Join(r.errs, "")
				if !strings.Contains(all, "(MPICH Version:\t4.0.") {
					t.Fatalf("not MPICH 4.0: the table's entry does not apply:\n%v", r)
				}
				if r.code == 0 || !strings.Contains(all, "typerep_yaksa_pack.c") {
					t.Errorf("MPICH 4.0 did not abort on MPIX_C_FLOAT16 with its own collectives:\n%v", r)
				}
			case "openmpi":
				r := runExact(t, m, 3, append(nativeEnv(), "GOCOLL_DEBUG=info"), prog)
				totals.failed -= r.failed // failures wanted here
				if !strings.Contains(strings.Join(r.errs, ""), "(Open MPI v4.1.") {
					t.Fatalf("not Open MPI 4.1: the table's entry does not apply:\n%v", r)
				}
				for _, dt := range []string{"MPI_C_FLOAT_COMPLEX", "MPI_C_DOUBLE_COMPLEX", "MPI_C_LONG_DOUBLE_COMPLEX", "MPI_CXX_FLOAT_COMPLEX",
					"MPI_CXX_DOUBLE_COMPLEX", "MPI_CXX_LONG_DOUBLE_COMPLEX", "MPI_COMPLEX", "MPI_DOUBLE_COMPLEX"} {
					if !regexp.MustCompile(`(?m)^host-wrong MPI_\w+ MPI_PROD ` + dt + ` `).MatchString(r.out) {
						t.Errorf("Open MPI's collectives were right on MPI_PROD of %s at 3 ranks", dt)
					}
				}
			}
		})
	}
}
