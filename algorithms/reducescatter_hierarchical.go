package algorithms

import "github.com/gocoll/gocoll/schedule"

// Hierarchical reduce-scatter (multi-leader): a reduce-scatter inside each
// node, a reduce-scatter of each slice across the nodes, and one round that
// hands each rank its block inside its node.
//
// Each node's part of the result (the blocks of its ranks, in local order)
// is cut into L slices, L the number of ranks of the smallest node
// (nodeSlices). A local round first copies the input into the slice layout,
// where the vector a node's local rank l needs is contiguous: slice l of
// every node, in node order (skipped when that is the input's own layout:
// one slice, each node's ranks consecutive). In the intra-node phase each
// node's ranks reduce-scatter it, local rank l < L getting slice l of every
// node, reduced over the node; in the inter-node phase the ranks holding
// slice l, one per node, reduce-scatter those, so that each ends with slice
// l of its own node's part, reduced over all ranks; in the last round each
// slice holder sends every rank of its node the piece of its block the
// slice holds (with equal blocks and equal nodes a slice is one rank's
// block, and the round is a local copy). Both phases run a flat algorithm
// (flatFor: recursive halving, or recursive doubling for a non-commutative
// op, up to 1024 elements; ring or pairwise beyond), embedded with its
// peers renumbered (embed.go).
// In reproducible mode (Params.Reproducible) the reductions run canonical
// flat algorithms (canonicalFlat) instead, and the result is T(0, p) where
// every node is a subtree of the tree: nodes of 2^s consecutive ranks.
//
// Without a node map, on one node, or with one rank per node there is
// nothing to compose: the algorithm is flatFor's reduce-scatter on all
// ranks. MPI_Reduce_scatter_block is the same call with equal counts.
//
//	restrictions: a commutative op unless each node's ranks are consecutive
//	              (checked: Algorithm.Check names it); any node map, any
//	              counts, zeros included, MPI_IN_PLACE
//	cost:         N nodes x k ranks, n elements in all, α β inter-node and
//	              α' β' intra-node, δ per element copied, large messages:
//	              (k-1)α' + (k-1)/k·n(β'+γ) + (N-1)α + (N-1)/(Nk)·n(β+γ) +
//	              nδ (the copy into the slice layout)
//	memory:       n + 2n/L elements of scratch plus the flat algorithms'
//	wins:         many ranks per node on a slower network: each rank's link
//	              carries n/k, and latency grows with N or lg N, not p.
//	reference:    the multi-leader shape of Kandalla et al. (IPDPS 2009),
//	              applied to the reduce-scatter.
var reduceScatterHierarchical = hierarchical(Algorithm{
	Name:       "hierarchical",
	Collective: ReduceScatter,
	Summary:    "reduce-scatter in each node, reduce-scatter of each slice across nodes (a leader per local rank), blocks handed out in each node",
	Cost:       "(k-1)α' + (k-1)/k·n(β'+γ) + (N-1)α + (N-1)/(Nk)·n(β+γ) + nδ",
	Canonical:  hierarchicalCanonical,
	Restrict:   restrictHierarchical(ReduceScatter),
}, buildReduceScatterHierarchical)

// buildReduceScatterHierarchical builds rank pr.Rank's schedule with
// phases ph.
func buildReduceScatterHierarchical(pr Params, ph phases) *schedule.Schedule {
	m, bl, comm := pr.Nodes, pr.Blocks(), pr.Commutative
	n, r := bl.Total, pr.Rank
	if flatNodes(m) {
		return ph.flat(ReduceScatter, pr.P, ph.intraSmall, comm).Build(pr)
	}
	ns := newNodeSlices(m, bl)
	node, local := m.Node(r), m.Local(r)
	k, N, L := m.Size(node), ns.N, ns.L
	nodeRanks := m.Ranks(node)
	var b schedule.Builder

	// Scratch: the slice layout (unless the input is in it), the group
	// vector of this rank's slice, its part of it reduced, then the
	// flat algorithms' scratch.
	src, lay := in.place(0), 0
	if !ns.identity {
		src, lay = tmp.place(0), n
	}
	g := ns.maxGroup()
	grp, res, sub := lay, lay+g, lay+2*g
	b.Scratch(sub)

	// Copy into the slice layout.
	rb := b.Next()
	if !ns.identity {
		ns.relayout(rb, in, src, true)
	}

	// Intra-node phase: local rank l gets the group vector of slice l,
	// reduced over the node.
	group := func(l int) int { _, n := ns.group(l); return n }
	rsAlg := func(k int) *Algorithm { return ph.flat(ReduceScatter, k, ph.intraSmall, comm) }
	e := embedding{ranks: nodeRanks, in: src, out: tmp.place(grp), tmp: tmp.place(sub)}
	e.run(&b, rsAlg(k), Params{P: k, Rank: local, Counts: sliceCounts(k, group, L), Commutative: comm}, intraRounds(m, rsAlg))

	// Inter-node phase: the holders of slice l reduce-scatter its group
	// vector; each keeps its own node's slice.
	interAlg := ph.flat(ReduceScatter, N, ph.interSmall, comm)
	if local < L {
		e := embedding{ranks: sliceGroup(m, local), in: tmp.place(grp), out: tmp.place(res), tmp: tmp.place(sub)}
		e.run(&b, interAlg, Params{P: N, Rank: node, Counts: ns.groupCounts(local), Commutative: comm}, flatRounds(interAlg, N))
	} else {
		b.Skip(flatRounds(interAlg, N))
	}

	// Hand out: each slice holder sends each rank of its node the piece
	// of its block that the slice holds.
	rb = b.Next()
	ns.pieces(node, func(owner, rOff, l, sOff, c int) {
		holder := nodeRanks[l]
		switch {
		case holder == r && owner == r:
			rb.Copy(out.At(rOff, c), tmp.At(res+sOff, c))
		case holder == r:
			rb.Send(owner, tmp.At(res+sOff, c))
		case owner == r:
			rb.Recv(holder, out.At(rOff, c))
		}
	})
	return b.Schedule()
}

func init() {
	// The block variant with its own fixed-phase algorithms (AtSize), of
	// its own collective.
	register(reduceScatterHierarchical, hierarchical(*blockVariant(reduceScatterHierarchical), buildReduceScatterHierarchical))
}
