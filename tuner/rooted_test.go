package tuner_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/preload/native"
	"github.com/gocoll/gocoll/tuner"
)

// The rooted collectives go through the tuner like the others: with one
// algorithm each the choice is Only, unless GOCOLL_<C>_ALGORITHM forces
// it; whatever the size, ranks, node shape or rules.
func TestRootedChoices(t *testing.T) {
	tu, err := newTuner(env())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range algorithms.Rooted {
		all := algorithms.All(c)
		if len(all) != 1 {
			t.Fatalf("%v has %d algorithms; this test expects one", c, len(all))
		}
		for _, p := range []int{1, 2, 3, 8, 13} {
			for _, bytes := range []int64{0, 8, 1 << 20} {
				for _, commutative := range []bool{true, false} {
					q := query(c, bytes, p, commutative)
					q.Params.Reproducible = c == algorithms.Reduce
					ch, err := tu.Choose(q)
					if err != nil || ch.Alg != all[0] || ch.Source != tuner.Only || ch.How() != "only algorithm" || ch.Fallback {
						t.Errorf("%v p=%d %d B: %+v, %v; want %s, only algorithm", c, p, bytes, ch, err, all[0].Name)
					}
				}
			}
		}
	}
	forced, err := newTuner(env("GOCOLL_BCAST_ALGORITHM", "binomial", "GOCOLL_REDUCE_ALGORITHM", "auto", "GOCOLL_GATHER_ALGORITHM", "linear"))
	if err != nil {
		t.Fatal(err)
	}
	for c, want := range map[algorithms.Collective]tuner.Source{algorithms.Bcast: tuner.Forced, algorithms.Reduce: tuner.Only, algorithms.Gather: tuner.Forced} {
		ch, err := forced.Choose(query(c, 64, 4, true))
		if err != nil || ch.Source != want || ch.Alg == nil || ch.Alg.Collective != c {
			t.Errorf("%v: %+v, %v; want source %d", c, ch, err, want)
		}
		if want == tuner.Forced && (forced.Forced(c) != ch.Alg.Name || ch.How() != "forced") {
			t.Errorf("%v: Forced() = %q, How() = %q", c, forced.Forced(c), ch.How())
		}
	}
}

// A bad forced name of a rooted collective fails like the others', naming
// the variable and the valid names; native, the host's collective, is no
// candidate for them even in the preload's tuner.
func TestRootedForcedValidation(t *testing.T) {
	for _, tc := range [][3]string{
		{"GOCOLL_BCAST_ALGORITHM", "ring", "binomial"},
		{"GOCOLL_REDUCE_ALGORITHM", "rabenseifner", "binomial"},
		{"GOCOLL_GATHER_ALGORITHM", "bogus", "linear"},
		{"GOCOLL_GATHER_ALGORITHM", "native", "linear"},
	} {
		_, err := newTunerOpts(env(tc[0], tc[1]), tuner.Options{Extra: native.Candidate()})
		if err == nil || !strings.Contains(err.Error(), tc[0]+"="+tc[1]) || !strings.Contains(err.Error(), "(valid: "+tc[2]+")") {
			t.Errorf("%s=%s: %v", tc[0], tc[1], err)
		}
		// Settings made by hand, not by envvar.Parse: the tuner checks too.
		s := envvar.Settings{Forced: map[algorithms.Collective]string{}}
		for _, c := range algorithms.Rooted {
			if tuner.ForceVar(c) == tc[0] {
				s.Forced[c] = tc[1]
			}
		}
		_, err = tuner.NewWithOptions(s, tuner.Options{Extra: native.Candidate()})
		if err == nil || !strings.Contains(err.Error(), tc[0]+"="+tc[1]) {
			t.Errorf("hand-made %s=%s: %v", tc[0], tc[1], err)
		}
	}
	// A per-call name is checked as well.
	tu, _ := newTuner(env())
	q := query(algorithms.Bcast, 8, 4, true)
	q.Force = "ring"
	if _, err := tu.Choose(q); err == nil || !strings.Contains(err.Error(), "binomial") {
		t.Errorf("per-call ring for MPI_Bcast: %v", err)
	}
}

// The rooted collectives' only algorithm is chosen without warnings, in
// the preload's tuner (with native registered) as in gocoll's.
func TestRootedInPreloadTuner(t *testing.T) {
	tu, err := newTunerOpts(env(), tuner.Options{Extra: native.Candidate()})
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	tu.SetLog(&log)
	for _, c := range algorithms.Rooted {
		ch, err := tu.Choose(query(c, 1<<10, 4, true))
		if err != nil || ch.Extra != "" || ch.Source != tuner.Only {
			t.Errorf("%v: %+v, %v", c, ch, err)
		}
	}
	if log.Len() != 0 {
		t.Errorf("log: %q", log.String())
	}
}
