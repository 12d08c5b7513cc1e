//go:build linux

package intranode

import "github.com/gocoll/gocoll/ops"

// Barrier returns once every rank has entered it.
func (g *Group) Barrier() error {
	g.publish()
	return g.waitAll()
}

// reduce sets dst to the canonical association T(0, p) of slots 0 .. p-1
// of set s, each restricted to [lo, hi) (ops.Reduction): rank order kept,
// so non-commutative ops work, and the same bits as every algorithm that
// runs in reproducible mode. If own is not nil it stands for this rank's
// slot (already cut to [lo, hi)): the rank's own input, which then need
// not go through its slot.
func (g *Group) reduce(dst []byte, s, lo, hi int, r ops.Reduction, own []byte) {
	g.parts = g.parts[:0]
	for q := range g.p {
		g.parts = append(g.parts, g.part(s, q, lo, hi, own))
	}
	g.scratch = r.Reduce(dst, g.parts, g.scratch)
}

// part is [lo, hi) of rank q's slot in set s, or own for this rank.
func (g *Group) part(s, q, lo, hi int, own []byte) []byte {
	if q == g.rank && own != nil {
		return own
	}
	return g.slotBuf(s, q)[lo:hi]
}

// split returns rank q's share [lo, hi) of n elements of size elem, in
// bytes: q or q+1 elements each.
func split(n, elem, p, q int) (lo, hi int) {
	base, extra := n/p, n%p
	lo = q*base + min(q, extra)
	hi = lo + base
	if q < extra {
		hi++
	}
	return lo * elem, hi * elem
}

// Allreduce combines in (len(in) bytes of elem-byte elements) from every
// rank into out on every rank; in may be out.
//
// A message that fits a slot takes one step: every rank copies it into its
// slot, and every rank reduces all slots. A larger one goes
// in chunks of p slices: every rank copies its chunk in, reduces one slice
// of it from all ranks into the shared result, and, one step later,
// copies the whole result out.
func (g *Group) Allreduce(in, out []byte, r ops.Reduction) error {
	n, elem := len(in), r.Size()
	if n <= g.slot {
		copy(g.slotBuf(g.next(), g.rank), in)
		g.publish()
		if err := g.waitAll(); err != nil {
			return err
		}
		s := g.set()
		g.reduce(out[:n], s, 0, n, r, nil)
		return nil
	}
	chunk := g.slot / elem * elem
	for off := 0; off < n; off += chunk {
		m := min(chunk, n-off)
		// The others read every slice of this rank's slot but its own,
		// which it reduces from in directly: 1/p less copying.
		lo, hi := split(m/elem, elem, g.p, g.rank)
		slot := g.slotBuf(g.next(), g.rank)
		copy(slot[:lo], in[off:off+lo])
		copy(slot[hi:m], in[off+hi:off+m])
		g.publish()
		if err := g.waitAll(); err != nil {
			return err
		}
		s := g.set()
		res := g.resultBuf(s)
		g.reduce(res[lo:hi], s, lo, hi, r, in[off+lo:off+hi])
		g.publish() // this step's buffers are the next set; the result stays in res
		if err := g.waitAll(); err != nil {
			return err
		}
		copy(out[off:off+m], res[:m])
	}
	return nil
}

// next returns the buffer set of the step this rank publishes next: fill
// its slot there, then publish.
func (g *Group) next() int { return int((g.ctl[g.rank].step.Load() + 1) & 1) }

// displacements returns, in elements, where each block of counts starts,
// and the longest block; the slice is reused from call to call.
func (g *Group) displacements(counts []int) (displ []int, longest int) {
	if cap(g.displ) < len(counts) {
		g.displ = make([]int, len(counts))
	}
	displ = g.displ[:len(counts)]
	total := 0
	for q, c := range counts {
		displ[q] = total
		total += c
		longest = max(longest, c)
	}
	return displ, longest
}

// ReduceScatter combines in (the sum of counts elements) from every rank
// and leaves block q, counts[q] elements, in out on rank q. in may be out
// (the result then lands at its start).
//
// Each step moves one piece of every block: every rank copies its pieces
// into its slot, then reduces its own block's piece from all slots,
// straight into out.
func (g *Group) ReduceScatter(in, out []byte, counts []int, r ops.Reduction) error {
	elem := r.Size()
	displ, longest := g.displacements(counts)
	piece := max(g.slot/g.p/elem, 1) // elements of each block per step
	mine := counts[g.rank]
	// In place, out overwrites in from its start: keep the input of this
	// rank's own block region safe by never writing out past what the
	// pieces already read. Writing piece j of block r into out[j] is safe:
	// in[j] (block 0's piece j) was copied into the slot before.
	for at := 0; at < longest; at += piece {
		buf := g.slotBuf(g.next(), g.rank)
		for q := range g.p {
			if n := min(piece, max(counts[q]-at, 0)); n > 0 {
				copy(buf[q*piece*elem:], in[(displ[q]+at)*elem:(displ[q]+at+n)*elem])
			}
		}
		g.publish()
		if err := g.waitAll(); err != nil {
			return err
		}
		n := min(piece, max(mine-at, 0))
		if n == 0 {
			continue
		}
		s := g.set()
		lo, hi := g.rank*piece*elem, (g.rank*piece+n)*elem
		g.reduce(out[at*elem:(at+n)*elem], s, lo, hi, r, nil)
	}
	return nil
}

// Allgather gathers counts[q] elements from every rank q into out, one
// block after the other; in may already be this rank's block of out.
//
// From a longest block of cmaMin bytes, where every rank may use CMA,
// each rank reads every peer's block straight from the peer's buffer (one
// copy, two steps); below, or without CMA, blocks go through the slots (two
// copies, a step per slot of the longest block). Every rank takes the same
// path: it depends on counts and elem alone.
func (g *Group) Allgather(in, out []byte, counts []int, elem int) error {
	displ, longest := g.displacements(counts)
	if g.cma && longest*elem >= g.cmaMin && g.p > 1 {
		return g.allgatherCMA(in, out, counts, displ, elem)
	}
	piece := max(g.slot/elem, 1)
	for at := 0; at < longest; at += piece {
		if n := min(piece, max(counts[g.rank]-at, 0)); n > 0 {
			copy(g.slotBuf(g.next(), g.rank), in[at*elem:(at+n)*elem])
		}
		g.publish()
		if err := g.waitAll(); err != nil {
			return err
		}
		s := g.set()
		for q := range g.p {
			if n := min(piece, max(counts[q]-at, 0)); n > 0 {
				src := g.slotBuf(s, q)[:n*elem]
				if q == g.rank {
					src = in[at*elem : (at+n)*elem] // this rank's own block needs no trip through the slot
				}
				copy(out[(displ[q]+at)*elem:], src)
			}
		}
	}
	return nil
}

// Bcast copies buf on root to buf on every rank.
func (g *Group) Bcast(buf []byte, root int) error {
	steps := max(1, (len(buf)+g.slot-1)/g.slot)
	for i := range steps {
		at := i * g.slot
		m := min(g.slot, len(buf)-at)
		if g.rank == root {
			copy(g.slotBuf(g.next(), root), buf[at:at+m])
		}
		g.publish()
		if err := g.waitAll(); err != nil {
			return err
		}
		if g.rank != root {
			copy(buf[at:at+m], g.slotBuf(g.set(), root)[:m])
		}
	}
	return nil
}
