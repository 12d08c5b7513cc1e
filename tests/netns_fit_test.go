package tests

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/internal/netns"
	"github.com/gocoll/gocoll/tests/internal/harness"
	"github.com/gocoll/gocoll/tuner"
)

// The in-job fit of the machine (coll/fit.go) on 2 emulated hosts of 4
// ranks whose links tc tbf limits to 1 Gbit/s, then 200 Mbit/s, a job
// per rate: collbench's 1 MiB allreduce with no tuning file is the first
// call the model decides across hosts, so every rank fits the machine
// there. The fit must recover the link's beta (8 and 40 ns/B: one byte
// each way at the rate) within fitTolerance, within its budget, and auto
// must then take the model's choice on the fitted machine (the one the
// tuner makes with the machine the job saved, GOCOLL_FIT_SAVE), for the
// allreduce and the 1 MiB reduce_scatter after it; the reduce_scatter's
// is not ring, model.Default's choice, that the same job takes with
// GOCOLL_FIT=0. A next job given the saved machine (GOCOLL_TUNING_FILE)
// does not fit and chooses alike.
func TestNetnsInJobFit(t *testing.T) {
	if testing.Short() {
		t.Skip("emulated hosts at two rates: about a minute")
	}
	bin := compile(t, harness.Bin+"/mpicc", "bench/collbench.c", "collbench")
	for _, rc := range []struct {
		rate string
		beta float64 // seconds per byte
	}{{"1gbit", 8e-9}, {"200mbit", 40e-9}} {
		t.Run(rc.rate, func(t *testing.T) {
			c, err := netns.New(2, rc.rate)
			if errors.Is(err, netns.ErrNoNamespaces) {
				noHosts(t, err.Error())
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			launch := c.Exec(0, harness.Bin+"/gocollrun", "-n", "8", "--host", c.Hosts[0]+":4,"+c.Hosts[1]+":4",
				"--launcher", "ip netns exec %h", "--bind", c.Addrs[0], bin, "-c", "allreduce,reduce_scatter", "-m", "1048576:1048576",
				"-i", "2", "-il", "2", "-w", "1", "-wl", "1")
			saved := filepath.Join(t.TempDir(), "machine.json")
			job := func(what string, env ...string) string {
				out, code := run(t, 2*time.Minute, append(env, "GOCOLL_DEBUG=info"), launch...)
				if code != 0 {
					t.Fatalf("%s: exit %d\n%s", what, code, out)
				}
				return out
			}

			out := job("with the fit", "GOCOLL_FIT_SAVE="+saved)
			fitted := regexp.MustCompile(`(?m)^gocoll: rank 0: MPI_COMM_WORLD: machine fitted in the job at MPI_Allreduce of 1048576 B \(the model chose \w+ across 2 nodes\): alpha ([\d.]+) µs, beta ([\d.]+) ns/B.*the fit took ([\d.]+)(µs|ms|s)$`).FindStringSubmatch(out)
			if fitted == nil {
				t.Fatalf("no fit on rank 0:\n%s", out)
			}
			if n := strings.Count(out, "MPI_COMM_WORLD: machine fitted in the job at MPI_Allreduce"); n != 8 {
				t.Errorf("%d ranks fitted the machine, want 8", n)
			}
			t.Logf("%s: %s", rc.rate, grep(out, "gocoll: rank 0: "+"MPI_COMM_WORLD: machine", "gocoll: rank 0:   "))
			beta, _ := strconv.ParseFloat(fitted[2], 64)
			if beta*1e-9 < rc.beta*(1-fitTolerance) || beta*1e-9 > rc.beta*(1+fitTolerance) {
				t.Errorf("beta %.3f ns/B, want %.1f within %.0f%%", beta, rc.beta*1e9, 100*fitTolerance)
			}
			cost, _ := time.ParseDuration(fitted[3] + fitted[4])
			if cost > fitLimit {
				t.Errorf("the fit took %v, want at most %v", cost, fitLimit)
			}
			f, err := tuner.ReadTuningFile(saved)
			if err != nil || f.Machine == nil {
				t.Fatalf("the saved machine: %v, %+v", err, f)
			}
			base, err := tuner.New(envvar.Settings{})
			if err != nil {
				t.Fatal(err)
			}
			nodes := algorithms.BlockNodeMap(8, 4)
			calls := []struct {
				name string
				q    tuner.Query
			}{
				{"MPI_Allreduce", tuner.Query{Collective: algorithms.Allreduce, Bytes: 1 << 20,
					Params: algorithms.Params{P: 8, Count: 1 << 18, Commutative: true, Nodes: nodes}}},
				{"MPI_Reduce_scatter", tuner.Query{Collective: algorithms.ReduceScatter, Bytes: 1 << 20,
					Params: algorithms.Params{P: 8, Counts: []int{1 << 15, 1 << 15, 1 << 15, 1 << 15, 1 << 15, 1 << 15, 1 << 15, 1 << 15}, Commutative: true, Nodes: nodes}}},
			}
			chose := map[string]string{}
			for _, c := range calls {
				chose[c.name] = choiceAt(t, out, c.name, 1048576)
				want, err := base.WithMachine(f.Machine.Model()).Choose(c.q)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: auto chose %s for %s of 1 MiB after the fit (%s)", rc.rate, chose[c.name], c.name, want.Why)
				if chose[c.name] != want.Alg.Name {
					t.Errorf("auto chose %s for %s of 1 MiB after the fit; the model on the saved machine chooses %s (%s)", chose[c.name], c.name, want.Alg.Name, want.Why)
				}
			}
			if chose["MPI_Reduce_scatter"] == "ring" {
				t.Errorf("the fitted machine chose ring for the reduce_scatter, as model.Default does")
			}

			out = job("GOCOLL_FIT=0", "GOCOLL_FIT=0")
			if strings.Contains(out, "machine fitted") || choiceAt(t, out, "MPI_Reduce_scatter", 1048576) != "ring" {
				t.Errorf("GOCOLL_FIT=0: a fit, or not ring for the reduce_scatter of 1 MiB:\n%s", out)
			}
			out = job("the saved machine", "GOCOLL_TUNING_FILE="+saved)
			for _, c := range calls {
				if strings.Contains(out, "machine fitted") || choiceAt(t, out, c.name, 1048576) != chose[c.name] {
					t.Errorf("with the saved machine as the tuning file: a fit, or not %s for %s:\n%s", chose[c.name], c.name, out)
				}
			}
		})
	}
}

// fitTolerance is how close the in-job fit's beta must come to the
// emulated link's; fitLimit bounds the fit's time (its budget, 150 ms,
// plus the agreement, the local timings and the last exchange it
// committed; 8 ranks on the 2-core machine).
const (
	fitTolerance = 0.15
	fitLimit     = 300 * time.Millisecond
)

// choiceAt returns the algorithm rank 0's GOCOLL_DEBUG=info line says its
// call (MPI_Allreduce) of bytes ran.
func choiceAt(t *testing.T, out, call string, bytes int) string {
	t.Helper()
	m := regexp.MustCompile(fmt.Sprintf(`(?m)^gocoll: rank 0: %s comm=MPI_COMM_WORLD bytes=%d p=8 algorithm=(\w+)`, call, bytes)).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %s of %d B on rank 0:\n%s", call, bytes, out)
	}
	return m[1]
}

// grep returns the lines of text that start with one of prefixes.
func grep(text string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
