package algorithms

import "github.com/gocoll/gocoll/schedule"

// Tree-doubling reduce-scatter: the tree-doubling allreduce of the whole
// vector (allreduce_tree_doubling.go) in scratch, then each rank keeps its
// block.
//
// Every round moves the whole vector, so it is for short messages only:
// there its ⌈lg p⌉ rounds beat the binomial reduce-scatter's 2⌈lg p⌉, and
// the result is the canonical association T(0, p) on any p.
//
//	restrictions: commutative op
//	cost:         ⌈lg p⌉α + up to 2⌈lg p⌉·nβ + ⌈lg p⌉·nγ
//	memory:       3n elements of scratch
//	wins:         short messages in reproducible mode where the
//	              order-preserving reduce-scatter's fold is not the tree.
var reduceScatterTreeDoubling = &Algorithm{
	Name:        "tree_doubling",
	Collective:  ReduceScatter,
	Commutative: true,
	Canonical:   func(Params) bool { return true },
	Summary:     "tree-doubling allreduce of the whole vector, then keep the own block; canonical on any p",
	Cost:        "⌈lg p⌉·α + ≤2⌈lg p⌉·nβ + ⌈lg p⌉·nγ",
	Build: func(pr Params) *schedule.Schedule {
		bl := pr.Blocks()
		p, r, n := pr.P, pr.Rank, pr.Blocks().Total
		result := out.At(0, bl.Counts[r])
		if p == 1 {
			return copyOnly(in.Block(bl, 0), result)
		}
		ranks := make([]int, p)
		for i := range ranks {
			ranks[i] = i
		}
		var b schedule.Builder
		e := embedding{ranks: ranks, in: in.place(0), out: tmp.place(0), tmp: tmp.place(n)}
		e.run(&b, allreduceTreeDoubling, Params{P: p, Rank: r, Count: n, Commutative: true}, schedule.Log2(ceilPow2(p)))
		b.Round(b.Len()-1).Copy(result, tmp.Block(bl, r))
		return b.Schedule()
	},
}

func init() {
	register(reduceScatterTreeDoubling, blockVariant(reduceScatterTreeDoubling))
}
