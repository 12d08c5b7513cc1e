package algorithms

import "github.com/gocoll/gocoll/schedule"

// Pairwise-tree allreduce: the pairwise reduce-scatter in the canonical
// tree (reducescatter_pairwise_tree.go) followed by the ring allgather, as
// one schedule in the output buffer.
//
// The vector is cut into p blocks of q or q+1 elements; rank r receives
// every rank's contribution to block r, reduces them in the canonical tree
// T(0, p), and the ring passes the complete blocks on. Ring allreduce's
// bytes and reductions, canonical on any p: the reproducible allreduce for
// large messages where Rabenseifner's fold is not the tree.
//
//	restrictions: none (any p, any count, any op)
//	cost:         2(p-1)α + 2(p-1)/p·nβ + (p-1)/p·nγ
//	memory:       about 2 lg p blocks of scratch
//	wins:         large messages in reproducible mode when p is not of
//	              the form 2^a - 2^b.
//	reference:    Thakur, Rabenseifner, Gropp (2005), sections 4.4 and 4.1.
var allreducePairwiseTreeRing = &Algorithm{
	Name:       "pairwise_tree_ring",
	Collective: Allreduce,
	Canonical:  func(Params) bool { return true },
	Summary:    "pairwise reduce-scatter reducing each block in the canonical tree, then ring allgather; canonical on any p",
	Cost:       "2(p-1)α + 2(p-1)/p·nβ + (p-1)/p·nγ",
	Build: func(pr Params) *schedule.Schedule {
		p, r := pr.P, pr.Rank
		if p == 1 {
			return copyOnly(in.At(0, pr.Count), out.At(0, pr.Count))
		}
		bl := schedule.EvenBlocks(pr.Count, p)
		var b schedule.Builder
		// Reduce-scatter phase: block r, complete, in place in the output
		// (in place, that is where the input block is: no partial overlap).
		treeReduceScatter(&b, p, r, bl, out.Block(bl, r), false)
		// Allgather phase.
		ringAllgather(&b, p, r, bl, out.Block(bl, r))
		return b.Schedule()
	},
}

func init() { register(allreducePairwiseTreeRing) }
