package algorithms

import "github.com/gocoll/gocoll/schedule"

// Recursive-doubling reduce-scatter with a final exchange.
//
// The partners are 1, 2, 4, ... ranks away, as in the order-preserving
// recursive-doubling reduce-scatter, but the halving works on the input's
// own layout: after the rounds, new rank i holds block bitReverse(i), and
// one more round sends each block to its owner. That round carries n/p
// elements per rank where recursive_doubling copies the whole vector into
// a bit-reversed layout first, so it wins on large messages. Each round
// combines aligned groups of consecutive ranks, lower group on the left:
// rank order is kept, and where p is 2^a - 2^b (3, 4, 6, 7, 8, 12, ...)
// the result is the canonical association T(0, p). Non-powers of two fold
// in pairs first; the last round also unfolds.
//
//	restrictions: none (any p, irregular counts, any op)
//	cost:         (lg p + 1)α + (p-1)/p·n(β+γ) + n/p·β, one more round and
//	              n more β when p is not a power of two
//	memory:       1.5n elements of scratch (2n when p is not a power of two)
//	wins:         large messages with a non-commutative op or in
//	              reproducible mode, on many ranks: lg p rounds, no copy.
//	reference:    Thakur, Rabenseifner, Gropp (2005), section 4.4.
var reduceScatterRecursiveDoublingExchange = &Algorithm{
	Name:       "recursive_doubling_exchange",
	Collective: ReduceScatter,
	Canonical:  foldCanonical,
	Summary:    "halve the window with partners 1, 2, 4, ... away in the input's layout, then send each block to its owner; keeps rank order",
	Cost:       "(lg p + 1)α + (p-1)/p·n(β+γ) + n/p·β",
	Build: func(pr Params) *schedule.Schedule {
		bl := pr.Blocks()
		p, r := pr.P, pr.Rank
		result := out.At(0, bl.Counts[r])
		if p == 1 {
			return copyOnly(in.Block(bl, 0), result)
		}
		f := schedule.NewFold(p)
		nr := f.NewRank(r)
		n := bl.Total
		bits := schedule.Log2(f.Pof2)
		_, natural := virtualBlocks(f, bl)

		var b schedule.Builder
		h := newHalving(f, r, true, natural, tmp, n)
		foldRecv := 0
		if f.Rem > 0 {
			foldRecv = n
		}
		b.Scratch(n + max(foldRecv, h.maxRecv()))

		// Fold: the even rank of a pair hands its whole vector to the odd
		// one, which reduces it on the left of its own.
		src := in
		if f.Rem > 0 {
			rb := b.Next()
			switch {
			case nr < 0:
				rb.Send(r+1, in.At(0, n))
			case f.Folded(r):
				rb.Recv(r-1, tmp.At(n, n)).Reduce(tmp.At(0, n), tmp.At(n, n), in.At(0, n))
				src = tmp
			}
		}

		h.reduceScatter(&b, src)

		// Exchange (and unfold): the holder of virtual block v sends each
		// of its ranks its block.
		rb := b.Next()
		if nr >= 0 {
			v := h.finalSlot()
			lo, hi := f.Members(v)
			for m := lo; m < hi; m++ {
				part := tmp.At(bl.Displs[m], bl.Counts[m])
				if m == r {
					rb.Copy(result, part)
				} else {
					rb.Send(m, part)
				}
			}
		}
		mine := f.NewRank(r | 1) // the new rank whose members include r
		if r >= 2*f.Rem {
			mine = f.NewRank(r)
		}
		if holder := f.OldRank(bitReverse(mine, bits)); holder != r {
			rb.Recv(holder, result)
		}
		return b.Schedule()
	},
}

func init() {
	register(reduceScatterRecursiveDoublingExchange, blockVariant(reduceScatterRecursiveDoublingExchange))
}
