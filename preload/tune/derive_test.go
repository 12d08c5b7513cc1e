package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/preload/native"
	"github.com/gocoll/gocoll/tuner"
)

// measure builds one rank count's samples from per-size times.
func measure(times map[string][]float64, sizes []int64) map[string]map[string]map[int64][]float64 {
	out := map[string]map[string]map[int64][]float64{}
	for _, c := range collectives {
		cols := map[string]map[int64][]float64{}
		for name, ts := range times {
			cols[name] = map[int64][]float64{}
			for i, b := range sizes {
				cols[name][b] = []float64{ts[i], ts[i] * 1.01, ts[i] * 0.99}
			}
		}
		out[c.bench] = cols
	}
	return out
}

// The host wins small sizes, a restricted algorithm (shm: one host only)
// larger ones, with the best unrestricted algorithm or the host behind it;
// a margin keeps near-ties with the host, and the previous size's winner
// when it is within the margin of the fastest.
func TestDerive(t *testing.T) {
	*margin = 0.1
	sizes := []int64{8, 16, 32, 64, 128}
	data := map[int]map[string]map[string]map[int64][]float64{
		2: measure(map[string][]float64{
			"native":             {1, 1, 10, 10, 10},
			"shm":                {2, 0.95, 5, 5, 5}, // 0.95: within the margin of the host at 16 B
			"recursive_doubling": {3, 3, 8, 20, 20},  // beats the host at 32 B only
			"ring":               {3, 3, 30, 4.9, 3}, // commutative only; 4.9: a near-tie with shm
		}, sizes),
		4: measure(map[string][]float64{"native": {1, 1, 1, 1, 1}, "shm": {2, 2, 2, 2, 2}}, sizes),
	}
	rules := derive(data, []int{2, 4})
	var allreduce []tuner.Rule
	for _, r := range rules {
		if r.Collective == "allreduce" {
			allreduce = append(allreduce, r)
		}
	}
	want := []tuner.Rule{
		{Collective: "allreduce", MaxBytes: 24, MaxRanks: 2, MaxNodes: 1, Algorithm: "native"},
		{Collective: "allreduce", MinBytes: 25, MaxBytes: 48, MaxRanks: 2, MaxNodes: 1, Algorithm: "shm"},
		{Collective: "allreduce", MinBytes: 25, MaxBytes: 48, MaxRanks: 2, MaxNodes: 1, Algorithm: "recursive_doubling"},
		{Collective: "allreduce", MinBytes: 49, MaxBytes: 96, MaxRanks: 2, MaxNodes: 1, Algorithm: "shm"},
		{Collective: "allreduce", MinBytes: 49, MaxBytes: 96, MaxRanks: 2, MaxNodes: 1, Algorithm: "native"},
		{Collective: "allreduce", MinBytes: 97, MaxRanks: 2, MaxNodes: 1, Algorithm: "ring"},
		{Collective: "allreduce", MinBytes: 97, MaxRanks: 2, MaxNodes: 1, Algorithm: "native"},
		{Collective: "allreduce", MinRanks: 3, MaxRanks: 4, MaxNodes: 1, Algorithm: "native"},
	}
	if len(allreduce) != len(want) {
		t.Fatalf("got %d rules, want %d:\n%+v", len(allreduce), len(want), allreduce)
	}
	for i := range want {
		if allreduce[i] != want[i] {
			t.Errorf("rule %d: got %+v, want %+v", i, allreduce[i], want[i])
		}
	}
	// Reduce_scatter copies reduce_scatter_block's, and every rule names
	// an algorithm the tuner accepts.
	var rs, rsb int
	for _, r := range rules {
		switch r.Collective {
		case "reduce_scatter":
			rs++
		case "reduce_scatter_block":
			rsb++
		}
	}
	if rs == 0 || rs != rsb {
		t.Errorf("%d reduce_scatter rules for %d reduce_scatter_block ones", rs, rsb)
	}
	if _, err := tuner.NewWithOptions(envvar.Settings{}, tuner.Options{Extra: native.Candidate(), Rules: rules}); err != nil {
		t.Errorf("the tuner refuses the rules: %v", err)
	}
}

// -np gives every MPI its rank counts, -np-of one MPI its own; bad
// values are errors naming the flag.
func TestRankCounts(t *testing.T) {
	mpis := []hostMPI{hostMPIs["openmpi"], hostMPIs["mpich"]}
	defer func(np, of string) { *npFlag, *npOf = np, of }(*npFlag, *npOf)
	*npFlag, *npOf = "4,2", "mpich=2"
	got, err := rankCounts(mpis)
	if err != nil || fmt.Sprint(got) != "map[mpich:[2] openmpi:[2 4]]" {
		t.Errorf("-np 4,2 -np-of mpich=2: %v, %v", got, err)
	}
	if w := npWords(mpis, got); w != "np=2,4 (openmpi), np=2 (mpich)" {
		t.Errorf("npWords: %q", w)
	}
	for _, c := range []struct{ np, of, want string }{
		{"1,2", "", "-np"}, {"2", "mpich=x", "-np-of"}, {"2", "lam=2", "-np-of"}, {"2", "mpich", "-np-of"},
	} {
		*npFlag, *npOf = c.np, c.of
		if _, err := rankCounts(mpis); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("-np %s -np-of %s: %v, want an error naming %s", c.np, c.of, err, c.want)
		}
	}
}

// What -save writes, -load reads back unchanged.
func TestSavedRoundTrip(t *testing.T) {
	s := samples{}
	s.add("mpich", 2, "allreduce", "shm", 8, 0.5)
	s.add("mpich", 2, "allreduce", "native", 8, 0.75)
	in := saved{MPIs: []string{"mpich"}, NPs: map[string][]int{"mpich": {2}}, Reps: 3, MaxSize: 1 << 20,
		Machine: machine{CPU: "a CPU", Cores: 2, Date: "2026-12-02"}, Samples: s}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out saved
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip:\n%+v\n%+v", in, out)
	}
}

// results/preload-tune.json, what -save wrote, loads as -load reads it,
// its provenance included.
func TestResultsLoad(t *testing.T) {
	b, err := os.ReadFile("../../results/preload-tune.json")
	if err != nil {
		t.Fatal(err)
	}
	var sv saved
	if err := json.Unmarshal(b, &sv); err != nil {
		t.Fatal(err)
	}
	if sv.Provenance.Command == "" || sv.Provenance.Commit == "" || sv.Provenance.Machine == "" {
		t.Errorf("provenance %+v", sv.Provenance)
	}
	if len(sv.MPIs) == 0 || len(sv.Samples) == 0 || sv.Machine.CPU == "" {
		t.Errorf("MPIs %v, %d samples, machine %+v", sv.MPIs, len(sv.Samples), sv.Machine)
	}
}
