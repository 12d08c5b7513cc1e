package algorithms

import "github.com/gocoll/gocoll/schedule"

// Binomial reduce-scatter: a binomial reduce of the whole vector to rank 0,
// then a binomial scatter of the blocks from it.
//
// The binomial tree's partial results cover ranks r..r+2^k-1, so rank 0
// ends with T(0, p), the canonical association, on any p. In the scatter
// rank v's subtree is ranks v..v+2^k-1, whose blocks are consecutive: each
// round sends one span; rank order is kept. tree_doubling does the same in
// half the rounds for a commutative op; this one serves the others.
//
//	restrictions: none (any p, irregular counts, any op)
//	cost:         2⌈lg p⌉α + ⌈lg p⌉·nβ + (p-1)/p·nβ + ⌈lg p⌉·nγ
//	memory:       2n elements of scratch
//	wins:         short messages in reproducible mode with a
//	              non-commutative op, when p is not of the form 2^a - 2^b.
var reduceScatterBinomial = &Algorithm{
	Name:       "binomial",
	Collective: ReduceScatter,
	Canonical:  func(Params) bool { return true },
	Summary:    "binomial reduce of the vector to rank 0 in the canonical tree, binomial scatter of the blocks; canonical on any p",
	Cost:       "2⌈lg p⌉·α + ⌈lg p⌉·nβ + (p-1)/p·nβ + ⌈lg p⌉·nγ",
	Build: func(pr Params) *schedule.Schedule {
		bl := pr.Blocks()
		p, r, n := pr.P, pr.Rank, bl.Total
		result := out.At(0, bl.Counts[r])
		if p == 1 {
			return copyOnly(in.Block(bl, 0), result)
		}
		var b schedule.Builder
		b.Scratch(n)
		// Reduce phase: rank 0 ends with the whole vector in scratch.
		acc := binomialReduce(&b, p, r, in.At(0, n), tmp.At(0, n), tmp.At(n, n))
		// Scatter phase: rank v holds the blocks of its subtree at their
		// places in scratch and hands the upper half on.
		hold := acc
		top := ceilPow2(p)
		for mask := top / 2; mask >= 1; mask /= 2 {
			rb := b.Next()
			switch {
			case r%(2*mask) == 0 && r+mask < p:
				rb.Send(r+mask, hold.Sub(bl.Displs[r+mask]-bl.Displs[r], tmp.Span(bl, r+mask, min(r+2*mask, p)).Len))
			case r%(2*mask) == mask:
				hold = tmp.Span(bl, r, min(r+mask, p))
				rb.Recv(r-mask, hold)
			}
		}
		b.Round(b.Len()-1).Copy(result, hold.Sub(0, bl.Counts[r]))
		return b.Schedule()
	},
}

func init() {
	register(reduceScatterBinomial, blockVariant(reduceScatterBinomial))
}
