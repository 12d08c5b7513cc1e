package algorithms_test

import (
	"math/rand/v2"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/check"
)

// reducing returns the collectives whose algorithms say whether they are
// canonical.
func reducing() []algorithms.Collective {
	return []algorithms.Collective{algorithms.Allreduce, algorithms.ReduceScatter, algorithms.ReduceScatterBlock, algorithms.Reduce}
}

// canonicalCases returns the calls checked at p ranks: counts around the
// block and segment boundaries, uneven recvcounts with zeros.
func canonicalCases(c algorithms.Collective, p int, rng *rand.Rand) []algorithms.Params {
	var out []algorithms.Params
	for _, n := range []int{0, 1, p - 1, p, p + 1, 2*p + 1, 1003} {
		switch c {
		case algorithms.Allreduce, algorithms.Reduce:
			out = append(out, algorithms.Params{P: p, Count: n, Root: n % p})
		default:
			for _, counts := range recvcounts(c, p, n/p+n%2, rng) {
				out = append(out, algorithms.Params{P: p, Counts: counts})
			}
		}
	}
	return out
}

// Every schedule algorithm that says it computes the canonical association
// T(0, p) does, and one that does not say so does not (at a count where
// every rank combines something): Canonical is exactly what the check
// proves.
func TestCanonicalEveryAlgorithm(t *testing.T) {
	for _, c := range reducing() {
		for _, a := range algorithms.All(c) {
			if a.Direct {
				continue
			}
			t.Run(c.EnvName()+"/"+a.Name, func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(3, uint64(len(a.Name))))
				for p := 1; p <= 64; p++ {
					for _, params := range canonicalCases(c, p, rng) {
						for _, inPlace := range []bool{false, true} {
							params.Commutative, params.InPlace, params.Reproducible = true, inPlace, true
							if !a.Reproducible(params) {
								continue
							}
							if err := check.Canonical(a, params); err != nil {
								t.Fatalf("%s: %v", describe(params), err)
							}
						}
					}
					// Tight: where it does not say so, it does not.
					params := algorithms.Params{P: p, Count: 2*p + 1, Commutative: true}
					if c != algorithms.Allreduce && c != algorithms.Reduce {
						params.Count, params.Counts = 0, make([]int, p)
						for i := range params.Counts {
							params.Counts[i] = 2
						}
					}
					if !a.Reproducible(params) && check.Canonical(a, params) == nil {
						t.Errorf("p=%d: computes T(0,p) but does not say so", p)
					}
				}
			})
		}
	}
}

// Every reducing collective has, at every p, a schedule algorithm that may
// run in reproducible mode.
func TestCanonicalAlgorithmAtEveryP(t *testing.T) {
	for _, c := range reducing() {
		for p := 1; p <= 1024; p++ {
			params := algorithms.Params{P: p, Count: p, Commutative: true, Reproducible: true}
			if c == algorithms.ReduceScatter || c == algorithms.ReduceScatterBlock {
				params.Count, params.Counts = 0, make([]int, p)
			}
			ok := false
			for _, a := range algorithms.All(c) {
				ok = ok || !a.Direct && a.Check(params) == nil
			}
			if !ok {
				t.Errorf("%s at p=%d: no algorithm computes T(0,p)", c, p)
			}
		}
	}
}
