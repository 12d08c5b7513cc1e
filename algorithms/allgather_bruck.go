package algorithms

import "github.com/gocoll/gocoll/schedule"

// Bruck allgather.
//
// Every rank keeps its blocks in rotated order, its own first: slot j holds
// the block of rank r+j. In round k it sends its first min(2^k, p-2^k) slots
// to rank r-2^k and receives as many from rank r+2^k, appended after what it
// has: after ceil(lg p) rounds all p slots are full, and a final local copy
// rotates them into place.
//
//	restrictions: none (any p, any counts)
//	cost:         ceil(lg p) alpha + (p-1)/p n beta, plus a local copy of n
//	memory:       n elements of scratch
//	wins:         small messages when p is not a power of two: lg p rounds
//	              without the fold that recursive doubling needs.
//	reference:    Bruck, Ho, Kipnis, Upfal, Weathersby, "Efficient
//	              Algorithms for All-to-All Communications in Multiport
//	              Message-Passing Systems" (1997).
var allgatherBruck = &Algorithm{
	Name:       "bruck",
	Collective: Allgather,
	Summary:    "rotated layout, distances 1, 2, 4, ..., then rotate back",
	Cost:       "⌈lg p⌉α + (p-1)/p·nβ",
	Build: func(pr Params) *schedule.Schedule {
		bl := pr.Blocks()
		p, r := pr.P, pr.Rank
		mine := in.At(0, pr.Counts[r])
		if p == 1 {
			return copyOnly(mine, out.Block(bl, 0))
		}
		// rot lays the blocks out in the order r, r+1, ..., r+p-1.
		counts := make([]int, p)
		for j := range counts {
			counts[j] = pr.Counts[mod(r+j, p)]
		}
		rot := schedule.BlocksOf(counts)

		var b schedule.Builder
		b.Scratch(rot.Total)
		for d := 1; d < p; d *= 2 {
			n := min(d, p-d) // slots to pass on
			rb := b.Next()
			send := tmp.Span(rot, 0, n)
			if d == 1 {
				send = mine
				rb.Copy(tmp.Block(rot, 0), mine)
			}
			rb.Send(mod(r-d, p), send).Recv(mod(r+d, p), tmp.Span(rot, d, d+n))
		}
		// Rotate back: slots 0..p-r-1 are the blocks r..p-1.
		last := b.Round(b.Len() - 1)
		last.Copy(out.Span(bl, r, p), tmp.Span(rot, 0, p-r))
		last.Copy(out.Span(bl, 0, r), tmp.Span(rot, p-r, p))
		return b.Schedule()
	},
}

func init() { register(allgatherBruck) }
