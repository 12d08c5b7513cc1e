package algorithms

import "github.com/gocoll/gocoll/schedule"

// Ring reduce-scatter.
//
// In each of p-1 rounds every rank sends to its right neighbour its partial
// result of one block and receives from its left neighbour the partial
// result of the next, which it reduces with its own input of that block.
// After p-1 rounds the partial result of block r that arrives at rank r
// holds every contribution.
//
//	restrictions: commutative op (block b combines ranks b+1, ..., b in ring order)
//	cost:         (p-1) alpha + (p-1)/p n beta + (p-1)/p n gamma
//	memory:       two blocks of scratch
//	wins:         large messages, any p: bandwidth-optimal, neighbour traffic only.
//	reference:    Patarasuk, Yuan, "Bandwidth optimal all-reduce algorithms
//	              for clusters of workstations" (2009).
var reduceScatterRing = &Algorithm{
	Name:        "ring",
	Collective:  ReduceScatter,
	Commutative: true,
	Summary:     "partial sums travel the ring, one block per round",
	Cost:        "(p-1)α + (p-1)/p·n(β+γ)",
	Build: func(pr Params) *schedule.Schedule {
		bl := pr.Blocks()
		p, r := pr.P, pr.Rank
		result := out.At(0, bl.Counts[r])
		if p == 1 {
			return copyOnly(in.Block(bl, 0), result)
		}
		var b schedule.Builder
		m := maxCount(bl)
		b.Scratch(2 * m)
		// Partial results alternate between two scratch slots: the one
		// received and reduced in round k is sent in round k+1 while the
		// other receives.
		slot := func(k, blk int) schedule.Range { return tmp.At(k%2*m, bl.Counts[blk]) }
		final := result
		if pr.InPlace && partialOverlap(result, in.Block(bl, r)) {
			final = slot(p, r) // reduce beside the input block, then copy
		}
		acc := func(k, blk int) schedule.Range {
			if k == p-2 {
				return final
			}
			return slot(k, blk)
		}
		ringReduceScatter(&b, p, r, bl, slot, acc)
		b.Round(b.Len()-1).Copy(result, final)
		return b.Schedule()
	},
}

// partialOverlap reports whether an output range overlaps an input range in
// place (where Input and Output are the same memory) without being it.
func partialOverlap(o, i schedule.Range) bool {
	return o.Len > 0 && i.Len > 0 && o.Off != i.Off && o.Off < i.End() && i.Off < o.End()
}

// ringReduceScatter appends the p-1 rounds of the ring reduce-scatter of the
// input blocks bl. In round k rank r sends its partial result of block r-k-1
// (its plain input in round 0) to the right, receives the partial result of
// block r-k-2 from the left into recv(k, block) and stores that reduced
// with its own input into acc(k, block). The last round ends with block r
// complete in acc(p-2, r).
func ringReduceScatter(b *schedule.Builder, p, r int, bl schedule.Blocks, recv, acc func(k, blk int) schedule.Range) {
	right, left := mod(r+1, p), mod(r-1, p)
	for k := range p - 1 {
		sendBlk, recvBlk := mod(r-k-1, p), mod(r-k-2, p)
		send := in.Block(bl, sendBlk)
		if k > 0 {
			send = acc(k-1, sendBlk)
		}
		got := recv(k, recvBlk)
		b.Next().Send(right, send).Recv(left, got).
			Reduce(acc(k, recvBlk), got, in.Block(bl, recvBlk))
	}
}

func init() {
	register(reduceScatterRing, blockVariant(reduceScatterRing))
}

// blockVariant registers a reduce-scatter algorithm for
// MPI_Reduce_scatter_block too: that is the same call with equal counts.
func blockVariant(a *Algorithm) *Algorithm {
	v := *a
	v.Collective = ReduceScatterBlock
	return &v
}
