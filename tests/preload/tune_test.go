package preload

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/tests/internal/harness"
	"github.com/gocoll/gocoll/tuner"
)

// Run-time tuning (preload/tune.go) under the test library, whose
// GOCOLL_TUNE_TEST injects each rank's trial times or a delay in one
// candidate's trials. testdata/tune.c makes tuneN calls of one 64-byte
// MPI_Allreduce and prints where each rank's calls went: the trials
// are tuneK+1 calls of each candidate, the rest the winner's.
const (
	tuneK     = 4
	tuneN     = 60
	tuneCount = 16 // floats: 64 bytes, which both hosts' rules give shm at 2 ranks
)

var (
	tuneRE    = regexp.MustCompile(`(?m)^tune: rank (\d+): host=(\d+) gocoll=(\d+)$`)
	tuneDupRE = regexp.MustCompile(`(?m)^tune: rank (\d+): dup host=(\d+) gocoll=(\d+)$`)
)

// tuneRun runs tune.c on np ranks of m with env, and returns each rank's
// (host, gocoll) calls, failing the test unless every result was right.
func tuneRun(t *testing.T, m hostMPI, np int, env ...string) [][2]int {
	t.Helper()
	got, _ := tuneRunArgs(t, m, np, nil, env...)
	return got
}

// tuneRunArgs is tuneRun with more arguments for tune.c; with "dup" it
// also returns the counts of the calls on the duplicate.
func tuneRunArgs(t *testing.T, m hostMPI, np int, args []string, env ...string) (got, dup [][2]int) {
	t.Helper()
	lib, err := faultLib()
	if err != nil {
		t.Fatal(err)
	}
	prog := compile(t, m.cc, "tune-"+m.name, "tune.c")
	env = append([]string{"LD_PRELOAD=" + lib, fmt.Sprintf("GOCOLL_TUNE_CALLS=%d", tuneK)}, env...)
	what := fmt.Sprintf("%s np=%d %v", m.name, np, env[1:])
	out, code, errs := runRanks(t, what, m, np, env, prog, append([]string{fmt.Sprint(tuneCount), fmt.Sprint(tuneN)}, args...)...)
	c := countsRE.FindStringSubmatch(out)
	if code != 0 || c == nil || c[2] != "0" || c[1] == "0" {
		t.Fatalf("%s: exit %d\n%s\n%s", what, code, out, strings.Join(errs, ""))
	}
	parse := func(re *regexp.Regexp) [][2]int {
		got := make([][2]int, np)
		seen := 0
		for _, l := range re.FindAllStringSubmatch(out, -1) {
			got[atoi(l[1])] = [2]int{atoi(l[2]), atoi(l[3])}
			seen++
		}
		if seen != np {
			t.Fatalf("%s: %d ranks said where their calls went, want %d\n%s", what, seen, np, out)
		}
		return got
	}
	got = parse(tuneRE)
	if len(args) > 0 {
		dup = parse(tuneDupRE)
	}
	t.Logf("%s: (host, gocoll) calls by rank: %v, on the duplicate %v", what, got, dup)
	return got, dup
}

// won checks that every rank made the trials and took winner ("host"
// or "gocoll") for every later call.
func won(t *testing.T, what string, got [][2]int, winner string) {
	t.Helper()
	trials := tuneK + 1
	want := [2]int{trials, tuneN - trials} // gocoll won
	if winner == "host" {
		want = [2]int{tuneN - trials, trials}
	}
	for rank, g := range got {
		if g != want {
			t.Errorf("%s: rank %d ran %d calls on the host and %d in gocoll, want %d and %d (%s wins)", what, rank, g[0], g[1], want[0], want[1], winner)
		}
	}
}

// Ranks whose own timings disagree still route alike: they agree on the
// slowest rank's time of each candidate. Rank 0 alone would pick the
// host and rank 1 gocoll (a tie, 100 µs each at worst: the host keeps
// it), then rank 1 alone the host, rank 0 gocoll (gocoll's worst, 20
// µs, beats the host's, 50 µs).
func TestTuneSkewedTimesRouteAlike(t *testing.T) {
	for _, m := range hostMPIs {
		t.Run(m.name, func(t *testing.T) {
			need(t, m.cc, m.run)
			won(t, "tie", tuneRun(t, m, 2, "GOCOLL_TUNE_TEST=0:1:100,1:100:1"), "host")
			won(t, "gocoll's worst is faster", tuneRun(t, m, 2, "GOCOLL_TUNE_TEST=0:50:10,1:5:20"), "gocoll")
			if m.name == "openmpi" { // MPICH busy-polls: slow oversubscribed
				won(t, "3 ranks", tuneRun(t, m, 3, "GOCOLL_TUNE_TEST=0:5:1,1:5:1,2:1:9"), "host")
			}
		})
	}
}

// A candidate made slower on purpose (20 ms a trial: on a loaded machine
// MPICH's busy-polling calls took over 2 ms) loses, whichever it
// is; GOCOLL_TUNE=off makes no trials.
func TestTuneSlowerCandidateLoses(t *testing.T) {
	for _, m := range hostMPIs {
		t.Run(m.name, func(t *testing.T) {
			need(t, m.cc, m.run)
			won(t, "host slower", tuneRun(t, m, 2, "GOCOLL_TUNE_TEST=host=20000"), "gocoll")
			won(t, "gocoll slower", tuneRun(t, m, 2, "GOCOLL_TUNE_TEST=gocoll=20000"), "host")
			for rank, g := range tuneRun(t, m, 2, "GOCOLL_TUNE=off", "GOCOLL_TUNE_TEST=gocoll=20000") {
				if g[0] != 0 && g[1] != 0 {
					t.Errorf("GOCOLL_TUNE=off: rank %d ran %d calls on the host and %d in gocoll: trials", rank, g[0], g[1])
				}
			}
		})
	}
}

// A verdict is kept for the process: a duplicate of MPI_COMM_WORLD (the
// same shape) takes it without trials, all of its calls the winner's.
func TestTuneKeptForTheProcess(t *testing.T) {
	for _, m := range hostMPIs {
		t.Run(m.name, func(t *testing.T) {
			need(t, m.cc, m.run)
			got, dup := tuneRunArgs(t, m, 2, []string{"dup"}, "GOCOLL_TUNE_TEST=host=20000")
			won(t, "host slower", got, "gocoll")
			for rank, g := range dup {
				if g != [2]int{0, tuneN} {
					t.Errorf("on the duplicate: rank %d ran %d calls on the host and %d in gocoll, want all %d in gocoll, untried", rank, g[0], g[1], tuneN)
				}
			}
		})
	}
}

// GOCOLL_TUNE_SAVE writes the verdict as a tuning file's rule with exact
// ranges; read back with GOCOLL_TUNING_FILE it decides without trials,
// even where a trial would now decide otherwise. GOCOLL_REPRODUCIBLE's
// order-dependent calls (float sums) are never tried on the host.
func TestTuneSavedAndReproducible(t *testing.T) {
	for _, m := range hostMPIs {
		t.Run(m.name, func(t *testing.T) {
			need(t, m.cc, m.run)
			saved := filepath.Join(harness.Work, "tuned-"+m.name+".json")
			os.Remove(saved)
			won(t, "host slower, saved", tuneRun(t, m, 2, "GOCOLL_TUNE_TEST=host=20000", "GOCOLL_TUNE_SAVE="+saved), "gocoll")
			f, err := tuner.ReadTuningFile(saved)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(f.Rules)
			found := false
			for _, r := range f.Rules {
				found = found || (r.Collective == "allreduce" && r.MinBytes <= 4*tuneCount && r.MaxBytes >= 4*tuneCount &&
					r.MinRanks == 2 && r.MaxRanks == 2 && r.MinNodes == 1 && r.MaxNodes == 1 && r.Algorithm != "native")
			}
			if !found || f.Provenance == nil {
				t.Fatalf("%s holds no rule for the tuned allreduce, or no provenance: %s", saved, b)
			}
			for rank, g := range tuneRun(t, m, 2, "GOCOLL_TUNE_TEST=gocoll=20000", "GOCOLL_TUNING_FILE="+saved) {
				if g != [2]int{0, tuneN} {
					t.Errorf("with the saved file: rank %d ran %d calls on the host and %d in gocoll, want all %d in gocoll", rank, g[0], g[1], tuneN)
				}
			}
			for rank, g := range tuneRun(t, m, 2, "GOCOLL_REPRODUCIBLE=1", "GOCOLL_TUNE_TEST=gocoll=20000") {
				if g[0] != 0 {
					t.Errorf("GOCOLL_REPRODUCIBLE=1: rank %d ran %d float sums on the host", rank, g[0])
				}
			}
		})
	}
}
