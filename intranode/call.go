//go:build linux

package intranode

import (
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/ops"
)

// A Call is one collective on a group, as the steps the package doc
// describes: in each, this rank fills its slot of the step's set (fill),
// publishes the step, and once every rank has published it, reads what
// it needs (read). Progress takes the steps the peers allow without ever
// waiting for one; Finish takes the rest, waiting. The blocking
// collectives are Start and Finish of the same call.
//
// A group has one call (the group serves one collective at a time): a
// Start, or any collective on the group, before the call is done breaks
// the protocol. The buffers belong to the call until it is done. Calls
// take the steps that the C half's calls of the same name take (one, for
// a call that fits a slot), in the same places of the slots.
type Call struct {
	g       *Group
	kind    kind
	in, out []byte
	r       ops.Reduction
	elem    int
	counts  []int
	displ   []int
	piece   int // elements per step: of every block (reduceScatter), of each block (allgather); bytes per chunk (allreduce)
	longest int // elements of the longest block (reduceScatter, allgather)
	steps   int
	i       int // the step under way
	filled  bool
	waiting bool          // Progress has found the peers missing at step i, since
	since   time.Duration // (on the group's clock)
	failed  error         // allgather by CMA: a failed read, reported once the peers are done
	done    bool
	err     error
}

type kind uint8

const (
	allreduceOne     kind = iota // up to Steps.OneStep: one step
	allreduceChunked             // a step per chunk and one more: reduce a slice of it, copy the last one's result out
	reduceScatter                // a piece of every block per step
	allgatherCopy                // a piece of each block per step, through the slots
	allgatherCMA                 // publish the block's address; read the peers' blocks, publish done
)

// StartAllreduce starts Allreduce as a call (see Allreduce).
func (g *Group) StartAllreduce(in, out []byte, r ops.Reduction) *Call {
	c := g.begin(in, out, r, r.Size())
	n := len(in)
	if n <= g.steps.OneStep {
		c.kind, c.steps = allreduceOne, 1
		return c
	}
	c.kind, c.piece = allreduceChunked, max(g.steps.Chunk/c.elem, 1)*c.elem
	c.steps = (n+c.piece-1)/c.piece + 1
	return c
}

// StartReduceScatter starts ReduceScatter as a call (see ReduceScatter).
func (g *Group) StartReduceScatter(in, out []byte, counts []int, r ops.Reduction) *Call {
	c := g.begin(in, out, r, r.Size())
	c.counts = counts
	c.displ, c.longest = g.displacements(counts)
	c.kind, c.piece = reduceScatter, max(g.steps.Piece/c.elem, 1)
	c.steps = (c.longest + c.piece - 1) / c.piece
	return c
}

// StartAllgather starts Allgather as a call (see Allgather).
func (g *Group) StartAllgather(in, out []byte, counts []int, elem int) *Call {
	c := g.begin(in, out, ops.Reduction{}, elem)
	c.counts = counts
	c.displ, c.longest = g.displacements(counts)
	if g.cma && c.longest*elem >= g.cmaMin && g.p > 1 {
		c.kind, c.steps = allgatherCMA, 2
		return c
	}
	c.kind, c.piece = allgatherCopy, max(g.steps.Gather/elem, 1)
	c.steps = (c.longest + c.piece - 1) / c.piece
	return c
}

// begin resets the group's call for a new collective; the Start sets
// kind, steps and what they need. Field by field: resetting the whole
// struct doubled the cost of a call that waits for no one.
func (g *Group) begin(in, out []byte, r ops.Reduction, elem int) *Call {
	g.warmUp(max(len(in), len(out)))
	c := &g.call
	c.g, c.in, c.out, c.r, c.elem = g, in, out, r, elem
	c.i, c.filled, c.waiting, c.failed, c.done, c.err = 0, false, false, nil, false, nil
	return c
}

// Progress takes every step it can without waiting for a peer and
// reports whether the call is done (then with its error) and whether it
// did anything. While the peers are missing it looks for dead or stalled
// ones as a waiting rank does (pidfd every 100 ms, the group's timeout
// counted from when Progress first found them missing).
func (c *Call) Progress() (done, moved bool, err error) {
	if c.done {
		return true, false, c.err
	}
	g := c.g
	for c.i < c.steps {
		if !c.filled {
			if !g.settled() {
				return c.missing(moved)
			}
			c.publish()
			moved = true
		}
		if !c.quiet() && !g.ready() {
			if c.early() {
				moved = true
			}
			return c.missing(moved)
		}
		c.read()
		moved = true
	}
	return true, moved, c.end(nil)
}

// missing is Progress's answer when the peers it needs are missing: it
// checks on them as a waiting rank does, from when it first found them
// missing.
func (c *Call) missing(moved bool) (done, _ bool, err error) {
	g := c.g
	now := time.Since(g.epoch)
	if !c.waiting {
		c.waiting, c.since, g.lastCheck = true, now, now
	} else if err := g.check(now, c.since); err != nil {
		return true, moved, c.end(err)
	}
	return false, moved, nil
}

// Finish takes the call's remaining steps, waiting for the peers, and
// returns its error.
func (c *Call) Finish() error {
	if c.done {
		return c.err
	}
	g := c.g
	for c.i < c.steps {
		if !c.filled {
			if !g.settled() {
				if err := c.wait(); err != nil {
					return c.end(err)
				}
			}
			c.publish()
		}
		if !c.quiet() && !g.ready() {
			g.early = c
			err := c.wait()
			g.early = nil
			if err != nil {
				return c.end(err)
			}
		}
		c.read()
	}
	return c.end(nil)
}

// wait waits for every rank to publish the group's step, counting from
// when Progress began waiting, if it did.
func (c *Call) wait() error {
	g := c.g
	start := time.Since(g.epoch)
	since := start
	if c.waiting {
		since = c.since // the wait began in Progress
	} else {
		g.lastCheck = start
	}
	c.waiting = false
	return g.waitFrom(start, since)
}

// quiet reports whether this rank reads nothing in step i, which it may
// then leave without waiting for the peers: a reduce-scatter step with
// nothing of its block. (Before it writes its slot again, it waits for
// every rank to have published the step, that is, finished reading the
// step before: Group.settled.)
func (c *Call) quiet() bool {
	if c.kind != reduceScatter {
		return false
	}
	_, n := c.blockPiece(c.g.rank)
	return n == 0
}

// publish fills this rank's part of step i and publishes it.
func (c *Call) publish() {
	c.fill()
	c.g.publish()
	c.filled, c.waiting = true, false
	if c.kind == allgatherCopy || c.kind == allgatherCMA {
		clear(c.g.got)
		c.g.got[c.g.rank] = true // its own block: copied below
	}
	switch {
	case c.kind == allgatherCMA && c.i == 0:
		c.copyOwn() // needs no peer: while they arrive
	case c.kind == allgatherCopy:
		if at, n := c.blockPiece(c.g.rank); n > 0 {
			move(c.out[(c.displ[c.g.rank]+at)*c.elem:], c.in[at*c.elem:(at+n)*c.elem]) // the same
		}
	}
}

// blockPiece is the piece of block q a reduce-scatter or allgather step
// i moves: its first element and its length.
func (c *Call) blockPiece(q int) (at, n int) {
	at = c.i * c.piece
	return at, min(c.piece, max(c.counts[q]-at, 0))
}

// placedAt is where reduce-scatter and allgather step i, the group's
// step number step, places every block's piece in its span of the slot
// (placed): the span is a piece for reduce-scatter, the slot for
// allgather, the bytes its longest block's piece.
func (c *Call) placedAt(step uint64) int {
	m := min(c.piece, max(c.longest-c.i*c.piece, 0)) * c.elem
	if c.kind == reduceScatter {
		return placed(step, m, c.piece*c.elem)
	}
	return placed(step, m, c.g.slot)
}

// read does this rank's part of step i once every rank has published it,
// and moves to the next step.
func (c *Call) read() {
	c.readStep()
	c.i++
	c.filled, c.waiting = false, false
}

// end makes the call done with err (a failed CMA read first: the
// peers' failure to finish came after it).
func (c *Call) end(err error) error {
	if c.failed != nil {
		err = c.failed
	}
	c.done, c.err, c.i = true, err, c.steps
	c.in, c.out, c.counts = nil, nil, nil // the caller's: not kept alive by the group
	return err
}

// fill writes this rank's part of step i into its slot of the step's set.
func (c *Call) fill() {
	g, elem := c.g, c.elem
	step := g.ctl[g.rank].step.Load() + 1 // the step this rank publishes next
	set := int(step % sets)
	switch c.kind {
	case allreduceOne:
		move(g.slotBuf(set, g.rank)[placed(step, len(c.in), g.slot):], c.in)
	case allreduceChunked:
		if c.i == c.steps-1 {
			return // the last step only copies the last chunk's result out
		}
		off, m, lo, hi := c.chunk(c.i)
		// The others read every slice of this rank's slot but its own,
		// which it reduces from in directly: 1/p less copying.
		slot := g.slotBuf(set, g.rank)[placed(step, c.piece, g.slot):]
		move(slot[:lo], c.in[off:off+lo])
		move(slot[hi:m], c.in[off+hi:off+m])
	case reduceScatter:
		buf := g.slotBuf(set, g.rank)[c.placedAt(step):]
		for q := range g.p {
			if at, n := c.blockPiece(q); n > 0 {
				move(buf[q*c.piece*elem:], c.in[(c.displ[q]+at)*elem:(c.displ[q]+at+n)*elem])
			}
		}
	case allgatherCopy:
		if at, n := c.blockPiece(g.rank); n > 0 {
			move(g.slotBuf(set, g.rank)[c.placedAt(step):], c.in[at*elem:(at+n)*elem])
		}
	case allgatherCMA:
		if c.i == 0 && len(c.in) > 0 {
			g.ctl[g.rank].addr.Store(uint64(uintptr(unsafe.Pointer(&c.in[0]))))
		}
	}
}

// readStep reads what this rank needs of step i from every rank's slot.
func (c *Call) readStep() {
	g, elem := c.g, c.elem
	s := g.set()
	switch c.kind {
	case allreduceOne:
		at := placed(g.step, len(c.in), g.slot)
		g.reduce(c.out[:len(c.in)], s, at, at+len(c.in), c.r, nil)
	case allreduceChunked:
		// Step i reduces this rank's slice of chunk i into the result
		// slot of its set and copies chunk i-1's result, which every
		// rank finished before publishing step i, out of the other.
		if c.i < c.steps-1 {
			off, _, lo, hi := c.chunk(c.i)
			at := placed(g.step, c.piece, g.slot)
			g.reduce(g.resultBuf(s)[at+lo:at+hi], s, at+lo, at+hi, c.r, c.in[off+lo:off+hi])
		}
		if c.i > 0 {
			off, m, _, _ := c.chunk(c.i - 1)
			at := placed(g.step-1, c.piece, g.slot)
			move(c.out[off:off+m], g.resultBuf((s + sets - 1) % sets)[at:at+m]) // the previous step's set
		}
	case reduceScatter:
		at, n := c.blockPiece(g.rank)
		if n == 0 {
			return
		}
		lo := g.rank*c.piece*elem + c.placedAt(g.step)
		// In place, out overwrites in from its start: writing piece j of
		// block r into out[j] is safe, since in[j] (block 0's piece j)
		// went into the slot before.
		g.reduce(c.out[at*elem:(at+n)*elem], s, lo, lo+n*elem, c.r, nil)
	case allgatherCopy:
		// This rank's own block needs no trip through the slot, and is in
		// out already (publish); early read some of the others'.
		for q := range g.p {
			if !g.got[q] {
				c.readBlock(q)
			}
		}
	case allgatherCMA:
		if c.i == 0 {
			c.readPeers()
		}
		// Step 1 is "done reading": once all have published it, no
		// rank's block is read any more, and every rank may return.
	}
}

// early reads, while the peers of an allgather's step are still
// arriving, the blocks of those that are there: each as soon as its rank
// has published the step (for CMA, its block's address), not once all
// have, so that the copies overlap the wait for the last one. It
// reports whether it read any.
func (c *Call) early() bool {
	g := c.g
	if c.kind != allgatherCopy && (c.kind != allgatherCMA || c.i != 0) || !c.filled {
		return false
	}
	read := false
	for q, done := range g.got {
		if !done && g.ctl[q].step.Load() >= g.step {
			c.readBlock(q)
			read = true
		}
	}
	return read
}

// readBlock reads rank q's piece of an allgather step into out: from
// q's slot, or (CMA) from q's buffer; a failed read ends the reading,
// and the call ends with it once the peers are done.
func (c *Call) readBlock(q int) {
	g, elem := c.g, c.elem
	g.got[q] = true
	if c.kind == allgatherCopy {
		if at, n := c.blockPiece(q); n > 0 {
			from := c.placedAt(g.step)
			move(c.out[(c.displ[q]+at)*elem:], g.slotBuf(g.set(), q)[from:from+n*elem])
		}
		return
	}
	n := c.counts[q] * elem
	if n == 0 || c.failed != nil {
		return
	}
	dst := c.out[c.displ[q]*elem : c.displ[q]*elem+n]
	if err := g.vmRead(g.pids[q], dst, uintptr(g.ctl[q].addr.Load())); err != nil {
		c.failed = g.readFailed(q, err)
	}
}

// chunk is allreduce chunk j: its offset and length in bytes, and this
// rank's slice [lo, hi) of it.
func (c *Call) chunk(j int) (off, m, lo, hi int) {
	off = j * c.piece
	m = min(c.piece, len(c.in)-off)
	lo, hi = split(m/c.elem, c.elem, c.g.p, c.g.rank)
	return
}
