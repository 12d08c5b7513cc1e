package algorithms

import "github.com/gocoll/gocoll/schedule"

// Hierarchical allgather (multi-leader): one round that gathers each node's
// blocks into slices, an allgather of each slice across the nodes, and an
// allgather inside each node.
//
// Each node's part of the output (the blocks of its ranks, in local order)
// is cut into L slices, L the number of ranks of the smallest node
// (nodeSlices). In the first round every rank sends each piece of its
// block to the rank of its node that holds the slice the piece falls in
// (local rank l holds slice l; with equal blocks and equal nodes a slice
// is one rank's block, and the round is a local copy). In the inter-node
// phase the ranks holding slice l, one per node, allgather it, so that each
// holds slice l of every node: the group vector of slice l. In the
// intra-node phase each node's ranks allgather the group vectors, and a
// local round copies them from the slice layout into rank order (the
// phases work in the output itself when the layouts agree: one slice, each
// node's ranks consecutive). Both phases run a flat algorithm (flatFor:
// recursive doubling, or Bruck on a number of ranks that is not a power of
// two, up to 1024 elements; ring beyond), embedded with its peers
// renumbered (embed.go).
//
// Without a node map, on one node, or with one rank per node there is
// nothing to compose: the algorithm is flatFor's allgather on all ranks.
//
//	restrictions: none (any node map, any counts, zeros included,
//	              MPI_IN_PLACE)
//	cost:         N nodes x k ranks, n elements in all, α β inter-node and
//	              α' β' intra-node, δ per element copied, large messages:
//	              (N-1)α + (N-1)/(Nk)·nβ + (k-1)α' + (k-1)/k·nβ' + nδ (the
//	              copy out of the slice layout)
//	memory:       n elements of scratch (none when the layouts agree) plus
//	              the flat algorithms'
//	wins:         many ranks per node on a slower network: each rank's link
//	              carries n/k, and latency grows with N or lg N, not p.
//	reference:    Kandalla et al., "Designing Multi-Leader-Based Allgather
//	              Algorithms for Multi-Core Clusters" (IPDPS 2009).
var allgatherHierarchical = hierarchical(Algorithm{
	Name:       "hierarchical",
	Collective: Allgather,
	Summary:    "gather each node's blocks into slices, allgather of each slice across nodes (a leader per local rank), allgather in each node",
	Cost:       "(N-1)α + (N-1)/(Nk)·nβ + (k-1)α' + (k-1)/k·nβ' + nδ",
	Restrict:   restrictHierarchical(Allgather),
}, buildAllgatherHierarchical)

// buildAllgatherHierarchical builds rank pr.Rank's schedule with phases ph.
func buildAllgatherHierarchical(pr Params, ph phases) *schedule.Schedule {
	m, bl := pr.Nodes, pr.Blocks()
	n, r := bl.Total, pr.Rank
	if flatNodes(m) {
		return flatFor(Allgather, pr.P, ph.intraSmall, pr.Commutative).Build(pr)
	}
	ns := newNodeSlices(m, bl)
	node, local := m.Node(r), m.Local(r)
	k, N, L := m.Size(node), ns.N, ns.L
	nodeRanks := m.Ranks(node)
	mine := in.At(0, bl.Counts[r])
	var b schedule.Builder

	// The slice layout: in the output when it is rank order, else in
	// scratch, followed by the flat algorithms' scratch.
	lay, sub := tmp.place(0), n
	if ns.identity {
		lay, sub = out.place(0), 0
	}
	b.Scratch(sub)
	at := func(off, c int) schedule.Range { return lay.buf.At(lay.off+off, c) }

	// Gather into slices: each piece of a block goes to its slice's
	// holder.
	rb := b.Next()
	ns.pieces(node, func(owner, rOff, l, sOff, c int) {
		holder, dst := nodeRanks[l], at(ns.sliceAt(node, l)+sOff, c)
		switch {
		case holder == r && owner == r:
			rb.Copy(dst, mine.Sub(rOff, c))
		case owner == r:
			rb.Send(holder, mine.Sub(rOff, c))
		case holder == r:
			rb.Recv(owner, dst)
		}
	})

	// Inter-node phase: the holders of slice l allgather it, in place
	// in its group vector.
	interAlg := flatFor(Allgather, N, ph.interSmall, false)
	if local < L {
		g, _ := ns.group(local)
		e := embedding{ranks: sliceGroup(m, local), in: lay.add(ns.sliceAt(node, local)), out: lay.add(g), tmp: tmp.place(sub)}
		e.run(&b, interAlg, Params{P: N, Rank: node, Counts: ns.groupCounts(local), InPlace: true}, flatRounds(interAlg, N))
	} else {
		b.Skip(flatRounds(interAlg, N))
	}

	// Intra-node phase: the node's ranks allgather the group vectors,
	// each holder's own already in place.
	group := func(l int) int { _, n := ns.group(l); return n }
	agAlg := func(k int) *Algorithm { return flatFor(Allgather, k, ph.intraSmall, false) }
	counts := sliceCounts(k, group, L)
	e := embedding{ranks: nodeRanks, in: lay.add(schedule.BlocksOf(counts).Displs[local]), out: lay, tmp: tmp.place(sub)}
	e.run(&b, agAlg(k), Params{P: k, Rank: local, Counts: counts, InPlace: true}, intraRounds(m, agAlg))

	// Copy out of the slice layout into rank order.
	if !ns.identity {
		ns.relayout(b.Next(), out, lay, false)
	}
	return b.Schedule()
}

func init() { register(allgatherHierarchical) }
