package algorithms

import "github.com/gocoll/gocoll/schedule"

// Recursive-doubling allgather.
//
// In round k every rank exchanges everything it has gathered so far with the
// rank whose number differs in bit k, so the gathered window doubles each
// round. When p is not a power of two, the first 2(p-p') ranks first pair
// up: the even rank of each pair hands its block to the odd one and, at the
// end, receives the whole result from it (the classic fold).
//
//	restrictions: none (any p, any counts)
//	cost:         lg p alpha + (p-1)/p n beta for p a power of two;
//	              2 more rounds and about n more beta otherwise
//	memory:       no scratch
//	wins:         small and medium messages on a power of two: fewest rounds.
//	reference:    Thakur, Rabenseifner, Gropp (2005), section 4.1.
var allgatherRecursiveDoubling = &Algorithm{
	Name:       "recursive_doubling",
	Collective: Allgather,
	Summary:    "exchange the gathered window with partner r xor 2^k",
	Cost:       "lg p·α + (p-1)/p·nβ",
	Build: func(pr Params) *schedule.Schedule {
		bl := pr.Blocks()
		p, r := pr.P, pr.Rank
		mine := in.At(0, pr.Counts[r])
		if p == 1 {
			return copyOnly(mine, out.Block(bl, 0))
		}
		f := schedule.NewFold(p)
		var b schedule.Builder
		nr := f.NewRank(r)

		// Fold: the even rank of a pair gives its block to the odd one.
		first := mine // where the window of round 0 is
		if f.Rem > 0 {
			rb := b.Next()
			switch {
			case nr < 0:
				rb.Send(r+1, mine)
			case f.Folded(r):
				rb.Recv(r-1, out.Block(bl, r-1))
			}
			if nr >= 0 {
				rb.Copy(out.Block(bl, r), mine)
			}
			first = out.Block(bl, r)
		}

		// Recursive doubling over the p' surviving ranks; new rank i holds
		// the blocks of the original ranks Members(i).
		vspan := func(lo, hi int) schedule.Range { // new ranks lo..hi-1
			olo, _ := f.Members(lo)
			_, ohi := f.Members(hi - 1)
			return out.Span(bl, olo, ohi)
		}
		for mask := 1; mask < f.Pof2; mask <<= 1 {
			rb := b.Next()
			if nr < 0 {
				continue
			}
			partner := nr ^ mask
			mineLo, theirLo := nr&^(mask-1), partner&^(mask-1)
			send := vspan(mineLo, mineLo+mask)
			if mask == 1 && f.Rem == 0 {
				send = first
				rb.Copy(out.Block(bl, r), mine)
			}
			rb.SendRecv(f.OldRank(partner), send, vspan(theirLo, theirLo+mask))
		}

		// Unfold: the odd rank of a pair sends the whole result back.
		if f.Rem > 0 {
			rb := b.Next()
			switch {
			case nr < 0:
				rb.Recv(r+1, out.At(0, bl.Total))
			case f.Folded(r):
				rb.Send(r-1, out.At(0, bl.Total))
			}
		}
		return b.Schedule()
	},
}

func init() { register(allgatherRecursiveDoubling) }
