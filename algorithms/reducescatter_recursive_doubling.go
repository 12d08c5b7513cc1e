package algorithms

import "github.com/gocoll/gocoll/schedule"

// Recursive-doubling reduce-scatter, the order-preserving one.
//
// The partners are 1, 2, 4, ... ranks away, so every round combines two
// aligned groups of consecutive ranks and reducing the lower group on the
// left keeps rank order: this is the reduce-scatter for non-commutative
// ops. Each round still halves the data exchanged; to make the halves
// contiguous, every rank first copies its input into scratch with the
// blocks in bit-reversed order (after the rounds, rank i holds slot
// bitReverse(i), which is then its own block). Non-powers of two fold in
// pairs first, lower rank on the left, and unfold at the end.
//
//	restrictions: none (any p, irregular counts, any op)
//	cost:         lg p alpha + (p-1)/p n beta + (p-1)/p n gamma, plus a
//	              local copy of n; two more rounds and n more beta when p
//	              is not a power of two
//	memory:       1.5n elements of scratch (2n when p is not a power of two)
//	wins:         non-commutative ops on short and medium messages.
//	reference:    the bit-reversed layout follows MPICH's non-commutative
//	              reduce_scatter_block (Thakur, Rabenseifner, Gropp 2005).
var reduceScatterRecursiveDoubling = &Algorithm{
	Name:       "recursive_doubling",
	Collective: ReduceScatter,
	Summary:    "partners 1, 2, 4, ... away over a bit-reversed copy; keeps rank order",
	Cost:       "lg p·α + (p-1)/p·n(β+γ)",
	Canonical:  foldCanonical,
	Build: func(pr Params) *schedule.Schedule {
		return halvingReduceScatter(pr, true)
	},
}

func init() {
	register(reduceScatterRecursiveDoubling, blockVariant(reduceScatterRecursiveDoubling))
}
