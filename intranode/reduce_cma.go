//go:build linux

package intranode

import "unsafe"

// ReduceCMAMin is the default message (bytes) from which Allreduce and
// ReduceScatter read the peers' data with cross-memory attach instead of
// through the slots, where every rank can: never with more ranks than
// cores, where nothing says it pays.
//
// Why: through the slots every byte is written into shared lines that a
// peer then reads, and rewriting a line a peer's cache holds costs a
// transfer of its own; how much depends on where the ranks' cores sit,
// and on the reference VM it moved from minute to minute (the same 4 MiB
// reduce-scatter took 187 us in one hour and 1071 in the next, while
// MPICH's took 399 and 414). CMA writes no shared line: each rank reads
// what it reduces straight from the peers' buffers into its own.
const ReduceCMAMin = 1 << 20

// The reductions by CMA (Call's allreduceCMA and reduceScatterCMA):
//
//	step 0: publish the address of in (allreduce: and of out); once all
//	        have, read every peer's part of this rank's block (its slice
//	        of the vector) with process_vm_readv, chunk by chunk, and
//	        reduce it with this rank's part, in rank order, into out
//	step 1: reduce-scatter: done reading (in place, the result moves
//	        to out only now: it overwrites input others read);
//	        allreduce: this rank's slice is in out; read every peer's
//	        slice from its out
//	step 2: allreduce: done reading
//
// No rank returns while a peer may still read its buffers.

// startReduceCMA makes c a reduction by CMA of this rank's block
// [lo, hi) (bytes of in): two steps for a reduce-scatter, three for an
// allreduce.
func (c *Call) startReduceCMA(k kind) {
	c.kind, c.steps = k, 2
	if k == allreduceCMA {
		c.steps = 3
	}
}

// useReduceCMA says whether a reduction of n bytes goes by CMA: the same
// on every rank (the agreed CMA, the options, n).
func (g *Group) useReduceCMA(n int) bool {
	return g.cma && g.p > 1 && g.redCMAMin > 0 && n >= g.redCMAMin
}

// mine returns this rank's block of a reduction by CMA, in bytes of in.
func (c *Call) mine() (lo, hi int) {
	if c.kind == allreduceCMA {
		return split(len(c.in)/c.elem, c.elem, c.g.p, c.g.rank)
	}
	lo = c.displ[c.g.rank] * c.elem
	return lo, lo + c.counts[c.g.rank]*c.elem
}

// fillCMA publishes the buffers' addresses with step 0.
func (c *Call) fillCMA() {
	g := c.g
	if c.i != 0 {
		return
	}
	if len(c.in) > 0 {
		g.ctl[g.rank].addr.Store(uint64(uintptr(unsafe.Pointer(&c.in[0]))))
	}
	if c.kind == allreduceCMA && len(c.out) > 0 {
		g.ctl[g.rank].outAddr.Store(uint64(uintptr(unsafe.Pointer(&c.out[0]))))
	}
}

// readCMA does this rank's part of step i of a reduction by CMA.
func (c *Call) readCMA() {
	g := c.g
	lo, hi := c.mine()
	switch {
	case c.i == 0:
		c.reduceCMA(lo, hi)
	case c.i == 1 && c.kind == reduceScatterCMA && c.inPlace() && c.failed == nil:
		copy(c.out[:hi-lo], g.cmaBuf[:hi-lo])
	case c.i == 1 && c.kind == allreduceCMA:
		for j := 1; j < g.p && c.failed == nil; j++ {
			q := (g.rank + j) % g.p
			qlo, qhi := split(len(c.in)/c.elem, c.elem, g.p, q)
			if qhi > qlo {
				c.vmReadAt(q, c.out[qlo:qhi], g.ctl[q].outAddr.Load(), qlo)
			}
		}
	}
}

// inPlace reports whether out is in.
func (c *Call) inPlace() bool {
	return len(c.in) > 0 && len(c.out) > 0 && &c.in[0] == &c.out[0]
}

// vmReadAt reads len(dst) bytes at offset off of rank q's buffer at
// address base; a failed read ends the reading (c.failed), and the call
// ends with it once the peers are done.
func (c *Call) vmReadAt(q int, dst []byte, base uint64, off int) {
	if err := c.g.vmRead(c.g.pids[q], dst, uintptr(base)+uintptr(off)); err != nil {
		c.failed = c.g.readFailed(q, err)
	}
}

// reduceCMA reduces bytes [lo, hi) of every rank's in into this rank's
// result, LargeChunk at a time: the peers' parts read into the group's
// buffer, this rank's from in (copied where the result overwrites it),
// combined in rank order by the call's Reduction. The result goes to
// out, or, for a reduce-scatter in place, to the buffer's start until
// step 1.
func (c *Call) reduceCMA(lo, hi int) {
	g, p := c.g, c.g.p
	chunk := max(LargeChunk/c.elem, 1) * c.elem
	res := 0 // bytes of the buffer kept for the result
	if c.kind == reduceScatterCMA && c.inPlace() {
		res = hi - lo
	}
	if need := res + p*chunk; len(g.cmaBuf) < need {
		g.cmaBuf = make([]byte, need)
	}
	for at := lo; at < hi && c.failed == nil; at += chunk {
		m := min(chunk, hi-at)
		var dst []byte
		switch {
		case c.kind == allreduceCMA:
			dst = c.out[at : at+m]
		case res > 0:
			dst = g.cmaBuf[at-lo : at-lo+m]
		default:
			dst = c.out[at-lo : at-lo+m]
		}
		g.parts = g.parts[:0]
		for q := range p {
			part := g.cmaBuf[res+q*chunk : res+q*chunk+m]
			switch {
			case q != g.rank:
				if c.failed == nil {
					c.vmReadAt(q, part, g.ctl[q].addr.Load(), at)
				}
			case &c.in[at] == &dst[0]: // in place: the result overwrites this part
				copy(part, c.in[at:at+m])
			default:
				part = c.in[at : at+m]
			}
			g.parts = append(g.parts, part)
		}
		if c.failed == nil {
			g.scratch = c.r.Reduce(dst, g.parts, g.scratch)
		}
	}
}
