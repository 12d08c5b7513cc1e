package algorithms

import "github.com/gocoll/gocoll/schedule"

// Pairwise-exchange reduce-scatter in the canonical tree.
//
// As in the pairwise reduce-scatter, in round k (1 <= k < p) every rank
// sends its input block for rank r+k directly to that rank and receives
// rank r-k's contribution to its own block; here each contribution lands
// in scratch, and the rank combines them in the canonical tree T(0, p) as
// soon as both children of a node are in; the root goes to the output. Every block is so reduced in the
// same order on any p, whatever the counts: the reproducible reduce-scatter
// for large messages, with the bytes, rounds and reductions of ring and
// pairwise.
//
//	restrictions: none (any p, irregular counts, any op)
//	cost:         (p-1)α + (p-1)/p·n(β+γ)
//	memory:       about 2 lg p blocks of scratch
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
	// Values wait in slots of scratch, each a block long, until their
	// sibling is complete; a slot is reused once its value is consumed, so
	// a few (about 2 lg p) are enough.
	var free []int
	slots := 0
	take := func() schedule.Range {
		if len(free) == 0 {
			slots++
			return tmp.At((slots-1)*c, c)
		}
		s := free[len(free)-1]
		free = free[:len(free)-1]
		return tmp.At(s*c, c)
	}
	val := map[[2]int]schedule.Range{{r, r + 1}: in.Block(bl, r)}
	// Rank x's contribution is in after round (r-x) mod p; a node is
	// complete when the latest of its leaves is.
	done := func(lo, hi int) int { return max(mod(r-lo, p), mod(r-hi+1, p)) }
	var final schedule.Range
	for k := 1; k < p; k++ {
		from := mod(r-k, p)
		got := take()
		val[[2]int{from, from + 1}] = got
		rb := b.Next().Send(mod(r+k, p), in.Block(bl, mod(r+k, p))).Recv(from, got)
		// Climb from the new leaf while the sibling is complete.
		path := canonicalPath(p, from)
		for i := len(path) - 1; i > 0; i-- {
			lo, hi := path[i-1][0], path[i-1][1]
			mid := CanonicalSplit(lo, hi)
			if path[i][0] == mid && done(lo, mid) > k || path[i][0] == lo && done(mid, hi) > k {
				break
			}
			left, right := val[[2]int{lo, mid}], val[[2]int{mid, hi}]
			delete(val, [2]int{lo, mid})
			delete(val, [2]int{mid, hi})
			// The parent takes a child's slot (never the input block) and
			// frees the other's; the root goes to the result unless, in
			// place, that partly overlaps the input block.
			dst, other := left, right
			if dst.Buf != schedule.Scratch {
				dst, other = right, left
			}
			if other.Buf == schedule.Scratch {
				free = append(free, other.Off/max(c, 1))
			}
			if i == 1 && !(inPlace && partialOverlap(result, in.Block(bl, r))) {
				free = append(free, dst.Off/max(c, 1))
				dst = result
			}
			rb.Reduce(dst, left, right)
			val[[2]int{lo, hi}] = dst
			final = dst
		}
	}
	b.Scratch(slots * c)
	b.Round(b.Len()-1).Copy(result, final)
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
