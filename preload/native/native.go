// Package native is the host MPI's own collective as a candidate of the
// tuner: under LD_PRELOAD, package preload registers it (Candidate, as
// tuner.Options.Extra), so that "native" goes wherever an algorithm name
// goes (GOCOLL_*_ALGORITHM, tuning-file rules, the measured rules), and
// the model weighs it outside the rules. preload/tune, which measures
// the host against gocoll, names it the same way.
package native

import (
	"errors"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/tuner"
)

// Name is the host's collective in rules and GOCOLL_*_ALGORITHM.
const Name = "native"

// Margin is how much faster (by the model) gocoll's best algorithm must
// be than the estimate of the host's, outside the measured rules, for
// LD_PRELOAD mode to choose gocoll: 25%, the accuracy the model is held
// to against measurement at 64 KiB and up (issue 13), so that a choice
// of gocoll outside the measured range is one the model's error cannot
// reverse.
const Margin = 1.25

// textbook are the algorithms the host MPIs implement as well (with their
// own crossovers): the model's estimate of a host collective is the best
// of these.
var textbook = []string{"ring", "recursive_doubling", "rabenseifner", "bruck", "pairwise", "recursive_halving"}

// ErrNotCanonical is why the host cannot run a reproducible call: its
// association is unknown.
var ErrNotCanonical = errors.New("the host MPI's collective does not promise the canonical order that GOCOLL_REPRODUCIBLE=1 asks for")

// Candidate returns the host's collective as the tuner's extra
// candidate. It runs any call but a reproducible one.
func Candidate() *tuner.Extra {
	return &tuner.Extra{
		Name:   Name,
		Called: "the host",
		Refuse: func(p algorithms.Params) error {
			if p.Reproducible {
				return ErrNotCanonical
			}
			return nil
		},
		EstimatedBy: textbook,
		Margin:      Margin,
	}
}
