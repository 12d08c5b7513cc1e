package coll

import (
	"sync/atomic"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/ops"
)

// hierRoute runs a hierarchical algorithm in its shared-memory form
// (hierarchy.go says when): the shm engine on the rank's node
// communicator, the inter-node part on its slice communicator, and the
// shm engine back. Its phases are calls on other communicators, so the
// call is not resumable: it runs as one piece (pieceStep).
type hierRoute struct{}

func (hierRoute) start(c *Comm, cl call, pl plan) (stepper, error) {
	s := &c.steps.piece
	s.begin(c, cl, pl.h)
	return s, nil
}

// runHierarchical runs a hierarchical call in the shm form.
func (c *Comm) runHierarchical(cl *call, h *hierarchy) error {
	name, p, in, out, size, kernel := cl.label(), cl.p, cl.in.bytes(), cl.out.bytes(), cl.size, cl.kernel
	switch cl.coll {
	case algorithms.Allreduce:
		return c.hierAllreduce(name, h, p, in, out, size, kernel)
	case algorithms.ReduceScatter, algorithms.ReduceScatterBlock:
		return c.hierReduceScatter(name, h, p, in, out, size, kernel)
	}
	return c.hierAllgather(name, h, p, in, out, size)
}

// pieceStep is a call that runs only as one piece: Finish runs it on the
// caller's goroutine; Progress, which must not wait, runs it on a
// goroutine of its own and reports it done once that returns. The piece
// needs nothing that c.mu guards: while it runs every other call of c
// waits for it (queued behind it, or finishing it: Finish waits for the
// goroutine), and Close settles it first.
type pieceStep struct {
	c       *Comm
	cl      call
	h       *hierarchy
	running bool          // a goroutine runs the piece
	ended   chan struct{} // closed when that goroutine is done
	done    atomic.Bool   // the piece has run; err is final
	err     error
}

func (s *pieceStep) begin(c *Comm, cl call, h *hierarchy) {
	s.c, s.cl, s.h = c, cl, h
	s.running, s.ended, s.err = false, nil, nil
	s.done.Store(false)
}

func (s *pieceStep) Progress() (done, moved bool, err error) {
	if s.done.Load() {
		return true, false, s.err
	}
	if s.running {
		return false, false, nil
	}
	c, ended := s.c, make(chan struct{})
	s.running, s.ended = true, ended
	go func() {
		s.err = c.runHierarchical(&s.cl, s.h)
		s.done.Store(true)
		close(ended)
		c.progress() // complete the request and begin the next, unless someone is at it
	}()
	return false, true, nil
}

func (s *pieceStep) Finish() error {
	if !s.running && !s.done.Load() {
		s.err = s.c.runHierarchical(&s.cl, s.h)
		s.done.Store(true)
		return s.err
	}
	s.settle()
	return s.err
}

// settle waits for the piece's goroutine, if one runs it.
func (s *pieceStep) settle() {
	if s.running {
		<-s.ended
	}
}

// hierAllreduce: local rank l < L gets slice l of its node's sum (shm
// reduce-scatter), allreduces it with the holders of slice l on the other
// nodes, and every rank of the node gathers the L slices (shm allgather).
// The slice is reduced straight into its place in out.
func (c *Comm) hierAllreduce(name string, h *hierarchy, p algorithms.Params, in, out []byte, size int, kernel ops.Kernel) error {
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
	if err := h.node.shmReduceScatter(name, in, dst, counts, size, kernel, p.Reproducible); err != nil {
		return err
	}
	copy(own, dst)

	// Allreduce phase, across the nodes.
	if mine > 0 && h.slice.Size() > 1 {
		s := h.slice
		sp := algorithms.Params{P: s.Size(), Rank: s.rank, Count: mine, Commutative: p.Commutative, InPlace: true, Reproducible: p.Reproducible}
		if err := s.run(&call{name: name, coll: algorithms.Allreduce, force: "auto", own: true, bytes: int64(mine * size), p: sp, in: hostBuffer(own), out: hostBuffer(own), size: size, kernel: kernel}); err != nil {
			return err
		}
	}

	// Allgather phase.
	return h.node.shmAllgather(name, own, out, counts, size)
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
func (c *Comm) hierReduceScatter(name string, h *hierarchy, p algorithms.Params, in, out []byte, size int, kernel ops.Kernel) error {
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
			if err := h.node.shmReduceScatter(name, in[at*size:(at+pj.Total)*size], dst, counts, size, kernel, p.Reproducible); err != nil {
				return err
			}
		}
	default:
		lay := in
		if !ns.Identity() {
			lay = buf[:total*size]
			ns.Runs(func(at, sl, n int) { copy(lay[sl*size:(sl+n)*size], in[at*size:(at+n)*size]) })
		}
		if err := h.node.shmReduceScatter(name, lay, grp, ns.GroupLens(k), size, kernel, p.Reproducible); err != nil {
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
			if err := s.run(&call{name: name, coll: algorithms.ReduceScatter, force: "auto", own: true, bytes: int64(gLen * size), p: sp, in: hostBuffer(grp), out: hostBuffer(grp), size: size, kernel: kernel}); err != nil {
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
	if err := h.node.shmAllgather(name, held, partBuf, nodeCounts(k, part.Counts), size); err != nil {
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
func (c *Comm) hierAllgather(name string, h *hierarchy, p algorithms.Params, in, out []byte, size int) error {
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
		if err := h.node.shmAllgather(name, in, partBuf, blocks, size); err != nil {
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
			if err := s.run(&call{name: name, coll: algorithms.Allgather, force: "auto", own: true, bytes: int64(gLen * size), p: sp, in: hostBuffer(mine), out: hostBuffer(grp), size: size}); err != nil {
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
			if err := h.node.shmAllgather(name, src, out[at*size:(at+pj.Total)*size], counts, size); err != nil {
				return err
			}
		}
		return nil
	}
	if err := h.node.shmAllgather(name, grp, lay[:total*size], ns.GroupLens(k), size); err != nil {
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
func (c *Comm) shmReduceScatter(name string, in, out []byte, counts []int, size int, kernel ops.Kernel, reproducible bool) error {
	if c.Size() == 1 {
		copy(out, in[:counts[0]*size])
		return nil
	}
	return c.runShm(name, algorithms.ReduceScatter, algorithms.Params{Counts: counts, Reproducible: reproducible}, in, out, size, kernel)
}

// shmAllgather is the engine's allgather on a node communicator (a copy
// on a node of one rank).
func (c *Comm) shmAllgather(name string, in, out []byte, counts []int, size int) error {
	if c.Size() == 1 {
		copy(out, in)
		return nil
	}
	return c.runShm(name, algorithms.Allgather, algorithms.Params{Counts: counts}, in, out, size, nil)
}
