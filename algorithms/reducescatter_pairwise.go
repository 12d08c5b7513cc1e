package algorithms

import "github.com/gocoll/gocoll/schedule"

// Pairwise-exchange reduce-scatter.
//
// In round k (1 <= k < p) every rank sends its input block for rank r+k
// directly to that rank and receives rank r-k's contribution to its own
// block. Contributions arrive from ranks r-1, r-2, ..., 0, then p-1, ...,
// r+1; the first run is folded in on the left of this rank's own input and
// the second kept apart in a right-hand accumulator, so the result is
// x0 op x1 op ... op x(p-1) in rank order and non-commutative ops work too.
//
//	restrictions: none (any p, irregular counts, any op)
//	cost:         (p-1) alpha + (p-1)/p n beta + (p-1)/p n gamma
//	memory:       three blocks of scratch (received, left and right
//	              accumulators)
//	wins:         large messages, and non-commutative ops at any size when
//	              p is small: every round talks to a different peer, so no
//	              data is forwarded twice.
//	reference:    Thakur, Rabenseifner, Gropp (2005), section 4.4.
var reduceScatterPairwise = &Algorithm{
	Name:       "pairwise",
	Collective: ReduceScatter,
	Summary:    "send each rank its block directly, one peer per round",
	Cost:       "(p-1)α + (p-1)/p·n(β+γ)",
	Build: func(pr Params) *schedule.Schedule {
		bl := pr.Blocks()
		p, r := pr.P, pr.Rank
		c := bl.Counts[r]
		result := out.At(0, c)
		if p == 1 {
			return copyOnly(in.Block(bl, 0), result)
		}
		var b schedule.Builder
		b.Scratch(3 * c)
		got, left, right := tmp.At(0, c), tmp.At(c, c), tmp.At(2*c, c)
		leftSoFar := in.Block(bl, r) // x_s op ... op x_r, s falling
		for k := 1; k < p; k++ {
			from := mod(r-k, p)
			rb := b.Next().Send(mod(r+k, p), in.Block(bl, mod(r+k, p)))
			switch {
			case from < r: // left of this rank: prepend
				rb.Recv(from, got).Reduce(left, got, leftSoFar)
				leftSoFar = left
			case from == p-1: // the first one right of this rank
				rb.Recv(from, right)
			default: // prepend to the right-hand accumulator
				rb.Recv(from, got).Reduce(right, got, right)
			}
		}
		last := b.Round(b.Len() - 1)
		if r == p-1 {
			last.Copy(result, leftSoFar)
		} else {
			last.Reduce(result, leftSoFar, right)
		}
		return b.Schedule()
	},
}

func init() {
	register(reduceScatterPairwise, blockVariant(reduceScatterPairwise))
}
