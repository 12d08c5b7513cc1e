package tuner_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/tuner"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// newTuner is tuner.New of the settings getenv parses to, as gocoll
// makes one: envvar.Parse's errors come first.
func newTuner(getenv func(string) string) (*tuner.Tuner, error) {
	return newTunerOpts(getenv, tuner.Options{})
}

func newTunerOpts(getenv func(string) string, opts tuner.Options) (*tuner.Tuner, error) {
	s, err := envvar.Parse(getenv)
	if err != nil {
		return nil, err
	}
	return tuner.NewWithOptions(s, opts)
}

func query(c algorithms.Collective, bytes int64, p int, commutative bool) tuner.Query {
	return tuner.Query{Collective: c, Bytes: bytes, Params: algorithms.Params{P: p, Commutative: commutative}}
}

// The defaults never pick an algorithm whose restrictions fail, for any
// collective, size and rank count, and always pick something.
func TestDefaultsRespectRestrictions(t *testing.T) {
	tu, err := newTuner(env())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range algorithms.Collectives {
		for _, p := range []int{1, 2, 3, 4, 7, 8, 64, 1000, 1024} {
			for _, b := range []int64{0, 8, 1 << 10, 8 << 10, 8<<10 + 1, 1 << 20, 1 << 30} {
				for _, comm := range []bool{true, false} {
					q := query(c, b, p, comm)
					ch, err := tu.Choose(q)
					if err != nil {
						t.Fatalf("%v %d bytes p=%d: %v", c, b, p, err)
					}
					if err := ch.Alg.Check(q.Params); err != nil {
						t.Errorf("%v %d bytes p=%d commutative=%v: picked %s: %v", c, b, p, comm, ch.Alg.Name, err)
					}
					if ch.How() != "tuned" {
						t.Errorf("how = %q, want tuned", ch.How())
					}
				}
			}
		}
	}
}

func TestForceByEnvironment(t *testing.T) {
	tu, err := newTuner(env("GOCOLL_ALLREDUCE_ALGORITHM", "ring", "GOCOLL_ALLGATHER_ALGORITHM", "auto"))
	if err != nil {
		t.Fatal(err)
	}
	ch, _ := tu.Choose(query(algorithms.Allreduce, 8, 4, true))
	if ch.Alg.Name != "ring" || ch.How() != "forced" {
		t.Errorf("got %s (%s), want ring (forced)", ch.Alg.Name, ch.How())
	}
	// A per-call force wins over the environment.
	q := query(algorithms.Allreduce, 8, 4, true)
	q.Force = "rabenseifner"
	if ch, _ := tu.Choose(q); ch.Alg.Name != "rabenseifner" {
		t.Errorf("per-call force: got %s", ch.Alg.Name)
	}
	if ch, _ := tu.Choose(query(algorithms.Allgather, 8, 4, true)); ch.How() != "tuned" {
		t.Errorf("auto: got %s (%s), want a tuned choice", ch.Alg.Name, ch.How())
	}
}

func TestUnknownAlgorithmListsValidNames(t *testing.T) {
	_, err := newTuner(env("GOCOLL_REDUCE_SCATTER_ALGORITHM", "bogus"))
	if err == nil {
		t.Fatal("unknown algorithm accepted")
	}
	for _, want := range []string{"GOCOLL_REDUCE_SCATTER_ALGORITHM", "bogus", "pairwise", "recursive_halving", "ring", "recursive_doubling"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	tu, _ := newTuner(env())
	q := query(algorithms.Allgather, 8, 4, true)
	q.Force = "nope"
	if _, err := tu.Choose(q); err == nil || !strings.Contains(err.Error(), "bruck") {
		t.Errorf("per-call unknown name: %v", err)
	}
}

// A forced algorithm that cannot run the call falls back to the tuned
// choice: warn says so once on stderr, silent does not, error fails.
func TestFallbackPolicies(t *testing.T) {
	for _, policy := range []string{"", "warn", "silent", "error"} {
		tu, err := newTuner(env("GOCOLL_ALLREDUCE_ALGORITHM", "ring", "GOCOLL_FALLBACK", policy))
		if err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		tu.SetLog(&log)
		for range 3 {
			ch, err := tu.Choose(query(algorithms.Allreduce, 1<<20, 4, false))
			if policy == "error" {
				if err == nil || !strings.Contains(err.Error(), "commutative") {
					t.Errorf("error policy: got %v", err)
				}
				continue
			}
			if err != nil || ch.Alg.Commutative {
				t.Fatalf("%q: got %v, %v; want an order-preserving algorithm", policy, ch.Alg, err)
			}
			if !strings.Contains(ch.How(), "forced ring cannot run") {
				t.Errorf("how = %q", ch.How())
			}
		}
		lines := strings.Count(log.String(), "\n")
		switch policy {
		case "", "warn":
			if lines != 1 || !strings.Contains(log.String(), "needs a commutative op") {
				t.Errorf("warn: %d lines: %q", lines, log.String())
			}
		default:
			if lines != 0 {
				t.Errorf("%s: unexpected output %q", policy, log.String())
			}
		}
	}
	if _, err := newTuner(env("GOCOLL_FALLBACK", "loud")); err == nil {
		t.Error("GOCOLL_FALLBACK=loud accepted")
	}
}

func TestTuningFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.json")
	os.WriteFile(path, []byte(`{"rules": [
		{"collective": "allreduce", "min_bytes": 100, "max_bytes": 1000, "min_ranks": 3, "algorithm": "ring"},
		{"collective": "allgather", "power_of_two": true, "algorithm": "bruck"}
	]}`), 0o644)
	tu, err := newTuner(env("GOCOLL_TUNING_FILE", path))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		c     algorithms.Collective
		bytes int64
		p     int
		comm  bool
		want  string
	}{
		{algorithms.Allreduce, 500, 4, true, "ring"},
		{algorithms.Allreduce, 50, 4, true, "recursive_doubling"},   // below min_bytes: defaults
		{algorithms.Allreduce, 500, 2, true, "recursive_doubling"},  // below min_ranks
		{algorithms.Allreduce, 500, 4, false, "recursive_doubling"}, // ring cannot: next rule
		{algorithms.Allgather, 1 << 30, 8, true, "bruck"},
		{algorithms.Allgather, 1 << 30, 6, true, "ring"},
	}
	for _, tc := range cases {
		ch, err := tu.Choose(query(tc.c, tc.bytes, tc.p, tc.comm))
		if err != nil || ch.Alg.Name != tc.want {
			t.Errorf("%v %d bytes p=%d: got %v %v, want %s", tc.c, tc.bytes, tc.p, ch.Alg, err, tc.want)
		}
	}
	for name, body := range map[string]string{
		"syntax":     `{"rules": [`,
		"collective": `{"rules": [{"collective": "bcast", "algorithm": "ring"}]}`,
		"algorithm":  `{"rules": [{"collective": "allreduce", "algorithm": "bruck"}]}`,
		"field":      `{"rules": [{"collective": "allreduce", "algorithm": "ring", "max_byte": 3}]}`,
	} {
		os.WriteFile(path, []byte(body), 0o644)
		if _, err := newTuner(env("GOCOLL_TUNING_FILE", path)); err == nil || !strings.Contains(err.Error(), "GOCOLL_TUNING_FILE") {
			t.Errorf("bad file (%s): got %v", name, err)
		}
	}
	if _, err := newTuner(env("GOCOLL_TUNING_FILE", filepath.Join(dir, "missing.json"))); err == nil {
		t.Error("missing tuning file accepted")
	}
}

// Every host algorithm of every collective is forced in exactly one
// round, and no CUDA-only one.
func TestForcedRoundsCoverEveryAlgorithm(t *testing.T) {
	rounds := tuner.ForcedRounds()
	for _, c := range algorithms.Collectives {
		seen := map[string]int{}
		for _, env := range rounds {
			for _, kv := range env {
				if v, ok := strings.CutPrefix(kv, tuner.ForceVar(c)+"="); ok {
					seen[v]++
				}
			}
		}
		for _, a := range algorithms.All(c) {
			if a.OnHost() && seen[a.Name] == 0 {
				t.Errorf("%v: %s is never forced", c, a.Name)
			}
			if !a.OnHost() && seen[a.Name] != 0 {
				t.Errorf("%v: %s, CUDA memory's only, is forced on host memory", c, a.Name)
			}
		}
		if max := len(algorithms.HostNames(c)); len(rounds) < max {
			t.Errorf("%v: %d rounds for %d algorithms", c, len(rounds), max)
		}
	}
}
