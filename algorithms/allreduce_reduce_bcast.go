package algorithms

import "github.com/gocoll/gocoll/schedule"

// Reduce-broadcast allreduce: a binomial reduce to rank 0, then a binomial
// broadcast from it.
//
// The binomial tree's partial results cover ranks r..r+2^k-1, so rank 0
// ends with T(0, p), the canonical association, on any p, and every rank
// gets those very bits; rank order is kept. tree_doubling does the same in
// half the rounds for a commutative op; this one serves the others.
//
//	restrictions: none (any p, any count, any op)
//	cost:         2⌈lg p⌉α + 2⌈lg p⌉·nβ + ⌈lg p⌉·nγ
//	memory:       2n elements of scratch
//	wins:         short messages in reproducible mode with a
//	              non-commutative op, when p is not of the form 2^a - 2^b.
//	reference:    the reduce + broadcast allreduce, Thakur, Rabenseifner,
//	              Gropp (2005).
var allreduceReduceBcast = &Algorithm{
	Name:       "reduce_bcast",
	Collective: Allreduce,
	Canonical:  func(Params) bool { return true },
	Summary:    "binomial reduce to rank 0 in the canonical tree, binomial broadcast; canonical on any p",
	Cost:       "2⌈lg p⌉·α + 2⌈lg p⌉·nβ + ⌈lg p⌉·nγ",
	Build: func(pr Params) *schedule.Schedule {
		p, r, n := pr.P, pr.Rank, pr.Count
		all := func(buf buffer) schedule.Range { return buf.At(0, n) }
		if p == 1 {
			return copyOnly(all(in), all(out))
		}
		var b schedule.Builder
		// Reduce phase: every rank keeps its partial result in its output.
		acc := binomialReduce(&b, p, r, all(in), all(out), all(tmp))
		if r == 0 && acc != all(out) {
			b.Round(b.Len()-1).Copy(all(out), acc)
		}
		// Broadcast phase.
		binomialBcast(&b, p, r, 0, all(out))
		return b.Schedule()
	},
}

func init() { register(allreduceReduceBcast) }
