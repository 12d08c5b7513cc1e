package tuner_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/preload/native"
	"github.com/gocoll/gocoll/tuner"
)

// Standalone tuners know no host MPI: "native" is an unknown algorithm,
// forced or in a tuning file.
func TestNativeRejectedStandalone(t *testing.T) {
	if _, err := newTuner(env("GOCOLL_ALLREDUCE_ALGORITHM", "native")); err == nil || !strings.Contains(err.Error(), "GOCOLL_ALLREDUCE_ALGORITHM") {
		t.Errorf("forced native accepted standalone: %v", err)
	}
	path := filepath.Join(t.TempDir(), "rules.json")
	os.WriteFile(path, []byte(`{"rules": [{"collective": "allgather", "algorithm": "native"}]}`), 0o644)
	if _, err := newTuner(env("GOCOLL_TUNING_FILE", path)); err == nil {
		t.Error("native rule accepted standalone")
	}
	if _, err := tuner.ReadFile(path); err == nil {
		t.Error("ReadFile accepted a native rule")
	}
}

// In preload mode native can be forced, named by rules (Options.Rules
// after the tuning file; no defaults: outside the rules the model
// decides, and it keeps the host unless gocoll wins by native.Margin), and
// never fails a restriction.
func TestNativePreload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.json")
	os.WriteFile(path, []byte(`{"rules": [{"collective": "allreduce", "min_bytes": 1000, "max_bytes": 2000, "algorithm": "ring"}]}`), 0o644)
	opts := tuner.Options{Extra: native.Candidate(), Rules: []tuner.Rule{
		{Collective: "allreduce", MaxBytes: 4096, Algorithm: "native"},
		{Collective: "allgather", MinRanks: 3, Algorithm: "native"},
	}}
	tu, err := newTunerOpts(env("GOCOLL_TUNING_FILE", path, "GOCOLL_REDUCE_SCATTER_ALGORITHM", "native"), opts)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		c     algorithms.Collective
		bytes int64
		p     int
		comm  bool
		want  string
		how   string
	}{
		{algorithms.Allreduce, 8, 4, true, "native", "tuned"},
		{algorithms.Allreduce, 8, 4, false, "native", "tuned"},
		{algorithms.Allreduce, 1500, 4, true, "ring", "tuned"},          // the file first
		{algorithms.Allreduce, 1500, 4, false, "native", "tuned"},       // ring cannot: next rule
		{algorithms.Allreduce, 1 << 20, 4, true, "native", "tuned"},     // no defaults: the model, the host's estimate
		{algorithms.Allgather, 64, 2, true, "native", "tuned"},          // below min_ranks: the model
		{algorithms.Allgather, 64, 3, true, "native", "tuned"},          // options rule
		{algorithms.ReduceScatter, 64, 4, false, "native", "forced"},    // forced, any op
		{algorithms.ReduceScatterBlock, 64, 4, true, "native", "tuned"}, // not forced: the model
	}
	for _, tc := range cases {
		ch, err := tu.Choose(query(tc.c, tc.bytes, tc.p, tc.comm))
		if err != nil || ch.Name() != tc.want || ch.How() != tc.how || (ch.Extra == native.Name) != (tc.want == "native") {
			t.Errorf("%v %d bytes p=%d commutative=%v: got %s (%s) %v, want %s (%s)", tc.c, tc.bytes, tc.p, tc.comm, ch.Name(), ch.How(), err, tc.want, tc.how)
		}
	}
	// A per-call force of native works too.
	q := query(algorithms.Allgather, 1<<20, 2, true)
	q.Force = "native"
	if ch, _ := tu.Choose(q); ch.Extra != native.Name || ch.How() != "forced" {
		t.Errorf("per-call native: got %s (%s)", ch.Name(), ch.How())
	}
	// Bad option rules are errors.
	if _, err := newTunerOpts(env(), tuner.Options{Rules: []tuner.Rule{{Collective: "allreduce", Algorithm: "native"}}}); err == nil {
		t.Error("native rule accepted without Options.Extra")
	}
	if _, err := newTunerOpts(env(), tuner.Options{Extra: native.Candidate(), Rules: []tuner.Rule{{Collective: "bcast", Algorithm: "native"}}}); err == nil {
		t.Error("unknown collective accepted in Options.Rules")
	}
}
