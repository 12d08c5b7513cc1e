package preload

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/tests/internal/harness"
	"github.com/gocoll/gocoll/tuner"
)

// The tests of this file run the configuration users run: without
// GOCOLL_DEBUG, so through the C half's per-communicator decision cache,
// which GOCOLL_DEBUG=info bypasses. What happened is read from the
// library's counters, through gocoll_test_counter (testdata/paths.c
// checks each phase of its calls) and GOCOLL_REPORT=1's lines at
// MPI_Finalize, and compared with what GOCOLL_DEBUG=info says of the
// same program.

// pathsRules is the tuning file of testdata/paths.c (see its comment).
const pathsRules = `{"rules": [
	{"collective": "allreduce", "max_bytes": 256, "algorithm": "native"},
	{"collective": "allreduce", "min_bytes": 257, "algorithm": "ring"},
	{"collective": "allreduce", "min_bytes": 257, "algorithm": "recursive_doubling"},
	{"collective": "reduce_scatter", "max_bytes": 256, "algorithm": "native"},
	{"collective": "reduce_scatter", "min_bytes": 257, "algorithm": "ring"},
	{"collective": "reduce_scatter", "min_bytes": 257, "algorithm": "pairwise"},
	{"collective": "reduce_scatter_block", "max_bytes": 256, "algorithm": "native"},
	{"collective": "reduce_scatter_block", "min_bytes": 257, "algorithm": "ring"},
	{"collective": "reduce_scatter_block", "min_bytes": 257, "algorithm": "pairwise"},
	{"collective": "allgather", "max_bytes": 256, "algorithm": "native"},
	{"collective": "allgather", "min_bytes": 257, "algorithm": "shm"},
	{"collective": "allgather", "min_bytes": 257, "algorithm": "native"}
]}`

// counts are one rank's counters of one collective, by key (go, ring,
// fallback, host, cached, ...).
type counts map[string]int

// pathsRun is what one run of paths printed.
type pathsRun struct {
	out    string
	code   int
	errs   []string            // standard error, by rank
	report []map[string]counts // GOCOLL_REPORT lines, by rank and call
	query  []map[string]counts // paths.c's totals, by rank and call
	fast   []map[string]int    // the report's fast= (before foldFast), by rank and call
	engine []map[string]counts // paths.c's engine lines, by rank and call
}

// foldFast counts the report's fast calls (small shm calls the engine's C
// half ran without entering Go) as what they are, gocoll's shm calls: in
// go and in shm, as GOCOLL_DEBUG=info's lines (which come from Go, so
// under it the engine runs nothing) and paths.c's query (go + fast) count
// them. It returns the fast counts it folded, by call.
func foldFast(rep map[string]counts) map[string]int {
	fast := map[string]int{}
	for call, c := range rep {
		if n := c["fast"]; n > 0 {
			c["go"] += n
			c["shm"] += n
			fast[call] = n
		}
		delete(c, "fast")
	}
	return fast
}

var (
	reportRE = regexp.MustCompile(`(?m)^gocoll: rank (\d+): report: (MPI_\w+) ((?:fast=\d+ )?go=\d+(?: \w+=\d+)*)$`)
	engineRE = regexp.MustCompile(`(?m)^paths: rank (\d+): engine: (MPI_\w+) (fast=\d+ remembered=\d+)$`)
	queryRE  = regexp.MustCompile(`(?m)^paths: rank (\d+): query: (MPI_\w+) (go=\d+(?: \w+=\d+)*)$`)
	debugRE  = regexp.MustCompile(`(?m)^gocoll: rank \d+: (MPI_\w+) comm=\S+ bytes=\d+ p=\d+ algorithm=(\w+) \((.*)$`)
	hostLnRE = regexp.MustCompile(`(?m)^gocoll: rank -?\d+: (MPI_\w+) -> host MPI \((.*)$`)
)

// parseCounts reads the lines of re (rank, call, key=value ...) of rank.
func parseCounts(re *regexp.Regexp, text string, rank int) (map[string]counts, error) {
	m := map[string]counts{}
	for _, l := range re.FindAllStringSubmatch(text, -1) {
		if atoi(l[1]) != rank {
			return nil, fmt.Errorf("rank %d's standard error has a line of rank %s: %s", rank, l[1], l[0])
		}
		if m[l[2]] != nil {
			return nil, fmt.Errorf("rank %d: two lines for %s", rank, l[2])
		}
		c := counts{}
		for _, kv := range strings.Fields(l[3]) {
			k, v, _ := strings.Cut(kv, "=")
			c[k] = atoi(v)
		}
		m[l[2]] = c
	}
	return m, nil
}

// launchPaths runs paths (or another program) under the preload with
// GOCOLL_REPORT=1 and env, without GOCOLL_DEBUG unless env sets it.
func launchPaths(t *testing.T, m hostMPI, np int, env []string, prog string, args ...string) pathsRun {
	t.Helper()
	env = append([]string{"GOCOLL_REPORT=1"}, env...)
	out, code, errs := runRanks(t, fmt.Sprintf("%s np=%d %v", m.name, np, env), m, np, env, prog, args...)
	r := pathsRun{out: out, code: code, errs: errs}
	for rank, b := range errs {
		rep, err := parseCounts(reportRE, b, rank)
		if err != nil {
			t.Fatal(err)
		}
		q, err := parseCounts(queryRE, b, rank)
		if err != nil {
			t.Fatal(err)
		}
		eng, err := parseCounts(engineRE, b, rank)
		if err != nil {
			t.Fatal(err)
		}
		r.engine = append(r.engine, eng)
		r.fast = append(r.fast, foldFast(rep))
		r.report = append(r.report, rep)
		r.query = append(r.query, q)
	}
	return r
}

// fail describes a run for a failed check.
func (r pathsRun) dump() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr of the ranks:\n%s", r.code, r.out, strings.Join(r.errs, "--\n"))
}

// passedOnEveryRank checks every rank's verdict line and the exit status.
func (r pathsRun) passedOnEveryRank(np int) error {
	for rank := range np {
		m := regexp.MustCompile(fmt.Sprintf(`(?m)^rank %d: (\d+) passed, (\d+) failed$`, rank)).FindStringSubmatch(r.out)
		if m == nil || atoi(m[1]) == 0 || atoi(m[2]) != 0 {
			return fmt.Errorf("rank %d: no passing verdict", rank)
		}
	}
	if r.code != 0 {
		return fmt.Errorf("exit status %d", r.code)
	}
	return nil
}

// String prints counts in the report's order.
func (c counts) String() string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, c[k])
	}
	return strings.TrimSpace(b.String())
}

// withoutCached returns c less its cached key.
func (c counts) withoutCached() counts {
	d := counts{}
	for k, v := range c {
		if k != "cached" && v != 0 {
			d[k] = v
		}
	}
	return d
}

func (c counts) equal(d counts) bool {
	for k, v := range c {
		if d[k] != v {
			return false
		}
	}
	for k, v := range d {
		if c[k] != v {
			return false
		}
	}
	return true
}

// reportMatchesQuery checks that GOCOLL_REPORT's lines say what
// gocoll_test_counter said at the program's end, and that the report's
// algorithms add up to its go.
func (r pathsRun) reportMatchesQuery() error {
	for rank := range r.report {
		if len(r.query[rank]) != 4 {
			return fmt.Errorf("rank %d: %d query lines, want 4", rank, len(r.query[rank]))
		}
		for call, q := range r.query[rank] {
			rep := r.report[rank][call]
			any := false
			for _, v := range q {
				any = any || v != 0
			}
			if !any {
				if rep != nil {
					return fmt.Errorf("rank %d: a report line for %s, whose counters are zero: %v", rank, call, rep)
				}
				continue
			}
			if rep == nil {
				return fmt.Errorf("rank %d: no report line for %s (query: %v)", rank, call, q)
			}
			algs := 0
			for k, v := range rep {
				switch k {
				case "go", "fallback", "host", "cached":
					if q[k] != v {
						return fmt.Errorf("rank %d: %s: report %s=%d, query %d", rank, call, k, v, q[k])
					}
				default:
					algs += v
				}
			}
			if algs != rep["go"] {
				return fmt.Errorf("rank %d: %s: the algorithms' counts add up to %d, go=%d", rank, call, algs, rep["go"])
			}
		}
	}
	return nil
}

// debugCounts counts one rank's GOCOLL_DEBUG=info lines as the report
// counts calls: go and each algorithm from gocoll's lines, host from the
// host's, fallback from both (a forced algorithm that could not run).
func debugCounts(errs string) map[string]counts {
	m := map[string]counts{}
	get := func(call string) counts {
		if m[call] == nil {
			m[call] = counts{}
		}
		return m[call]
	}
	for _, l := range debugRE.FindAllStringSubmatch(errs, -1) {
		c := get(l[1])
		c["go"]++
		c[l[2]]++
		if strings.HasPrefix(l[3], "tuned (forced ") {
			c["fallback"]++
		}
	}
	for _, l := range hostLnRE.FindAllStringSubmatch(errs, -1) {
		c := get(l[1])
		c["host"]++
		if strings.HasPrefix(l[2], "tuned: native") && strings.Contains(l[2], "; forced ") {
			c["fallback"]++
		}
	}
	return m
}

// pathsProgram compiles testdata/paths.c with m's compiler.
func pathsProgram(t *testing.T, m hostMPI) string {
	t.Helper()
	need(t, m.cc, m.run)
	return compile(t, m.cc, "paths-"+m.name, "paths.c")
}

// pathsTuning writes the tuning file of paths.c.
func pathsTuning(t *testing.T) string {
	t.Helper()
	f := filepath.Join(harness.Work, "paths-rules.json")
	if err := os.WriteFile(f, []byte(pathsRules), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// comparePaths runs paths in mode with env, without and with
// GOCOLL_DEBUG=info, and checks both runs: paths.c's own checks of every
// phase (the cached counts included), the report against the program's
// query, the debug lines against the debug run's report, and the two
// runs' reports against each other (equal but for cached, which only the
// run without debug has).
func comparePaths(t *testing.T, m hostMPI, np int, env []string, mode string) (plain, debug pathsRun) {
	t.Helper()
	prog := pathsProgram(t, m)
	plain = launchPaths(t, m, np, env, prog, mode)
	debug = launchPaths(t, m, np, append(env[:len(env):len(env)], "GOCOLL_DEBUG=info"), prog, mode)
	what := fmt.Sprintf("%s np=%d %s %v", m.name, np, mode, env)
	for _, run := range []struct {
		name string
		r    pathsRun
	}{{"without GOCOLL_DEBUG", plain}, {"with GOCOLL_DEBUG=info", debug}} {
		if err := run.r.passedOnEveryRank(np); err != nil {
			t.Fatalf("%s, %s: %v\n%s", what, run.name, err, run.r.dump())
		}
		if err := run.r.reportMatchesQuery(); err != nil {
			t.Fatalf("%s, %s: %v\n%s", what, run.name, err, run.r.dump())
		}
	}
	for rank := range np {
		if n := len(debugRE.FindAllString(plain.errs[rank], -1)) + len(hostLnRE.FindAllString(plain.errs[rank], -1)); n != 0 {
			t.Errorf("%s: rank %d printed %d debug lines without GOCOLL_DEBUG", what, rank, n)
		}
		lines := debugCounts(debug.errs[rank])
		calls := map[string]bool{}
		for call := range lines {
			calls[call] = true
		}
		for call := range debug.report[rank] {
			calls[call] = true
		}
		for call := range plain.report[rank] {
			calls[call] = true
		}
		for call := range calls {
			rep, dbg, pl := debug.report[rank][call], lines[call], plain.report[rank][call]
			if rep["cached"] != 0 {
				t.Errorf("%s: rank %d: %s: %d calls cached under GOCOLL_DEBUG=info, which bypasses the cache", what, rank, call, rep["cached"])
			}
			if !rep.withoutCached().equal(dbg) {
				t.Errorf("%s: rank %d: %s: GOCOLL_DEBUG=info's lines say %v, its report %v", what, rank, call, dbg, rep)
			}
			if !pl.withoutCached().equal(rep.withoutCached()) {
				t.Errorf("%s: rank %d: %s: without GOCOLL_DEBUG the report says %v, with it %v", what, rank, call, pl, rep)
			}
		}
		t.Logf("%s: rank %d: %v", what, rank, plain.report[rank])
	}
	return plain, debug
}

// Which calls gocoll runs, which the host MPI runs, and which decisions
// come from the decision cache, around a communicator's setup (which
// empties the cache); the same with GOCOLL_DEBUG=info, but for the cache
// and the engine's C half, which runs small shm calls only without it.
func TestPathsCached(t *testing.T) {
	rules := pathsTuning(t)
	for _, m := range hostMPIs {
		t.Run(m.name, func(t *testing.T) {
			for _, np := range []int{2, 3} {
				plain, _ := comparePaths(t, m, np, []string{"GOCOLL_TUNING_FILE=" + rules}, "tuned")
				// What paths.c's phases add up to, per rank: the report
				// says the same.
				want := map[string]string{
					"MPI_Allreduce":            "cached=23 go=15 host=27 recursive_doubling=5 ring=10",
					"MPI_Allgather":            "cached=11 go=10 host=5 shm=10",
					"MPI_Reduce_scatter":       "cached=8 go=5 host=5 ring=5",
					"MPI_Reduce_scatter_block": "cached=8 go=5 host=5 ring=5",
				}
				for rank := range np {
					for call, w := range want {
						if got := plain.report[rank][call].String(); got != w {
							t.Errorf("%s np=%d: rank %d: report %s %s, want %s", m.name, np, rank, call, got, w)
						}
					}
					// The ten shm allgathers (2 KiB a rank) are small enough
					// for the engine's C half: all but the first on a new
					// communicator, which sets it up in Go and runs there.
					// Of the nine, the second on the new communicator and
					// the first on the other are decided on the slow path;
					// the other seven match the last call and skip it.
					if got := plain.fast[rank]["MPI_Allgather"]; got != 9 || len(plain.fast[rank]) != 1 {
						t.Errorf("%s np=%d: rank %d: fast calls %v, want 9 MPI_Allgather only", m.name, np, rank, plain.fast[rank])
					}
					if got := plain.engine[rank]["MPI_Allgather"].String(); got != "fast=9 remembered=7" {
						t.Errorf("%s np=%d: rank %d: paths.c says MPI_Allgather %s, want fast=9 remembered=7", m.name, np, rank, got)
					}
				}
			}
		})
	}
}

// Before a communicator is set up, the tuner assumes that its ranks share
// a host; on emulated hosts it learns otherwise at the setup, which
// empties the decision cache: the large allgathers it first gave shm go
// to the host MPI, the first one too, and the cache then holds native.
func TestPathsCacheResetAtSetup(t *testing.T) {
	rules := pathsTuning(t)
	for _, m := range hostMPIs {
		t.Run(m.name, func(t *testing.T) {
			plain, _ := comparePaths(t, m, 2, []string{"GOCOLL_TUNING_FILE=" + rules, "PRELOAD_TEST_HOSTS=2"}, "tuned")
			for rank := range 2 {
				if got, want := plain.report[rank]["MPI_Allgather"].String(), "cached=11 go=0 host=15"; got != want {
					t.Errorf("%s: rank %d: report MPI_Allgather %s, want %s", m.name, rank, got, want)
				}
			}
		})
	}
}

// A forced algorithm runs every call it can, by name: each of
// tuner.ForcedRounds, so every algorithm of every collective, at 2 ranks
// (and the first round at 3). With allreduce forced to ring,
// non-commutative calls fall back to the tuner's choice, counted as
// fallbacks.
func TestForcedByName(t *testing.T) {
	rules := pathsTuning(t)
	for _, m := range hostMPIs {
		t.Run(m.name, func(t *testing.T) {
			prog := pathsProgram(t, m)
			for i, round := range tuner.ForcedRounds() {
				for _, np := range []int{2, 3} {
					if np == 3 && i > 0 {
						continue
					}
					env := append([]string{"GOCOLL_TUNING_FILE=" + rules, "GOCOLL_FALLBACK=silent"}, round...)
					r := launchPaths(t, m, np, env, prog, "forced")
					what := fmt.Sprintf("%s np=%d %v", m.name, np, round)
					if err := r.passedOnEveryRank(np); err != nil {
						t.Fatalf("%s: %v\n%s", what, err, r.dump())
					}
					if err := r.reportMatchesQuery(); err != nil {
						t.Fatalf("%s: %v\n%s", what, err, r.dump())
					}
					for _, kv := range round {
						v, name, _ := strings.Cut(kv, "=")
						var call string
						for _, c := range algorithms.Collectives {
							if tuner.ForceVar(c) == v {
								call = c.String()
							}
						}
						for rank := range np {
							rep := r.report[rank][call]
							// Every call ran in gocoll with the forced
							// algorithm, but the fallbacks: those ran the
							// tuner's choice, another algorithm or the host
							// (paths.c's calls in this mode go to the host
							// only by falling back).
							if rep[name] == 0 || rep[name]+rep["fallback"]-rep["host"] != rep["go"] {
								t.Errorf("%s: rank %d: %s forced to %s: report %v", what, rank, call, name, rep)
							}
						}
					}
				}
			}
		})
	}
}

// GOCOLL_FALLBACK=error: a call the forced algorithm cannot run fails
// with MPI_ERR_ARG through the communicator's error handler, and nothing
// runs it (testdata/paths.c, mode error).
func TestForcedFallbackError(t *testing.T) {
	rules := pathsTuning(t)
	for _, m := range hostMPIs {
		t.Run(m.name, func(t *testing.T) {
			env := []string{"GOCOLL_TUNING_FILE=" + rules, "GOCOLL_FALLBACK=error", "GOCOLL_ALLREDUCE_ALGORITHM=ring"}
			plain, _ := comparePaths(t, m, 2, env, "error")
			for rank := range 2 {
				if got, want := plain.report[rank]["MPI_Allreduce"].String(), "cached=8 go=10 ring=10"; got != want {
					t.Errorf("%s: rank %d: report MPI_Allreduce %s, want %s", m.name, rank, got, want)
				}
				if n := strings.Count(plain.errs[rank], "forced algorithm cannot run this call (GOCOLL_FALLBACK=error)"); n != 5 {
					t.Errorf("%s: rank %d: %d refusals reported, want 5:\n%s", m.name, rank, n, plain.errs[rank])
				}
			}
		})
	}
}

// forcedByName checks the GOCOLL_DEBUG=info lines of a run with forced
// algorithms (env): each call gocoll ran says the forced algorithm, or
// says that the forced algorithm, by name, could not run it; so does each
// call the tuner gave the host.
func forcedByName(env []string, errs string) error {
	forced := map[string]string{}
	for _, kv := range env {
		v, name, _ := strings.Cut(kv, "=")
		for _, c := range algorithms.Collectives {
			if tuner.ForceVar(c) == v && name != "auto" && name != "" {
				forced[c.String()] = name
			}
		}
	}
	for _, l := range debugRE.FindAllStringSubmatch(errs, -1) {
		name := forced[l[1]]
		if name == "" {
			continue
		}
		switch how := l[3]; {
		case strings.HasPrefix(how, "forced)"):
			if l[2] != name {
				return fmt.Errorf("%s forced to %s ran %s: %s", l[1], name, l[2], l[0])
			}
		case strings.HasPrefix(how, "tuned (forced "+name+" cannot run: "):
		default:
			return fmt.Errorf("%s forced to %s: %s", l[1], name, l[0])
		}
	}
	for _, l := range hostLnRE.FindAllStringSubmatch(errs, -1) {
		name := forced[l[1]]
		if name == "" || !strings.HasPrefix(l[2], "tuned: native") {
			continue
		}
		if !strings.Contains(l[2], "; forced "+name+" cannot run: ") {
			return fmt.Errorf("%s forced to %s: %s", l[1], name, l[0])
		}
	}
	return nil
}

// The engine's C half runs the small calls of the shm algorithm without
// entering Go (the report's fast=), on the same segment as the Go half,
// which runs the larger ones: testdata/coll.c's checked results, with
// every collective forced to shm and without GOCOLL_DEBUG (under which
// every call comes to Go), over both MPIs at 2 and 3 ranks. Its types
// the C kernels do not reduce, its user-defined ops and its 64-bit
// counts go to Go on some ranks while its small calls of the same
// communicator go to the engine on others only if the two halves agree
// on the protocol; they must.
func TestEngineRunsSmallShmCalls(t *testing.T) {
	var env []string
	for _, c := range algorithms.Collectives {
		env = append(env, tuner.ForceVar(c)+"=shm")
	}
	env = append(env, "GOCOLL_FALLBACK=silent")
	for _, m := range hostMPIs {
		t.Run(m.name, func(t *testing.T) {
			prog := compile(t, m.cc, "coll-engine-"+m.name, "coll.c")
			for _, np := range []int{2, 3} {
				r := launchPaths(t, m, np, env, prog, "-quick")
				what := fmt.Sprintf("%s np=%d", m.name, np)
				if !regexp.MustCompile(`(?m)^\d+ passed, 0 failed$`).MatchString(r.out) || r.code != 0 {
					t.Fatalf("%s: %s", what, r.dump())
				}
				for rank := range np {
					for _, c := range algorithms.Collectives {
						rep := r.report[rank][c.String()]
						if r.fast[rank][c.String()] == 0 || rep["go"] <= r.fast[rank][c.String()] {
							t.Errorf("%s: rank %d: %s: %d calls in the engine's C half, report %v: want some there and some in Go",
								what, rank, c, r.fast[rank][c.String()], rep)
						}
					}
				}
			}
		})
	}
}
