package coll

import (
	"fmt"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/ops"
)

// The hierarchical algorithms' shared-memory form.
//
// A hierarchical algorithm (package algorithms) is one schedule: its
// intra-node phases are messages between the ranks of a node. Where every
// node's ranks share a segment, those phases run faster on the shm engine
// (one synchronisation per step instead of a message per peer), which is
// not a schedule. So on host memory the call runs in
// three steps instead: the shm collective on the rank's node communicator,
// the collective's inter-node part on its slice communicator (the ranks of
// one local rank, one per node, in node order), and the shm collective
// back; the vector is cut exactly as the schedule cuts it
// (algorithms.AllreduceSlices, algorithms.NodeSlices).
//
// Both forms keep the one name "hierarchical", not a new algorithm: forcing
// it (GOCOLL_<COLL>_ALGORITHM), tuning rules and the model all mean the
// same cut and phases, and each call takes the form its memory and the
// communicator's nodes allow. The
// schedule stays the reference the check executor proves, the form for
// device memory, and the fallback where some node has no segment.
// GOCOLL_DEBUG=info says which form ran (form=shm or form=schedule).
//
// The inter-node step is a flat call on the slice communicator with the
// tuner's choice for it (not the forced algorithm of the outer call: that
// is the hierarchical one): a communicator of one rank per node is exactly
// the inter-node phase's shape, so rules and the model that know the
// network apply to it.

// hierarchicalName is the algorithm whose calls may take the shm form.
const hierarchicalName = "hierarchical"

// hierarchy is a communicator's node and slice communicators.
type hierarchy struct {
	m     *algorithms.NodeMap
	node  *Comm // this rank's node, with a shared segment unless it is one rank
	slice *Comm // local rank l < L of every node, by node; nil for l >= L
}

// composes reports whether a call of coll with alg is a hierarchical
// algorithm with phases to compose on c's node map: the calls that may
// take the shm form. It depends on c and the call's algorithm alone, so
// every rank of c answers alike.
func (c *Comm) composes(coll algorithms.Collective, alg *algorithms.Algorithm) bool {
	switch coll {
	case algorithms.Allreduce, algorithms.ReduceScatter, algorithms.ReduceScatterBlock, algorithms.Allgather:
		return alg.Name == hierarchicalName && !alg.Direct && algorithms.Composes(c.nodes)
	}
	return false
}

// hierarchyFor returns the node and slice communicators for a call that
// composes, nil where it takes the schedule form (device memory, or no
// segment on some node). The first such call makes them, on every rank
// alike; c.mu is held, and let go meanwhile, since the splits are
// collectives of c.
func (c *Comm) hierarchyFor(onDevice bool) *hierarchy {
	if !c.hierTried {
		c.hierTried = true
		c.mu.Unlock()
		made := c.makeHierarchy()
		c.mu.Lock()
		c.hier = made
	}
	if onDevice {
		return nil
	}
	return c.hier
}

// Form returns what GOCOLL_DEBUG=info adds to the line of a call of coll
// with the algorithm named alg on c, for callers that print their own
// line (the preload): " form=shm" or " form=schedule" for a hierarchical
// call with phases to compose, "" for any other. At the first such call
// it makes the node and slice communicators, as the call would:
// collective, so every rank of c calls it at the same call, or none does.
func (c *Comm) Form(coll algorithms.Collective, alg string, onDevice bool) string {
	a, err := algorithms.Lookup(coll, alg)
	if err != nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || !c.composes(coll, a) {
		return ""
	}
	return formNote(c.hierarchyFor(onDevice))
}

// makeHierarchy splits c into its node and slice communicators and
// returns them where every node's communicator got a shared segment (or
// is one rank), else nil: then every rank keeps the schedule form, since
// the forms' messages cannot meet. Collective over c; c.mu is not held
// (the splits are collectives of c).
func (c *Comm) makeHierarchy() *hierarchy {
	m := c.nodes
	local, L := m.Local(c.rank), algorithms.SliceCount(m)
	h := &hierarchy{m: m}
	var errs [2]error
	// Keyed by local rank: the node's ranks in local order, as the
	// schedules number them.
	h.node, errs[0] = c.SplitShared(local, c.name+"/node")
	color := Undefined
	if local < L {
		color = local
	}
	h.slice, errs[1] = c.Split(color, m.Node(c.rank), c.name+"/slice")
	ok := errs[0] == nil && errs[1] == nil && (h.node.Size() == 1 || h.node.Shared())
	all, err := exchange{c}.AllTrue(ok)
	if err == nil && all {
		if c.cfg.Debug != nil {
			fmt.Fprintf(c.cfg.Debug, "gocoll: rank %d: %s: hierarchical runs its intra-node phases on shared memory (node of %d ranks, %d slices across %d nodes)\n",
				c.rank, c.name, h.node.Size(), L, m.NumNodes())
		}
		return h
	}
	if c.cfg.Debug != nil {
		why := "a node has no shared segment"
		switch {
		case errs[0] != nil:
			why = errs[0].Error()
		case errs[1] != nil:
			why = errs[1].Error()
		case err != nil:
			why = err.Error()
		}
		fmt.Fprintf(c.cfg.Debug, "gocoll: rank %d: %s: hierarchical keeps the schedule form: %s\n", c.rank, c.name, why)
	}
	h.free()
	return nil
}

// free releases the node and slice communicators.
func (h *hierarchy) free() {
	for _, s := range []*Comm{h.node, h.slice} {
		if s != nil {
			s.Free()
		}
	}
}

// formNote is what GOCOLL_DEBUG=info adds to a call that composes.
func formNote(h *hierarchy) string {
	if h != nil {
		return " form=shm"
	}
	return " form=schedule"
}

// runHierarchical runs a hierarchical call in the shm form; c.mu is held.
func (c *Comm) runHierarchical(call string, coll algorithms.Collective, h *hierarchy, p algorithms.Params, in, out []byte, size int, kernel ops.Kernel) error {
	switch coll {
	case algorithms.Allreduce:
		return c.hierAllreduce(call, h, p, in, out, size, kernel)
	case algorithms.ReduceScatter, algorithms.ReduceScatterBlock:
		return c.hierReduceScatter(call, h, p, in, out, size, kernel)
	}
	return c.hierAllgather(call, h, p, in, out, size)
}

// hierAllreduce: local rank l < L gets slice l of its node's sum (shm
// reduce-scatter), allreduces it with the holders of slice l on the other
// nodes, and every rank of the node gathers the L slices (shm allgather).
// The slice is reduced straight into its place in out.
func (c *Comm) hierAllreduce(call string, h *hierarchy, p algorithms.Params, in, out []byte, size int, kernel ops.Kernel) error {
	local := h.m.Local(c.rank)
	sl := algorithms.AllreduceSlices(h.m, p.Count)
	counts := nodeCounts(h.node.Size(), sl.Counts)
	at, mine := p.Count, 0
	if local < len(sl.Counts) {
		at, mine = sl.Displs[local], sl.Counts[local]
	}
	own := out[at*size : (at+mine)*size]

	// Reduce-scatter phase. In place the engine leaves the result at the
	// start of the vector; move it to its place.
	dst := own
	if p.InPlace {
		dst = out[:mine*size]
	}
	if err := h.node.shmReduceScatter(call, in, dst, counts, size, kernel, p.Reproducible); err != nil {
		return err
	}
	copy(own, dst)

	// Allreduce phase, across the nodes.
	if mine > 0 && h.slice.Size() > 1 {
		s := h.slice
		sp := algorithms.Params{P: s.Size(), Rank: s.rank, Count: mine, Commutative: p.Commutative, InPlace: true, Reproducible: p.Reproducible}
		if err := s.run(&op{call: call, coll: algorithms.Allreduce, force: "auto", own: true, bytes: int64(mine * size), p: sp, in: own, out: own, size: size, kernel: kernel}); err != nil {
			return err
		}
	}

	// Allgather phase.
	return h.node.shmAllgather(call, own, out, counts, size)
}

// perNodeMin is the smallest average part of a node (bytes) for which the
// reduce-scatter and allgather run one engine call per node straight
// between rank order and their group vectors, rather than copying the
// whole vector to or from the slice layout: each engine call synchronises
// the node at least once, which N of cost more than the copy for small
// parts at many nodes.
const perNodeMin = 64 << 10

// perNode reports whether a call of total bytes on the cut ns takes one
// engine call per node (nodes of consecutive ranks, where each node's
// part is contiguous in rank order) instead of the slice layout.
func perNode(ns algorithms.NodeSlices, nodes, total int) bool {
	return !ns.Identity() && ns.Consecutive() && total >= nodes*perNodeMin
}

// hierReduceScatter: local rank l < L gets group vector l reduced over
// its node (shm reduce-scatter: of the slice layout, or one per node's
// part), the holders of slice l reduce-scatter it across the nodes, each
// keeping its own node's slice, and every rank of the node gets its block
// (shm allgather of the node's part, unless each holder's slice is its
// own block).
func (c *Comm) hierReduceScatter(call string, h *hierarchy, p algorithms.Params, in, out []byte, size int, kernel ops.Kernel) error {
	m := h.m
	node, local, k, N := m.Node(c.rank), m.Local(c.rank), h.node.Size(), m.NumNodes()
	ns := algorithms.NewNodeSlices(m, p.Counts)
	part, aligned := ns.Part(node), ns.Aligned(node)
	total := len(in) / size
	gOff, gLen := 0, 0 // this rank's group vector: none beyond local rank L-1
	if local < algorithms.SliceCount(m) {
		gOff, gLen = ns.Group(local)
	}
	byNode := perNode(ns, N, len(in))

	// Scratch: the slice layout (unless the input is in it, or the
	// reduce-scatter goes node by node), this rank's group vector, the
	// node's part (unless aligned).
	layLen, partLen := total, part.Total
	if ns.Identity() || byNode {
		layLen = 0
	}
	if aligned {
		partLen = 0
	}
	buf := c.scratchBytes((layLen + gLen + partLen) * size)
	grp := buf[layLen*size : (layLen+gLen)*size]
	partBuf := buf[(layLen+gLen)*size : (layLen+gLen+partLen)*size]

	// Intra-node reduce-scatter: local rank l gets group vector l.
	switch {
	case byNode:
		counts := make([]int, k)
		for j := range N {
			pj := ns.Part(j)
			copy(counts, pj.Counts)
			var dst []byte
			if gLen > 0 {
				at := ns.SliceAt(j, local) - gOff
				dst = grp[at*size : (at+pj.Counts[local])*size]
			}
			at := ns.PartAt(j)
			if err := h.node.shmReduceScatter(call, in[at*size:(at+pj.Total)*size], dst, counts, size, kernel, p.Reproducible); err != nil {
				return err
			}
		}
	default:
		lay := in
		if !ns.Identity() {
			lay = buf[:total*size]
			ns.Runs(func(at, sl, n int) { copy(lay[sl*size:(sl+n)*size], in[at*size:(at+n)*size]) })
		}
		if err := h.node.shmReduceScatter(call, lay, grp, ns.GroupLens(k), size, kernel, p.Reproducible); err != nil {
			return err
		}
	}

	// Inter-node reduce-scatter, in place: the holder on node j keeps
	// S(j,l) at the start of grp.
	held := grp[:0]
	if gLen > 0 {
		gc := ns.GroupCounts(local)
		if s := h.slice; s.Size() > 1 {
			sp := algorithms.Params{P: s.Size(), Rank: s.rank, Counts: gc, Commutative: p.Commutative, InPlace: true, Reproducible: p.Reproducible}
			if err := s.run(&op{call: call, coll: algorithms.ReduceScatter, force: "auto", own: true, bytes: int64(gLen * size), p: sp, in: grp, out: grp, size: size, kernel: kernel}); err != nil {
				return err
			}
		}
		held = grp[:gc[node]*size]
	}

	// Each rank's block: the slice it holds, or from the node's part.
	mine := p.Counts[c.rank]
	if aligned {
		copy(out[:mine*size], held) // a rank from local rank L has an empty block
		return nil
	}
	if err := h.node.shmAllgather(call, held, partBuf, nodeCounts(k, part.Counts), size); err != nil {
		return err
	}
	before := 0
	for _, r := range m.Ranks(node)[:local] {
		before += p.Counts[r]
	}
	copy(out[:mine*size], partBuf[before*size:(before+mine)*size])
	return nil
}

// hierAllgather: each slice holder gets its slice S(node,l) (its own
// block when the node is aligned, else from an shm allgather of the
// node's part), allgathers it with the holders of slice l across the
// nodes into group vector l, and every rank of the node gathers the group
// vectors (shm allgather: into the slice layout, copied into rank order
// unless it is rank order, or one per node's part straight into out).
func (c *Comm) hierAllgather(call string, h *hierarchy, p algorithms.Params, in, out []byte, size int) error {
	m := h.m
	node, local, k, N := m.Node(c.rank), m.Local(c.rank), h.node.Size(), m.NumNodes()
	ns := algorithms.NewNodeSlices(m, p.Counts)
	part, aligned := ns.Part(node), ns.Aligned(node)
	total := len(out) / size
	holds := local < algorithms.SliceCount(m)
	gOff, gLen := 0, 0
	if holds {
		gOff, gLen = ns.Group(local)
	}
	byNode := perNode(ns, N, len(out))

	// Scratch: the node's part (unless aligned), the slice layout (out
	// itself where it is rank order; only this rank's group vector where
	// the last phase goes node by node).
	partLen, layLen := part.Total, total
	if aligned {
		partLen = 0
	}
	switch {
	case ns.Identity():
		layLen = 0
	case byNode:
		layLen = gLen
	}
	buf := c.scratchBytes((partLen + layLen) * size)
	partBuf := buf[:partLen*size]
	lay, layOff := out, 0 // the slice layout, and where lay starts in it
	switch {
	case byNode:
		lay, layOff = buf[partLen*size:], gOff
	case !ns.Identity():
		lay = buf[partLen*size:]
	}
	grp := lay[(gOff-layOff)*size : (gOff-layOff+gLen)*size]

	// The slice this rank holds: its own block, or from the node's part.
	slice := in
	if !aligned {
		ranks := m.Ranks(node)
		blocks := make([]int, len(ranks))
		for i, r := range ranks {
			blocks[i] = p.Counts[r]
		}
		if err := h.node.shmAllgather(call, in, partBuf, blocks, size); err != nil {
			return err
		}
		if holds {
			slice = partBuf[part.Displs[local]*size : (part.Displs[local]+part.Counts[local])*size]
		}
	}

	// Inter-node allgather of slice l, in place in its group vector.
	if holds {
		at := ns.SliceAt(node, local) - gOff
		mine := grp[at*size : at*size+len(slice)]
		copy(mine, slice)
		if s := h.slice; gLen > 0 && s.Size() > 1 {
			sp := algorithms.Params{P: s.Size(), Rank: s.rank, Counts: ns.GroupCounts(local), Commutative: true, InPlace: true}
			if err := s.run(&op{call: call, coll: algorithms.Allgather, force: "auto", own: true, bytes: int64(gLen * size), p: sp, in: mine, out: grp, size: size}); err != nil {
				return err
			}
		}
	}

	// Intra-node allgather of the group vectors.
	if byNode {
		counts := make([]int, k)
		for j := range N {
			pj := ns.Part(j)
			copy(counts, pj.Counts)
			var src []byte
			if holds {
				at := ns.SliceAt(j, local) - gOff
				src = grp[at*size : (at+pj.Counts[local])*size]
			}
			at := ns.PartAt(j)
			if err := h.node.shmAllgather(call, src, out[at*size:(at+pj.Total)*size], counts, size); err != nil {
				return err
			}
		}
		return nil
	}
	if err := h.node.shmAllgather(call, grp, lay[:total*size], ns.GroupLens(k), size); err != nil {
		return err
	}
	if !ns.Identity() {
		ns.Runs(func(at, sl, n int) { copy(out[at*size:(at+n)*size], lay[sl*size:(sl+n)*size]) })
	}
	return nil
}

// nodeCounts returns the counts of an intra-node phase on k ranks: slices
// for local ranks 0..L-1, nothing beyond.
func nodeCounts(k int, slices []int) []int {
	c := make([]int, k)
	copy(c, slices)
	return c
}

// shmReduceScatter is the engine's reduce-scatter on a node communicator
// (a copy on a node of one rank, which has no segment).
func (c *Comm) shmReduceScatter(call string, in, out []byte, counts []int, size int, kernel ops.Kernel, reproducible bool) error {
	if c.Size() == 1 {
		copy(out, in[:counts[0]*size])
		return nil
	}
	return c.runDirect(call, algorithms.ReduceScatter, algorithms.Params{Counts: counts, Reproducible: reproducible}, in, out, size, kernel)
}

// shmAllgather is the engine's allgather on a node communicator (a copy
// on a node of one rank).
func (c *Comm) shmAllgather(call string, in, out []byte, counts []int, size int) error {
	if c.Size() == 1 {
		copy(out, in)
		return nil
	}
	return c.runDirect(call, algorithms.Allgather, algorithms.Params{Counts: counts}, in, out, size, nil)
}

// scratchBytes returns n bytes of the communicator's scratch memory
// (grown as needed, kept between calls); c.mu is held.
func (c *Comm) scratchBytes(n int) []byte {
	if cap(c.scratch) < n {
		c.scratch = make([]byte, n)
	}
	return c.scratch[:n]
}
