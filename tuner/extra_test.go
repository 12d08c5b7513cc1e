package tuner_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/tuner"
)

// Any candidate can be registered, not only the preload's native: here
// "vendor", which refuses non-commutative ops and which the model, with
// nothing to estimate it by, never picks. Every answer says its source.
func TestExtraCandidate(t *testing.T) {
	errOrder := errors.New("vendor reorders")
	vendor := &tuner.Extra{Name: "vendor", Refuse: func(p algorithms.Params) error {
		if !p.Commutative {
			return errOrder
		}
		return nil
	}}
	rules := []tuner.Rule{{Collective: "allreduce", MaxBytes: 1024, Algorithm: "vendor"}}
	// envvar.Parse lets only envvar.Native through as a name that is
	// not an algorithm; the tuner itself takes its extra candidate's.
	forced := envvar.Settings{Forced: map[algorithms.Collective]string{algorithms.Allgather: "vendor"}, Fallback: tuner.FallbackSilent}
	tu, err := tuner.NewWithOptions(forced, tuner.Options{Extra: vendor, Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		q      tuner.Query
		name   string
		source tuner.Source
	}{
		{query(algorithms.Allreduce, 64, 4, true), "vendor", tuner.FromRule},
		{query(algorithms.Allreduce, 64, 4, false), "", tuner.FromModel}, // refused: the rule is skipped
		{query(algorithms.Allreduce, 1<<20, 4, true), "", tuner.FromModel},
		{query(algorithms.Allgather, 64, 4, true), "vendor", tuner.Forced},
	}
	for _, c := range cases {
		ch, err := tu.Choose(c.q)
		if err != nil || ch.Extra != c.name || ch.Source != c.source || (c.name == "") != (ch.Alg != nil) {
			t.Errorf("%v commutative=%v %d B: %s from %d, %v; want %q from %d", c.q.Collective, c.q.Params.Commutative, c.q.Bytes, ch.Name(), ch.Source, err, c.name, c.source)
		}
	}
	// A forced candidate that refuses the call falls back, saying why,
	// with no string to parse back.
	ch, err := tu.Choose(query(algorithms.Allgather, 64, 4, false))
	if err != nil || !ch.Fallback || ch.Refused != "vendor" || !errors.Is(ch.Refusal, errOrder) || ch.Alg == nil || ch.Source == tuner.Forced {
		t.Errorf("forced vendor, non-commutative: %+v, %v; want a tuned fallback that names vendor's refusal", ch, err)
	}
	if !strings.HasPrefix(ch.How(), "tuned (forced vendor cannot run: vendor reorders)") {
		t.Errorf("How() = %q", ch.How())
	}
	if _, err := tuner.New(forced); err == nil || !strings.Contains(err.Error(), `GOCOLL_ALLGATHER_ALGORITHM=vendor: MPI_Allgather has no algorithm "vendor"`) {
		t.Errorf("vendor accepted by a tuner that did not register it: %v", err)
	}
}
