package algorithms

import "github.com/gocoll/gocoll/schedule"

// Recursive-halving reduce-scatter.
//
// In round k every rank exchanges half of the data it is still responsible
// for with the rank p'/2^(k+1) away: it sends the half the partner keeps and
// reduces the half it keeps with what it receives. After lg p' rounds each
// rank holds its own block fully reduced. When p is not a power of two the
// first 2(p-p') ranks fold in pairs first (the even rank hands its vector to
// the odd one), and the odd rank sends the even one its block at the end.
//
//	restrictions: commutative op (partners p'/2 apart interleave ranks)
//	cost:         lg p alpha + (p-1)/p n beta + (p-1)/p n gamma for p a
//	              power of two; two more rounds and n more beta otherwise
//	memory:       1.5n elements of scratch (2n when p is not a power of two)
//	wins:         short and medium messages: lg p rounds instead of p-1.
//	reference:    Thakur, Rabenseifner, Gropp (2005), section 4.4.
var reduceScatterRecursiveHalving = &Algorithm{
	Name:        "recursive_halving",
	Collective:  ReduceScatter,
	Commutative: true,
	Summary:     "halve the window with partners p/2, p/4, ..., 1 away",
	Cost:        "lg p·α + (p-1)/p·n(β+γ)",
	// Partners p'/2 apart first: the tree only while p' = 2.
	Canonical: func(p Params) bool { return p.P <= 3 },
	Build: func(pr Params) *schedule.Schedule {
		return halvingReduceScatter(pr, false)
	},
}

// halvingReduceScatter builds the reduce-scatters that run a halving over
// the virtual blocks of the folded ranks: with increasing partner distance
// (order-preserving, over a bit-reversed copy of the input) or decreasing
// (classic recursive halving, straight from the input).
func halvingReduceScatter(pr Params, increasing bool) *schedule.Schedule {
	bl := pr.Blocks()
	p, r := pr.P, pr.Rank
	result := out.At(0, bl.Counts[r])
	if p == 1 {
		return copyOnly(in.Block(bl, 0), result)
	}
	f := schedule.NewFold(p)
	nr := f.NewRank(r)
	n := bl.Total

	vcounts, natural := virtualBlocks(f, bl)
	// Increasing partner distance ends with new rank i holding slot
	// bitReverse(i): lay virtual block i out in that slot.
	slots := natural
	bits := schedule.Log2(f.Pof2)
	if increasing {
		sc := make([]int, f.Pof2)
		for s := range sc {
			sc[s] = vcounts[bitReverse(s, bits)]
		}
		slots = schedule.BlocksOf(sc)
	}
	// toSlots copies (or reduces) a vector in natural layout into acc.
	toSlots := func(rb schedule.RoundBuilder, lower schedule.Range) {
		for v := range f.Pof2 {
			s := v
			if increasing {
				s = bitReverse(v, bits)
			}
			dst, mine := tmp.Block(slots, s), in.Block(natural, v)
			if lower.Len == 0 {
				rb.Copy(dst, mine)
			} else {
				rb.Reduce(dst, lower.Sub(natural.Displs[v], vcounts[v]), mine)
			}
		}
	}

	var b schedule.Builder
	h := newHalving(f, r, increasing, slots, tmp, n)
	foldRecv := 0
	if f.Rem > 0 {
		foldRecv = n
	}
	b.Scratch(n + max(foldRecv, h.maxRecv()))
	src := in // classic recursive halving reads its first half straight from the input
	if increasing || f.Folded(r) {
		src = tmp
	}

	// Fold: the even rank of a pair hands its whole vector to the odd one.
	if f.Rem > 0 || increasing {
		rb := b.Next()
		switch {
		case nr < 0:
			rb.Send(r+1, in.At(0, n))
		case f.Folded(r):
			rb.Recv(r-1, tmp.At(n, n))
			if increasing {
				toSlots(rb, tmp.At(n, n))
			} else {
				rb.Reduce(tmp.At(0, n), tmp.At(n, n), in.At(0, n))
			}
		case increasing:
			toSlots(rb, schedule.Range{})
		}
	}

	h.reduceScatter(&b, src)

	// Unfold: the odd rank of a pair holds both blocks of the pair.
	rb := b.Next()
	if nr < 0 {
		rb.Recv(r+1, result)
		return b.Schedule()
	}
	mine := tmp.Block(slots, h.finalSlot())
	if f.Folded(r) {
		rb.Send(r-1, mine.Sub(0, bl.Counts[r-1]))
		mine = mine.Sub(bl.Counts[r-1], bl.Counts[r])
	}
	rb.Copy(result, mine)
	return b.Schedule()
}

func init() {
	register(reduceScatterRecursiveHalving, blockVariant(reduceScatterRecursiveHalving))
}
