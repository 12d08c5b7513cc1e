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
// A message up to Steps.OneStep takes one step: every rank copies it into
// its slot, and every rank reduces all slots. A larger one goes in chunks
// of p slices (a reduce-scatter and an allgather, pipelined): in step i
// every rank copies chunk i in, reduces its slice of it from all ranks
// into the shared result, and copies chunk i-1's whole result out, so
// that a chunk costs one synchronisation, and the last one more.
func (g *Group) Allreduce(in, out []byte, r ops.Reduction) error {
	return g.StartAllreduce(in, out, r).Finish()
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
	return g.StartReduceScatter(in, out, counts, r).Finish()
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
	return g.StartAllgather(in, out, counts, elem).Finish()
}

// Bcast copies buf on root to buf on every rank. The root reads
// nothing, so it leaves each step without waiting for the others, and
// waits for them before it writes its slot again (settled).
func (g *Group) Bcast(buf []byte, root int) error {
	g.warmUp(len(buf))
	steps := max(1, (len(buf)+g.slot-1)/g.slot)
	for i := range steps {
		at := i * g.slot
		m := min(g.slot, len(buf)-at)
		if g.rank == root {
			if !g.settled() {
				if err := g.waitAll(); err != nil {
					return err
				}
			}
			step := g.step + 1
			move(g.slotBuf(int(step%sets), root)[placed(step, m, g.slot):], buf[at:at+m])
			g.publish()
			continue
		}
		g.publish()
		if err := g.waitAll(); err != nil {
			return err
		}
		from := placed(g.step, m, g.slot)
		move(buf[at:at+m], g.slotBuf(g.set(), root)[from:from+m])
	}
	return nil
}

// moveMax is the most move copies with one runtime memmove: Go's memmove
// switches to non-temporal stores from 1 MiB, which send the data to
// memory instead of the cache, where a peer or this rank reads it next.
const moveMax = 512 << 10

// move is copy for the engine's data, whatever its length kept in the
// cache (moveMax); it returns the bytes copied.
func move(dst, src []byte) int {
	n := min(len(dst), len(src))
	for at := 0; at < n; at += moveMax {
		copy(dst[at:min(at+moveMax, n)], src[at:min(at+moveMax, n)])
	}
	return n
}
