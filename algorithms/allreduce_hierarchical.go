package algorithms

import "github.com/gocoll/gocoll/schedule"

// Hierarchical allreduce (multi-leader): a reduce-scatter inside each node,
// an allreduce of each slice across the nodes, an allgather inside each
// node.
//
// The vector is cut into L slices, L the number of ranks of the smallest
// node. In the reduce-scatter phase each node's ranks reduce the node's
// vectors so that local rank l holds slice l of the node's sum (ranks with
// local rank >= L contribute and hold nothing); in the allreduce phase the
// ranks holding slice l, one per node, allreduce it across the nodes; in the
// allgather phase each node's ranks gather the L slices. Each phase runs a
// flat algorithm on its sub-communicator (flatFor: recursive doubling up to
// 1024 elements, Rabenseifner beyond; recursive halving or doubling, ring
// or pairwise for the reduce-scatter; recursive doubling, Bruck or ring for
// the allgather), embedded with its peers renumbered (embed.go).
// In reproducible mode (Params.Reproducible) the reductions run canonical
// flat algorithms (canonicalFlat) instead, and the result is T(0, p) where
// every node is a subtree of the tree: nodes of 2^s consecutive ranks.
//
// Without a node map, on one node, or with one rank per node there is
// nothing to compose: the algorithm is flatFor's allreduce on all ranks.
//
// For 3 nodes x 2 ranks (ranks 0, 1; 2, 3; 4, 5) and 6 elements, two
// slices of 3: recursive halving inside the nodes (and its local copy),
// recursive doubling across them with the fold of 3 nodes to 2, recursive
// doubling inside the nodes again (sN: sends to rank N, rN: receives from
// rank N, +: reduces, c: copies, .: idle; golden-tested against the
// schedule):
//
//	round  phase           rank 0   rank 1   rank 2   rank 3   rank 4   rank 5
//	0      reduce-scatter  s1 r1 +  s0 r0 +  s3 r3 +  s2 r2 +  s5 r5 +  s4 r4 +
//	1      reduce-scatter  c        c        c        c        c        c
//	2      allreduce       s2       s3       r0 +     r1 +     .        .
//	3      allreduce       .        .        s4 r4 +  s5 r5 +  s2 r2 +  s3 r3 +
//	4      allreduce       r2       r3       s0       s1       .        .
//	5      allgather       s1 r1    s0 r0    s3 r3    s2 r2    s5 r5    s4 r4
//
//	restrictions: a commutative op unless each node's ranks are consecutive
//	              (checked: Algorithm.Check names it); any node map, any
//	              count, MPI_IN_PLACE
//	cost:         N nodes x k ranks (powers of two), n elements, α β
//	              inter-node, α' β' intra-node; large messages (ring,
//	              Rabenseifner, ring): 2(k-1)α' + 2(k-1)/k·nβ' + 2 lg N·α +
//	              2(N-1)/(Nk)·nβ + (p-1)/p·nγ; small ones (recursive
//	              halving, doubling, doubling): 2 lg k·α' + 2(k-1)/k·nβ' +
//	              lg N·(α + n/k·(β+γ)) + (k-1)/k·nγ
//	memory:       n/L elements of scratch plus the flat algorithms' (at
//	              most n/L more)
//	wins:         many ranks per node on a slower network: each rank's link
//	              carries 2n/k, not 2n, and latency grows with lg N, not lg p.
//	reference:    multi-leader collectives: Kandalla et al., "Designing
//	              Multi-Leader-Based Allgather Algorithms for Multi-Core
//	              Clusters" (IPDPS 2009); MPICH's SMP-aware allreduce is the
//	              one-leader form.
var allreduceHierarchical = hierarchical(Algorithm{
	Name:       "hierarchical",
	Collective: Allreduce,
	Summary:    "reduce-scatter in each node, allreduce of each slice across nodes (a leader per local rank), allgather in each node",
	Cost:       "2(k-1)α' + 2(k-1)/k·nβ' + 2lg N·α + 2(N-1)/(Nk)·nβ + (p-1)/p·nγ",
	Canonical:  hierarchicalCanonical,
	Restrict:   restrictHierarchical(Allreduce),
}, buildAllreduceHierarchical)

// buildAllreduceHierarchical builds rank pr.Rank's schedule with phases ph.
func buildAllreduceHierarchical(pr Params, ph phases) *schedule.Schedule {
	m, n, comm := pr.Nodes, pr.Count, pr.Commutative
	if flatNodes(m) {
		return ph.flat(Allreduce, pr.P, ph.intraSmall, comm).Build(pr)
	}
	node, local := m.Node(pr.Rank), m.Local(pr.Rank)
	k, N, L := m.Size(node), m.NumNodes(), minPerNode(m)
	slices := schedule.EvenBlocks(n, L)
	slice := func(l int) int { return slices.Counts[l] }
	mine, big := 0, slices.Counts[0] // this rank's slice, the largest
	if local < L {
		mine = slice(local)
	}
	nodeRanks := m.Ranks(node)
	var b schedule.Builder
	b.Scratch(big)

	// Reduce-scatter phase: local rank l gets slice l of the node's sum
	// in scratch.
	rsAlg := func(k int) *Algorithm { return ph.flat(ReduceScatter, k, ph.intraSmall, comm) }
	e := embedding{ranks: nodeRanks, in: in.place(0), out: tmp.place(0), tmp: tmp.place(big)}
	e.run(&b, rsAlg(k), Params{P: k, Rank: local, Counts: sliceCounts(k, slice, L), Commutative: comm}, intraRounds(m, rsAlg))

	// Allreduce phase: the holders of each slice, one per node.
	arAlg := ph.flat(Allreduce, N, ph.interSmall, comm)
	if local < L {
		e := embedding{ranks: sliceGroup(m, local), in: tmp.place(0), out: out.place(slices.Displs[local]), tmp: tmp.place(big)}
		e.run(&b, arAlg, Params{P: N, Rank: node, Count: mine, Commutative: comm}, flatRounds(arAlg, N))
	} else {
		b.Skip(flatRounds(arAlg, N))
	}

	// Allgather phase: every rank of the node gets every slice; a
	// slice holder's own slice is already in place.
	agAlg := func(k int) *Algorithm { return flatFor(Allgather, k, ph.intraSmall, comm) }
	counts := sliceCounts(k, slice, L)
	at := schedule.BlocksOf(counts).Displs[local]
	e = embedding{ranks: nodeRanks, in: out.place(at), out: out.place(0), tmp: tmp.place(big)}
	e.run(&b, agAlg(k), Params{P: k, Rank: local, Counts: counts, InPlace: true}, intraRounds(m, agAlg))
	return b.Schedule()
}

func init() { register(allreduceHierarchical) }
