package algorithms

import (
	"fmt"
	"strings"

	"github.com/gocoll/gocoll/schedule"
)

// What the three hierarchical algorithms share: the flat algorithm each
// phase runs, the restriction, and the cut of the vector into node slices.
//
// Every node's ranks take slices 0..L-1 of its data, L the number of ranks
// of the smallest node; local rank l < L holds slice l, and in the
// inter-node phase the ranks holding slice l on every node (one per node, in
// node order) run a flat algorithm on it. A node with more than L ranks
// puts its other ranks' data into the slices in the intra-node phases and
// gives them the result there, so each rank's link carries 1/L of its
// node's traffic.

// smallElems is where each phase's flat algorithm switches from the
// latency-bound to the bandwidth-optimal one: 8 KiB of 8-byte elements, the
// built-in tuner's switch point. Schedules count elements, not bytes, so the
// rule is in elements; it depends on Params alone, so every rank picks the
// same algorithm.
const smallElems = 1024

// phases says which flat algorithm each phase of a hierarchical algorithm
// runs: the latency-bound one (small) or the bandwidth-optimal one, within
// the nodes and across them. It is the only thing about a hierarchical
// schedule that the size of the call changes; everything else (rounds of a
// phase, peers, the slices) follows from the ranks and the node map, with
// message lengths proportional to the counts. So this one rule, phasesOf,
// is what the model asks about (through AtSize) to price a hierarchical
// algorithm at any size from a handful of plans: one per choice of phases.
//
// In reproducible mode the phases of a reduction run canonical flat
// algorithms (canonicalFlat) instead of flatFor's.
type phases struct{ intraSmall, interSmall, reproducible bool }

// phasesOf returns the phases of a call: the intra-node phases work on the
// whole vector (n elements), the inter-node phase on one of L slices (n/L
// rounded up), L the number of ranks of the smallest node (1 where there is
// nothing to compose: flatNodes).
//
// In reproducible mode the rule also weighs the ranks of a phase
// (canonicalSmall): the ranks of the largest node within, the nodes across.
func phasesOf(pr Params) phases {
	n, L := pr.Total(), 1
	m, k, N := pr.Nodes, pr.P, 1
	if !flatNodes(m) {
		L, k, N = minPerNode(m), m.MaxPerNode(), m.NumNodes()
	}
	slice := (n + L - 1) / L
	if pr.Reproducible {
		return phases{canonicalSmall(n, k), canonicalSmall(slice, N), true}
	}
	return phases{small(n), small(slice), false}
}

// small reports whether a phase on n elements runs the latency-bound
// algorithm.
func small(n int) bool { return n <= smallElems }

// canonicalSmall is small for a canonical phase on q ranks. Where q is not
// 2^a - 2^b the bandwidth-optimal canonical algorithms take q-1 rounds,
// not lg q, so tree doubling (⌈lg q⌉ rounds moving up to twice the vector)
// stays cheaper up to a size that grows with q: while 2n(lg q - 1) <=
// smallElems(2(q-1) - lg q), smallElems being about where a round costs
// as much as moving the vector.
func canonicalSmall(n, q int) bool {
	if foldCanonical(Params{P: q}) {
		return small(n)
	}
	lg := schedule.Log2(ceilPow2(q))
	return 2*n*(lg-1) <= smallElems*(2*(q-1)-lg)
}

// hierarchical completes the registry entry h of a hierarchical algorithm
// whose schedule build(pr, ph) builds with phases ph: Build picks the
// phases by the call's size (phasesOf), and AtSize returns, for a call, the
// algorithm with that call's phases fixed: one of four, made here once, so
// that equal phases give the same pointer.
func hierarchical(h Algorithm, build func(pr Params, ph phases) *schedule.Schedule) *Algorithm {
	fixed := map[phases]*Algorithm{} // read only once made
	for _, intra := range []bool{false, true} {
		for _, inter := range []bool{false, true} {
			for _, repro := range []bool{false, true} {
				ph := phases{intraSmall: intra, interSmall: inter, reproducible: repro}
				f := h
				f.SizeDependent, f.AtSize = false, nil
				f.Build = func(pr Params) *schedule.Schedule { return build(pr, ph) }
				fixed[ph] = &f
			}
		}
	}
	h.SizeDependent = true
	h.Build = func(pr Params) *schedule.Schedule { return build(pr, phasesOf(pr)) }
	h.AtSize = func(pr Params) *Algorithm { return fixed[phasesOf(pr)] }
	return &h
}

// flatFor returns the flat algorithm a phase of a hierarchical algorithm
// runs on q ranks, small or not (phases): recursive doubling (halving for
// a commutative reduce-scatter, Bruck for an allgather on q not a power of
// two) when small, Rabenseifner, ring (pairwise for a non-commutative
// reduce-scatter) or ring otherwise. Every choice keeps rank order where
// the op needs it.
func flatFor(c Collective, q int, small, commutative bool) *Algorithm {
	switch c {
	case Allreduce:
		if small {
			return allreduceRecursiveDoubling
		}
		return allreduceRabenseifner
	case ReduceScatter, ReduceScatterBlock:
		switch {
		case small && commutative:
			return reduceScatterRecursiveHalving
		case small:
			return reduceScatterRecursiveDoubling
		case commutative:
			return reduceScatterRing
		}
		return reduceScatterPairwise
	case Allgather:
		switch {
		case small && q&(q-1) == 0:
			return allgatherRecursiveDoubling
		case small:
			return allgatherBruck
		}
		return allgatherRing
	}
	panic("algorithms: no flat algorithm for " + c.String())
}

// flat returns the flat algorithm a phase of a reduction runs on q ranks:
// flatFor's, or in reproducible mode a canonical one.
func (ph phases) flat(c Collective, q int, small, commutative bool) *Algorithm {
	if ph.reproducible {
		return canonicalFlat(c, q, small)
	}
	return flatFor(c, q, small, commutative)
}

// canonicalFlat returns a flat algorithm of reduction c that computes the
// canonical association on q ranks, small or not: recursive doubling,
// Rabenseifner or the order-preserving reduce-scatters (recursive_doubling
// small, recursive_doubling_exchange large) where their fold is the tree
// (foldCanonical), tree_doubling (small) and
// pairwise_tree_ring or pairwise_tree (large) elsewhere.
func canonicalFlat(c Collective, q int, small bool) *Algorithm {
	fold := foldCanonical(Params{P: q})
	switch {
	case c == Allreduce && small && fold:
		return allreduceRecursiveDoubling
	case c == Allreduce && small:
		return allreduceTreeDoubling
	case c == Allreduce && fold:
		return allreduceRabenseifner
	case c == Allreduce:
		return allreducePairwiseTreeRing
	case small && fold:
		return reduceScatterRecursiveDoubling
	case small:
		return reduceScatterTreeDoubling
	case fold:
		return reduceScatterRecursiveDoublingExchange
	}
	return reduceScatterPairwiseTree
}

// hierarchicalCanonical is the Canonical of the hierarchical reductions.
// In reproducible mode their phases are canonical, and the whole is T(0, p)
// when every node is a subtree of it: nodes of 2^s consecutive ranks, the
// last one possibly short (or nothing to compose: the flat algorithm).
func hierarchicalCanonical(p Params) bool {
	m := p.Nodes
	if !p.Reproducible || flatNodes(m) {
		return p.Reproducible
	}
	k := m.Size(0)
	if k&(k-1) != 0 || m.P() != p.P {
		return false
	}
	for j := range m.NumNodes() {
		rs := m.Ranks(j)
		if rs[0] != j*k || rs[len(rs)-1] != rs[0]+len(rs)-1 || len(rs) != k && j != m.NumNodes()-1 {
			return false
		}
	}
	return true
}

// flatNodes reports whether a node map leaves nothing to compose: unknown
// (nil: every rank its own node), one node, or one rank per node. A
// hierarchical algorithm is then flatFor's algorithm on all ranks (small
// as its intra-node phases would be).
func flatNodes(m *NodeMap) bool {
	return m == nil || m.OneNode() || m.MaxPerNode() == 1
}

// minPerNode returns the number of ranks of the smallest node: the number
// of slices.
func minPerNode(m *NodeMap) int {
	k := m.P()
	for j := range m.NumNodes() {
		k = min(k, m.Size(j))
	}
	return k
}

// scattered returns a node whose ranks are not consecutive, or -1.
func scattered(m *NodeMap) int {
	for j := range m.NumNodes() {
		rs := m.Ranks(j)
		if rs[len(rs)-1]-rs[0] != len(rs)-1 {
			return j
		}
	}
	return -1
}

// restrictHierarchical is the restriction of collective c's hierarchical
// algorithm. A non-commutative op is combined node by node (the node's
// ranks in local order, then the nodes in node order), which is rank order
// only when every node's ranks are consecutive: with ranks placed
// round-robin across nodes, the algorithm needs a commutative op.
func restrictHierarchical(c Collective) func(Params) error {
	return func(p Params) error {
		m := p.Nodes
		if m == nil {
			return nil
		}
		if m.P() != p.P {
			return fmt.Errorf("has a node map of %d ranks for a call on %d", m.P(), p.P)
		}
		if !c.Reduces() || p.Commutative || flatNodes(m) {
			return nil
		}
		if j := scattered(m); j >= 0 {
			return fmt.Errorf("needs a commutative op unless each node's ranks are consecutive (node map %s: node %d holds ranks %s)", m, j, rankList(m.Ranks(j)))
		}
		return nil
	}
}

// rankList prints up to 8 ranks.
func rankList(rs []int) string {
	if len(rs) <= 8 {
		return fmt.Sprint(rs)
	}
	return strings.TrimSuffix(fmt.Sprint(rs[:8]), "]") + " ...]"
}

// intraRounds returns the length of an intra-node phase: the longest
// schedule of alg(k) on any node's k ranks.
func intraRounds(m *NodeMap, alg func(k int) *Algorithm) int {
	rounds := 0
	for j := range m.NumNodes() {
		k := m.Size(j)
		rounds = max(rounds, flatRounds(alg(k), k))
	}
	return rounds
}

// sliceGroup returns the ranks that hold slice l, one per node, in node
// order: the sub-communicator of an inter-node phase.
func sliceGroup(m *NodeMap, l int) []int {
	g := make([]int, m.NumNodes())
	for j := range g {
		g[j] = m.Ranks(j)[l]
	}
	return g
}

// sliceCounts returns the counts of an intra-node phase on k ranks: slice
// l's size for local rank l < L, nothing beyond.
func sliceCounts(k int, slice func(l int) int, L int) []int {
	c := make([]int, k)
	for l := range min(k, L) {
		c[l] = slice(l)
	}
	return c
}

// nodeSlices is how the hierarchical reduce-scatter and allgather cut a
// vector of per-rank blocks. Node j's part is the blocks of its ranks in
// local order, cut into L slices (EvenBlocks): slice l of node j is S(j,l).
// The ranks that hold slice l work on the group vector S(0,l) S(1,l) ...
// S(N-1,l) in the inter-node phase; the group vectors one after the other,
// l = 0..L-1, are the slice layout.
type nodeSlices struct {
	m      *NodeMap
	bl     schedule.Blocks   // the call's blocks, in rank order
	L, N   int               // slices, nodes
	parts  []schedule.Blocks // parts[j]: node j's part cut into L slices
	layout schedule.Blocks   // the slice layout: block l*N+j is S(j,l)
	// identity: the slice layout is the rank order (one slice, each
	// node's ranks consecutive), so no copy into or out of it is needed.
	identity bool
}

func newNodeSlices(m *NodeMap, bl schedule.Blocks) *nodeSlices {
	ns := &nodeSlices{m: m, bl: bl, L: minPerNode(m), N: m.NumNodes()}
	ns.parts = make([]schedule.Blocks, ns.N)
	for j := range ns.parts {
		t := 0
		for _, r := range m.Ranks(j) {
			t += bl.Counts[r]
		}
		ns.parts[j] = schedule.EvenBlocks(t, ns.L)
	}
	counts := make([]int, ns.L*ns.N)
	for l := range ns.L {
		for j := range ns.N {
			counts[l*ns.N+j] = ns.parts[j].Counts[l]
		}
	}
	ns.layout = schedule.BlocksOf(counts)
	ns.identity = true
	for j := range ns.N {
		ns.pieces(j, func(r, rOff, l, sOff, n int) {
			if bl.Displs[r]+rOff != ns.sliceAt(j, l)+sOff {
				ns.identity = false
			}
		})
	}
	return ns
}

// sliceAt returns where S(j,l) starts in the slice layout.
func (ns *nodeSlices) sliceAt(j, l int) int { return ns.layout.Displs[l*ns.N+j] }

// group returns where slice l's group vector starts in the slice layout and
// its length.
func (ns *nodeSlices) group(l int) (off, n int) {
	g := ns.layout.Span(schedule.Scratch, l*ns.N, (l+1)*ns.N)
	return g.Off, g.Len
}

// groupCounts returns S(j,l) for each node j: the counts of slice l's
// inter-node phase.
func (ns *nodeSlices) groupCounts(l int) []int {
	return ns.layout.Counts[l*ns.N : (l+1)*ns.N]
}

// maxGroup returns the longest group vector.
func (ns *nodeSlices) maxGroup() int {
	g := 0
	for l := range ns.L {
		_, n := ns.group(l)
		g = max(g, n)
	}
	return g
}

// pieces calls f, in order, for each overlap of a block of one of node j's
// ranks with one of the node's slices: rank r, the overlap's offset in r's
// block, the slice l, the offset in the slice and the length n > 0.
func (ns *nodeSlices) pieces(j int, f func(r, rOff, l, sOff, n int)) {
	ranks, part := ns.m.Ranks(j), ns.parts[j]
	ri, l, rOff, sOff := 0, 0, 0, 0
	for ri < len(ranks) && l < ns.L {
		rc, sc := ns.bl.Counts[ranks[ri]]-rOff, part.Counts[l]-sOff
		switch {
		case rc == 0:
			ri, rOff = ri+1, 0
		case sc == 0:
			l, sOff = l+1, 0
		default:
			n := min(rc, sc)
			f(ranks[ri], rOff, l, sOff, n)
			rOff, sOff = rOff+n, sOff+n
		}
	}
}

// relayout adds to rb the copies between the rank order (natural, the
// call's blocks in buffer nat) and the slice layout (in buffer lay from
// element off), toSlices saying which way.
func (ns *nodeSlices) relayout(rb schedule.RoundBuilder, nat buffer, lay place, toSlices bool) {
	ns.runs(func(at, sl, n int) {
		a, s := nat.At(at, n), lay.buf.At(lay.off+sl, n)
		if toSlices {
			rb.Copy(s, a)
		} else {
			rb.Copy(a, s)
		}
	})
}

// runs calls f for each run of elements that is contiguous both in rank
// order (from at) and in the slice layout (from sl), of length n > 0:
// pieces that continue each other in both are one run.
func (ns *nodeSlices) runs(f func(at, sl, n int)) {
	var pn, pl, n int // the pending run: natural offset, layout offset, length
	for j := range ns.N {
		ns.pieces(j, func(r, rOff, l, sOff, c int) {
			at, sl := ns.bl.Displs[r]+rOff, ns.sliceAt(j, l)+sOff
			if n > 0 && pn+n == at && pl+n == sl {
				n += c
				return
			}
			if n > 0 {
				f(pn, pl, n)
			}
			pn, pl, n = at, sl, c
		})
	}
	if n > 0 {
		f(pn, pl, n)
	}
}

// The shared-memory form. Where every node of a communicator has a shared
// segment, package coll runs a hierarchical algorithm's intra-node phases
// on the shm engine (package intranode) and its inter-node phase as a flat
// collective on a slice communicator (the ranks of one local rank l < L,
// one per node, in node order), not as the schedules of this file, which
// stay the reference the check executor proves and the form for device
// memory. Both forms cut the vector alike; the exported names below are
// those cuts, in elements.

// Composes reports whether the hierarchical algorithms have phases to
// compose on map m: several nodes, one at least with several ranks.
// Otherwise (unknown map, one node, one rank per node) they are flatFor's
// flat algorithm, and there is no shared-memory form.
func Composes(m *NodeMap) bool { return !flatNodes(m) }

// SliceCount returns L, the number of slices on map m: the number of
// ranks of its smallest node. Local ranks 0..L-1 hold a slice each.
func SliceCount(m *NodeMap) int { return minPerNode(m) }

// AllreduceSlices returns the cut of an allreduce of n elements into the
// L slices of map m: local rank l < L of every node holds block l.
func AllreduceSlices(m *NodeMap, n int) schedule.Blocks {
	return schedule.EvenBlocks(n, minPerNode(m))
}

// NodeSlices is the cut of a vector of per-rank blocks (counts[r]
// elements for rank r, in rank order) that the hierarchical reduce-scatter
// and allgather use: node j's part, the blocks of its ranks in local
// order, is cut into L slices S(j,l); the slice layout puts the group
// vectors S(0,l) ... S(N-1,l) one after the other, l = 0..L-1.
type NodeSlices struct{ ns *nodeSlices }

// NewNodeSlices cuts counts on map m; m must compose (Composes).
func NewNodeSlices(m *NodeMap, counts []int) NodeSlices {
	return NodeSlices{newNodeSlices(m, schedule.BlocksOf(counts))}
}

// Identity reports whether the slice layout is rank order (one slice,
// each node's ranks consecutive): no copy into or out of it is needed.
func (s NodeSlices) Identity() bool { return s.ns.identity }

// Group returns where slice l's group vector starts in the slice layout
// and its length.
func (s NodeSlices) Group(l int) (off, n int) { return s.ns.group(l) }

// GroupCounts returns the counts of slice l's inter-node phase: S(j,l)
// for each node j (the caller must not modify them).
func (s NodeSlices) GroupCounts(l int) []int { return s.ns.groupCounts(l) }

// GroupLens returns the counts of an intra-node phase over group vectors
// on a node of k ranks: group vector l's length for local rank l < L,
// nothing beyond.
func (s NodeSlices) GroupLens(k int) []int {
	return sliceCounts(k, func(l int) int { _, n := s.ns.group(l); return n }, s.ns.L)
}

// SliceAt returns where S(j,l) starts in the slice layout.
func (s NodeSlices) SliceAt(j, l int) int { return s.ns.sliceAt(j, l) }

// Part returns node j's part cut into its L slices: S(j,l) is block l,
// at its offset in the part (the caller must not modify it).
func (s NodeSlices) Part(j int) schedule.Blocks { return s.ns.parts[j] }

// Consecutive reports whether each node's ranks are consecutive, so that
// node j's part is contiguous in rank order, from PartAt(j).
func (s NodeSlices) Consecutive() bool { return scattered(s.ns.m) < 0 }

// PartAt returns where node j's part starts in rank order (its lowest
// rank's block); the part is contiguous there when Consecutive.
func (s NodeSlices) PartAt(j int) int { return s.ns.bl.Displs[s.ns.m.Ranks(j)[0]] }

// Aligned reports whether node j's slices are its ranks' blocks: S(j,l)
// is local rank l's block for l < L, and local ranks from L have empty
// blocks (equal blocks on a node of L ranks, say). A slice holder then
// holds exactly its own block, and handing pieces around inside the node
// is not needed.
func (s NodeSlices) Aligned(j int) bool {
	ranks, part := s.ns.m.Ranks(j), s.ns.parts[j]
	for l, r := range ranks {
		if c := s.ns.bl.Counts[r]; l < s.ns.L && c != part.Counts[l] || l >= s.ns.L && c != 0 {
			return false
		}
	}
	return true
}

// Runs calls f for each run of elements contiguous both in rank order
// (from at) and in the slice layout (from sl), of length n > 0: the
// copies between the two.
func (s NodeSlices) Runs(f func(at, sl, n int)) { s.ns.runs(f) }
