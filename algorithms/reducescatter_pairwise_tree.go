package algorithms

import "github.com/gocoll/gocoll/schedule"

// Pairwise-exchange reduce-scatter in the canonical tree.
//
// As in the pairwise reduce-scatter, in round k (1 <= k < p) every rank
// sends its input block for rank r+k directly to that rank and receives
// rank r-k's contribution to its own block; here each contribution lands
// in a slot of its own, and the rank combines them in the canonical tree
// T(0, p) as soon as both children of a node are in: T(lo, hi) is kept in
// slot lo, the root goes to the output. Every block is so reduced in the
// same order on any p, whatever the counts: the reproducible reduce-scatter
// for large messages, with the bytes, rounds and reductions of ring and
// pairwise.
//
//	restrictions: none (any p, irregular counts, any op)
//	cost:         (p-1)α + (p-1)/p·n(β+γ)
//	memory:       p blocks of scratch (n elements for equal blocks)
//	wins:         large messages in reproducible mode.
//	reference:    the pairwise exchange of Thakur, Rabenseifner, Gropp
//	              (2005), section 4.4.
var reduceScatterPairwiseTree = &Algorithm{
	Name:       "pairwise_tree",
	Collective: ReduceScatter,
	Canonical:  func(Params) bool { return true },
	Summary:    "send each rank its block directly, one peer per round; the owner reduces the contributions in the canonical tree",
	Cost:       "(p-1)α + (p-1)/p·n(β+γ)",
	Build: func(pr Params) *schedule.Schedule {
		bl := pr.Blocks()
		result := out.At(0, bl.Counts[pr.Rank])
		if pr.P == 1 {
			return copyOnly(in.Block(bl, 0), result)
		}
		var b schedule.Builder
		treeReduceScatter(&b, pr.P, pr.Rank, bl, result, pr.InPlace)
		return b.Schedule()
	},
}

// treeReduceScatter appends the p-1 rounds of the pairwise reduce-scatter
// in the canonical tree of the input blocks bl; rank r's block ends in
// result.
func treeReduceScatter(b *schedule.Builder, p, r int, bl schedule.Blocks, result schedule.Range, inPlace bool) {
	c := bl.Counts[r]
	b.Scratch(p * c)
	slot := func(x int) schedule.Range { return tmp.At(x*c, c) }
	leaf := func(x int) schedule.Range {
		if x == r {
			return in.Block(bl, r)
		}
		return slot(x)
	}
	root := result
	if inPlace && partialOverlap(result, in.Block(bl, r)) {
		root = slot(0) // reduce beside the input block, then copy
	}
	// Rank x's contribution is in after round (r-x) mod p; a node is
	// complete when the latest of its leaves is.
	done := func(lo, hi int) int { return max(mod(r-lo, p), mod(r-hi+1, p)) }
	for k := 1; k < p; k++ {
		from := mod(r-k, p)
		rb := b.Next().Send(mod(r+k, p), in.Block(bl, mod(r+k, p))).Recv(from, slot(from))
		// Climb from the new leaf while the sibling is complete.
		path := canonicalPath(p, from)
		for i := len(path) - 1; i > 0; i-- {
			lo, hi := path[i-1][0], path[i-1][1]
			mid := CanonicalSplit(lo, hi)
			sib := [2]int{mid, hi}
			if path[i][0] == mid {
				sib = [2]int{lo, mid}
			}
			if done(sib[0], sib[1]) > k {
				break
			}
			val := func(lo, hi int) schedule.Range {
				if hi-lo == 1 {
					return leaf(lo)
				}
				return slot(lo)
			}
			dst := slot(lo)
			if i == 1 {
				dst = root
			}
			rb.Reduce(dst, val(lo, mid), val(mid, hi))
		}
	}
	b.Round(b.Len()-1).Copy(result, root)
}

// canonicalPath returns the nodes of T(0, p) from the root down to leaf x.
func canonicalPath(p, x int) [][2]int {
	path := [][2]int{{0, p}}
	for lo, hi := 0, p; hi-lo > 1; {
		if mid := CanonicalSplit(lo, hi); x < mid {
			hi = mid
		} else {
			lo = mid
		}
		path = append(path, [2]int{lo, hi})
	}
	return path
}

func init() {
	register(reduceScatterPairwiseTree, blockVariant(reduceScatterPairwiseTree))
}
