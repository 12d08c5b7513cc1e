//go:build linux

package shm

import (
	"fmt"
	"github.com/gocoll/gocoll/internal/linuxsys"
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/transport"
)

// A rendezvous slot is one word in the sender's part of the segment:
// generation (24 bits), state (8) and a cookie (32). The sender moves it
// from free to posted; the receiver moves it on (reading, done, trunc,
// failed, or cts with its cookie); the sender takes it back.
const (
	slotFree    = 0
	slotPosted  = 1 // RTS sent; the sender may still withdraw it
	slotReading = 2 // the receiver is reading the buffer with CMA
	slotDone    = 3 // the receiver has the message
	slotTrunc   = 4 // the receive buffer was too short
	slotFailed  = 5 // the receiver gave up (closed, or could not read)
	slotCTS     = 6 // copy it through the ring: recData for cookie
	slotCopying = 7 // the sender is doing so
)

func slotWord(gen uint32, st uint8, cookie uint32) uint64 {
	return uint64(gen&0xffffff)<<40 | uint64(st)<<32 | uint64(cookie)
}

func slotParts(w uint64) (gen uint32, st uint8, cookie uint32) {
	return uint32(w >> 40), uint8(w >> 32), uint32(w)
}

// now is the time since New, on the monotonic clock.
func (e *Endpoint) now() time.Duration { return time.Since(e.epoch) }

// Start begins the ops. A send of at most the eager limit completes as soon
// as it is copied into the ring to its peer; a larger one once the peer has
// read it. Start never waits for a peer.
func (e *Endpoint) Start(ops []transport.Op) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range ops {
		op := &ops[i]
		op.Reset()
		switch {
		case op.Peer < 0 || op.Peer >= e.size || op.Peer == e.rank || e.lidx[op.Peer] < 0:
			op.Complete(0, &transport.Error{Peer: op.Peer, Err: transport.ErrBadPeer})
		case e.closed:
			op.Complete(0, errClosed)
		case e.failed != nil:
			op.Complete(0, e.failed)
		case op.Recv:
			e.startRecv(op, e.peers[e.lidx[op.Peer]])
		default:
			e.startSend(op, e.peers[e.lidx[op.Peer]])
		}
	}
	if !e.closed && e.seg != nil {
		e.progress()
	}
	return nil
}

func (e *Endpoint) newReq(op *transport.Op, p *peer, state uint8) *req {
	r := e.pool.getReq()
	r.op, r.p, r.state = op, p, state
	if e.opts.Timeout > 0 {
		r.since = e.now()
	}
	op.Handle = r
	return r
}

// finish completes r's op and recycles r.
func (e *Endpoint) finish(r *req, n int, err error) {
	r.op.Handle = nil
	r.op.Complete(n, err)
	e.completed = true
	e.events++
	e.pool.putReq(r)
}

func (e *Endpoint) startRecv(op *transport.Op, p *peer) {
	for i, m := range e.unexpected {
		if m.p != p || m.tag != op.Tag {
			continue
		}
		e.unexpected = slices.Delete(e.unexpected, i, i+1)
		r := e.newReq(op, p, recvPosted)
		if m.rdv {
			e.rendezvous(r, m.addr, m.total, m.slot, m.gen)
		} else if len(m.buf) > len(op.Buf) {
			e.finish(r, 0, errPeer(p, transport.ErrTruncate))
		} else {
			e.finish(r, copy(op.Buf, m.buf), nil)
		}
		e.pool.putMsg(m)
		return
	}
	if p.closed {
		op.Complete(0, errPeer(p, transport.ErrPeerFailed))
		return
	}
	e.posted = append(e.posted, e.newReq(op, p, recvPosted))
}

func (e *Endpoint) startSend(op *transport.Op, p *peer) {
	if p.closed {
		op.Complete(0, errPeer(p, transport.ErrPeerFailed))
		return
	}
	p.queue = append(p.queue, e.newReq(op, p, sendQueued))
}

// Test moves what can move (the rings, queued sends, bells) once and
// reports whether every op has completed.
func (e *Endpoint) Test(ops []transport.Op) (bool, error) {
	if !allDone(ops) {
		e.mu.Lock()
		if e.seg != nil {
			e.poll(ops)
		}
		e.mu.Unlock()
	}
	if !allDone(ops) {
		return false, nil
	}
	return true, transport.FirstError(ops)
}

// poll moves everything once: the rings, dead peers, ops past their
// timeout, the bells of peers with news. e.mu is held.
func (e *Endpoint) poll(ops []transport.Op) {
	if e.closed {
		return
	}
	e.progress()
	e.checkLiveness(false)
	if e.opts.Timeout > 0 {
		e.checkTimeouts(ops)
	}
	e.ringBells()
}

// Wait polls while messages move, and after e.spin without any progress
// sleeps on this rank's bell until a peer rings it, looking for dead peers
// every checkEvery.
func (e *Endpoint) Wait(ops []transport.Op) error {
	if allDone(ops) {
		return transport.FirstError(ops)
	}
	e.mu.Lock()
	if e.seg == nil || e.seg.mem == nil {
		// Closed and unmapped: Close completed every op it had, so
		// these were never started here.
		e.mu.Unlock()
		for i := range ops {
			if !ops[i].Done() {
				ops[i].Complete(0, errClosed)
			}
		}
		return transport.FirstError(ops)
	}
	e.waiting++ // Close, if under way, completes our ops and waits for us
	e.mu.Unlock()
	defer e.leave()
	bell := (*uint32)(unsafe.Pointer(&e.myCtl.bell))
	// Poll while things move: sleep only after e.spin without progress.
	lastMove, events := e.now(), uint64(0)
	for spins := 0; ; spins++ {
		now := e.now()
		sleeping := spins > 16 && now-lastMove > e.spin
		if sleeping {
			e.myCtl.sleepers.Add(1)
			atomic.AddInt32(&e.localSleepers, 1)
			if e.opts.Timeout > 0 {
				e.publishWaiting(ops)
			}
		}
		seq := e.myCtl.bell.Load()
		e.mu.Lock()
		if e.events != events {
			events, lastMove = e.events, now
		}
		e.poll(ops)
		e.mu.Unlock()
		done := allDone(ops)
		if sleeping {
			if !done {
				linuxsys.FutexSleep(bell, seq, e.sleepFor())
			}
			atomic.AddInt32(&e.localSleepers, -1)
			e.myCtl.sleepers.Add(^uint32(0))
		} else if spins%4 == 3 {
			if e.crowded || now-lastMove > yieldAfter {
				// A peer we wait for may be waiting for this core.
				linuxsys.SchedYield()
			} else if e.samePID {
				runtime.Gosched() // let ranks that share this process run
			}
		}
		if done {
			return transport.FirstError(ops)
		}
	}
}

func (e *Endpoint) leave() {
	e.mu.Lock()
	e.waiting--
	if e.waiting == 0 && e.seg != nil && e.seg.mem != nil {
		e.myCtl.waitingOn.Store(0)
	}
	if e.closed && e.waiting == 0 {
		e.idle.Broadcast()
	}
	e.mu.Unlock()
}

func (e *Endpoint) sleepFor() time.Duration {
	if t := e.opts.Timeout; t > 0 && t < 4*checkEvery {
		return max(t/4, time.Millisecond)
	}
	return checkEvery
}

func allDone(ops []transport.Op) bool {
	for i := range ops {
		if !ops[i].Done() {
			return false
		}
	}
	return true
}

// progress does everything that can be done without waiting: drain the
// incoming rings, fail ops with peers that closed, copy queued sends into
// the outgoing rings, and finish rendezvous sends the receivers answered.
func (e *Endpoint) progress() {
	// Look at the flags before draining: whatever a peer sent before it
	// closed is then in its ring.
	e.readNews()
	for _, p := range e.peers {
		if p != nil {
			e.drain(p)
		}
	}
	for _, p := range e.peers {
		if p != nil && p.closing {
			p.closing = false
			e.peerClosed(p)
		}
	}
	if len(e.rdv) > 0 {
		e.checkRdv()
	}
	for _, p := range e.peers {
		if p != nil && (len(p.queue) > 0 || len(p.streams) > 0) {
			e.push(p)
		}
	}
	e.ringBells()
}

// readNews reads, if closeEpoch moved since it last looked, what peers
// published in their control blocks: a rank dead, stalled or deadlocked
// fails the endpoint naming it; a clean close is handled by progress.
func (e *Endpoint) readNews() {
	ep := e.hdr.closeEpoch.Load()
	if ep == e.seenEpoch {
		return
	}
	e.seenEpoch = ep
	for _, p := range e.peers {
		if p == nil || p.closed || p.dead {
			continue
		}
		switch st := p.ctl.state.Load(); {
		case st&ctlDead != 0:
			p.dead = true // another rank saw it die
			e.fail(errPeer(p, transport.ErrPeerFailed))
		case st&ctlStalled != 0:
			p.stalled = true
			e.fail(errPeer(p, errStalledElsewhere))
		case st&ctlDeadlock != 0:
			e.fail(errPeer(p, errDeadlockElsewhere))
		case st&ctlClosed != 0:
			p.closing = true
		}
	}
	if e.myCtl.state.Load()&ctlStalled != 0 {
		e.fail(errSelfStalled)
	}
}

// refusedBy is the error of an op that p refused or withdrew because its
// endpoint failed. A rank that fails because of another publishes why
// before it refuses anything, so the news is read first: the op then
// names the rank at fault (the dead or stalled one), not p.
func (e *Endpoint) refusedBy(p *peer) error {
	e.readNews()
	if e.failed != nil {
		return e.failed
	}
	return errPeer(p, transport.ErrPeerFailed)
}

// wake schedules a ring of p's bell at the end of this progress pass, so
// that a Start of many ops costs one.
func (e *Endpoint) wake(p *peer) {
	if !p.wake {
		p.wake = true
		e.toWake = append(e.toWake, p)
	}
}

func (e *Endpoint) ringBells() {
	for _, p := range e.toWake {
		p.wake = false
		ringBell(p.ctl)
	}
	e.toWake = e.toWake[:0]
	if e.completed {
		e.completed = false
		if atomic.LoadInt32(&e.localSleepers) > 0 {
			ringBell(e.myCtl) // another goroutine may be waiting for what completed
		}
	}
}

// drain consumes every record published in p's ring to this rank.
func (e *Endpoint) drain(p *peer) {
	in := &p.in
	end := in.available()
	if in.pos == end {
		return
	}
	for in.pos != end {
		h := in.header(in.pos)
		plen := int(h.plen)
		body := in.pos + recHdrLen
		switch h.kind {
		case recEager:
			e.onEager(p, transport.Tag{Context: h.ctx, Seq: h.seq, Round: h.round}, body, plen)
		case recRTS:
			rts := (*[2]uint64)(unsafe.Pointer(&in.data[body&in.mask])) // never wraps
			e.onRTS(p, transport.Tag{Context: h.ctx, Seq: h.seq, Round: h.round}, uintptr(rts[0]), int(rts[1]), h.aux)
		case recData:
			e.onData(p, body, plen, uint32(h.aux))
		}
		in.pos += uint64(recLen(plen))
	}
	e.events++
	if in.release() {
		e.wake(p)
	}
}

// matchPosted removes and returns the first receive posted for (p, tag).
func (e *Endpoint) matchPosted(p *peer, tag transport.Tag) *req {
	for i, r := range e.posted {
		if r.p == p && r.op.Tag == tag {
			e.posted = slices.Delete(e.posted, i, i+1)
			return r
		}
	}
	return nil
}

func (e *Endpoint) onEager(p *peer, tag transport.Tag, body uint64, n int) {
	if r := e.matchPosted(p, tag); r != nil {
		if n > len(r.op.Buf) {
			e.finish(r, 0, errPeer(p, transport.ErrTruncate))
			return
		}
		p.in.get(body, r.op.Buf[:n])
		e.finish(r, n, nil)
		return
	}
	m := e.pool.getMsg()
	m.p, m.tag, m.buf = p, tag, e.pool.getBuf(n)
	p.in.get(body, m.buf)
	e.unexpected = append(e.unexpected, m)
}

func (e *Endpoint) onRTS(p *peer, tag transport.Tag, addr uintptr, total int, aux uint64) {
	slot, gen := uint32(aux), uint32(aux>>32)
	if slot >= slotsPer {
		return
	}
	if r := e.matchPosted(p, tag); r != nil {
		e.rendezvous(r, addr, total, slot, gen)
		return
	}
	m := e.pool.getMsg()
	m.p, m.tag, m.rdv = p, tag, true
	m.addr, m.total, m.slot, m.gen = addr, total, slot, gen
	e.unexpected = append(e.unexpected, m)
}

// rendezvous receives into r the message an RTS announced: straight from
// the sender's buffer with process_vm_readv, or, where that is not
// allowed, by asking the sender to copy it through the ring.
func (e *Endpoint) rendezvous(r *req, addr uintptr, total int, slot, gen uint32) {
	p, op := r.p, r.op
	sw := &p.slots[slot]
	posted := slotWord(gen, slotPosted, 0)
	if total > len(op.Buf) {
		if atomic.CompareAndSwapUint64(sw, posted, slotWord(gen, slotTrunc, 0)) {
			e.wake(p)
		}
		e.finish(r, 0, errPeer(p, transport.ErrTruncate))
		return
	}
	if p.cma {
		if !atomic.CompareAndSwapUint64(sw, posted, slotWord(gen, slotReading, 0)) {
			e.finish(r, 0, e.refusedBy(p)) // it withdrew the send
			return
		}
		err := linuxsys.VMRead(p.pid, op.Buf[:total], addr, &e.iov)
		reading := slotWord(gen, slotReading, 0)
		if err == nil {
			if !atomic.CompareAndSwapUint64(sw, reading, slotWord(gen, slotDone, 0)) {
				// The sender gave up on this rank while it read (it
				// found it stalled): its buffer may have changed.
				e.finish(r, 0, errPeer(p, errSenderGaveUp))
				return
			}
			e.wake(p)
			e.finish(r, total, nil)
			return
		}
		switch err {
		case syscall.EPERM, syscall.ENOSYS, syscall.EACCES:
			p.cma = false // not allowed after all: copy it
			if !atomic.CompareAndSwapUint64(sw, reading, posted) {
				e.finish(r, 0, errPeer(p, errSenderGaveUp))
				return
			}
		default: // ESRCH: the sender is gone
			atomic.CompareAndSwapUint64(sw, reading, slotWord(gen, slotFailed, 0))
			e.wake(p)
			if err == syscall.ESRCH {
				e.finish(r, 0, errPeer(p, transport.ErrPeerFailed))
				// It cannot have closed: Close waits for our read.
				// Its process is exiting.
				e.peerDied(p)
			} else {
				e.finish(r, 0, errPeer(p, fmt.Errorf("shm: reading the send buffer: %w", err)))
			}
			return
		}
	}
	cookie, ok := e.allocRecvID(r)
	if !ok {
		if atomic.CompareAndSwapUint64(sw, posted, slotWord(gen, slotFailed, 0)) {
			e.wake(p)
		}
		e.finish(r, 0, errPeer(p, fmt.Errorf("shm: too many messages in flight")))
		return
	}
	if !atomic.CompareAndSwapUint64(sw, posted, slotWord(gen, slotCTS, cookie)) {
		e.freeRecvID(cookie)
		e.finish(r, 0, e.refusedBy(p)) // it withdrew the send
		return
	}
	r.state, r.total, r.off, r.cookie = recvStream, total, 0, cookie
	e.wake(p)
}

// allocRecvID gives r a cookie for the recData records that will fill it:
// an index into recvIDs (16 bits) and a generation (16 bits).
func (e *Endpoint) allocRecvID(r *req) (uint32, bool) {
	if len(e.recvFree) == 0 {
		if len(e.recvIDs) == 1<<16 {
			return 0, false
		}
		e.recvIDs = append(e.recvIDs, nil)
		e.recvGen = append(e.recvGen, 0)
		e.recvFree = append(e.recvFree, uint16(len(e.recvIDs)-1))
	}
	i := e.recvFree[len(e.recvFree)-1]
	e.recvFree = e.recvFree[:len(e.recvFree)-1]
	e.recvGen[i]++
	e.recvIDs[i] = r
	return uint32(e.recvGen[i])<<16 | uint32(i), true
}

func (e *Endpoint) freeRecvID(cookie uint32) {
	i := uint16(cookie)
	e.recvIDs[i] = nil
	e.recvFree = append(e.recvFree, i)
}

func (e *Endpoint) onData(p *peer, body uint64, n int, cookie uint32) {
	i := int(uint16(cookie))
	if i >= len(e.recvIDs) {
		return
	}
	r := e.recvIDs[i]
	if r == nil || r.cookie != cookie || r.p != p || r.off+n > r.total {
		return // for a receive that has failed
	}
	p.in.get(body, r.op.Buf[r.off:r.off+n])
	r.off += n
	if e.opts.Timeout > 0 {
		r.since = e.now()
	}
	if r.off == r.total {
		e.freeRecvID(cookie)
		e.finish(r, r.total, nil)
	}
}

// push copies what it can of p's queued sends into the ring to p.
func (e *Endpoint) push(p *peer) {
	for len(p.streams) > 0 && e.pushStream(p, p.streams[0]) {
		p.streams[0] = nil
		p.streams = p.streams[:copy(p.streams, p.streams[1:])]
	}
	for len(p.queue) > 0 && e.pushOne(p, p.queue[0]) {
		p.queue[0] = nil
		p.queue = p.queue[:copy(p.queue, p.queue[1:])]
	}
}

// reserve reports whether the ring to p has want bytes free; if not, it
// asks p to ring this rank's bell when it makes room.
func (e *Endpoint) reserve(p *peer, want int) bool {
	if p.out.room(want) >= want {
		return true
	}
	p.out.hdr.waiting.Store(1)
	return p.out.room(want) >= want // p may have made room meanwhile
}

// pushOne writes one send's record: the message itself (eager) or its
// RTS, which needs a free rendezvous slot.
func (e *Endpoint) pushOne(p *peer, r *req) bool {
	op, out := r.op, &p.out
	n := len(op.Buf)
	if n <= p.eager {
		need := recLen(n)
		if !e.reserve(p, need) {
			return false
		}
		*out.header(out.pos) = recHeader{kind: recEager, plen: uint32(n), ctx: op.Tag.Context, seq: op.Tag.Seq, round: op.Tag.Round}
		out.put(out.pos+recHdrLen, op.Buf)
		out.pos += uint64(need)
		out.publish()
		e.events++
		e.wake(p)
		e.finish(r, n, nil)
		return true
	}
	if len(e.slotFree) == 0 || !e.reserve(p, cacheLine) {
		return false
	}
	slot := e.slotFree[len(e.slotFree)-1]
	e.slotFree = e.slotFree[:len(e.slotFree)-1]
	gen := (e.slotGen[slot] + 1) & 0xffffff
	if gen == 0 {
		gen = 1
	}
	e.slotGen[slot] = gen
	atomic.StoreUint64(&e.slots[slot], slotWord(gen, slotPosted, 0))
	*out.header(out.pos) = recHeader{kind: recRTS, plen: 16, ctx: op.Tag.Context, seq: op.Tag.Seq, round: op.Tag.Round, aux: uint64(gen)<<32 | uint64(slot)}
	rts := (*[2]uint64)(unsafe.Pointer(&out.data[(out.pos+recHdrLen)&out.mask]))
	rts[0], rts[1] = uint64(uintptr(unsafe.Pointer(&op.Buf[0]))), uint64(n)
	out.pos += cacheLine
	out.publish()
	e.events++
	e.wake(p)
	r.state, r.slot, r.gen = sendRdv, slot, gen
	e.rdv = append(e.rdv, r)
	return true
}

// pushStream copies the next chunks of a send the receiver could not read
// itself; it reports whether the whole message is in the ring.
func (e *Endpoint) pushStream(p *peer, r *req) bool {
	out, buf := &p.out, r.op.Buf
	maxChunk := len(out.data) / 2
	for r.off < len(buf) {
		// Wait for room for a sizeable chunk rather than trickle.
		want := recLen(min(len(buf)-r.off, maxChunk))
		enough := min(want, len(out.data)/8)
		if !e.reserve(p, enough) {
			return false
		}
		chunk := min(len(buf)-r.off, maxChunk, out.room(want)-recHdrLen)
		*out.header(out.pos) = recHeader{kind: recData, plen: uint32(chunk), aux: uint64(r.cookie)}
		out.put(out.pos+recHdrLen, buf[r.off:r.off+chunk])
		out.pos += uint64(recLen(chunk))
		out.publish()
		e.events++
		e.wake(p)
		r.off += chunk
		if e.opts.Timeout > 0 {
			r.since = e.now()
		}
	}
	e.freeSlot(r.slot)
	e.finish(r, len(buf), nil)
	return true
}

func (e *Endpoint) freeSlot(slot uint32) {
	atomic.StoreUint64(&e.slots[slot], slotFree)
	e.slotFree = append(e.slotFree, slot)
}

// checkRdv finishes the rendezvous sends whose receivers have answered,
// and those withdrawn (r.cancel) that no receiver is reading.
func (e *Endpoint) checkRdv() {
	for i := 0; i < len(e.rdv); {
		r := e.rdv[i]
		sw := &e.slots[r.slot]
		w := atomic.LoadUint64(sw)
		_, st, cookie := slotParts(w)
		n, err := 0, r.cancel
		switch st {
		case slotPosted:
			if r.cancel == nil || !atomic.CompareAndSwapUint64(sw, w, slotFree) {
				i++
				continue
			}
		case slotReading:
			switch {
			case r.p.dead:
				err = errPeer(r.p, transport.ErrPeerFailed)
			case r.p.stalled && r.cancel != nil && atomic.CompareAndSwapUint64(sw, w, slotWord(r.gen, slotFailed, 0)):
				// The reader stalled in the middle of the read and this
				// endpoint has failed: take the buffer back; should the
				// reader wake up, it finds the slot changed and fails.
			default:
				i++
				continue
			}
		case slotDone: // delivered, whatever happened since
			n, err = len(r.op.Buf), nil
		case slotTrunc:
			err = errPeer(r.p, transport.ErrTruncate)
		case slotCTS:
			if r.cancel == nil {
				atomic.StoreUint64(sw, slotWord(r.gen, slotCopying, 0))
				r.state, r.cookie, r.off = sendStream, cookie, 0
				r.p.streams = append(r.p.streams, r)
				e.rdv = slices.Delete(e.rdv, i, i+1)
				continue
			}
		default: // refused: the receiver's endpoint failed
			if err == nil && e.hdr.closeEpoch.Load() != e.seenEpoch {
				// It may have failed because of another rank: read
				// that first (failing the endpoint finishes r, with the
				// cause), then look again.
				e.readNews()
				e.checkRdv()
				return
			}
			if err == nil {
				err = errPeer(r.p, transport.ErrPeerFailed)
			}
		}
		e.rdv = slices.Delete(e.rdv, i, i+1)
		e.freeSlot(r.slot)
		e.finish(r, n, err)
	}
}

// peerClosed fails the ops with p, which has closed. What it sent before
// closing has been drained and can still be received.
func (e *Endpoint) peerClosed(p *peer) {
	p.closed = true
	err := errPeer(p, transport.ErrPeerFailed)
	e.posted = slices.DeleteFunc(e.posted, func(r *req) bool {
		if r.p != p {
			return false
		}
		e.finish(r, 0, err)
		return true
	})
	for i, r := range e.recvIDs {
		if r != nil && r.p == p {
			e.freeRecvID(uint32(e.recvGen[i])<<16 | uint32(i))
			e.finish(r, 0, err)
		}
	}
	e.failQueued(p, err)
	for _, r := range e.rdv {
		if r.p == p && r.cancel == nil {
			r.cancel = err
		}
	}
	e.checkRdv()
}

// failQueued completes with err the sends queued for peer p and those it
// was streaming through slots (their slots freed).
func (e *Endpoint) failQueued(p *peer, err error) {
	for _, r := range p.queue {
		e.finish(r, 0, err)
	}
	clear(p.queue)
	p.queue = p.queue[:0]
	for _, r := range p.streams {
		e.freeSlot(r.slot)
		e.finish(r, 0, err)
	}
	clear(p.streams)
	p.streams = p.streams[:0]
}

// fail marks the endpoint failed with err and completes every pending op
// with it, except sends a peer is reading, which complete when it is done.
func (e *Endpoint) fail(err error) {
	if e.failed == nil {
		e.failed = err
	}
	for _, r := range e.posted {
		e.finish(r, 0, err)
	}
	clear(e.posted)
	e.posted = e.posted[:0]
	for i, r := range e.recvIDs {
		if r != nil {
			e.freeRecvID(uint32(e.recvGen[i])<<16 | uint32(i))
			e.finish(r, 0, err)
		}
	}
	for _, p := range e.peers {
		if p == nil {
			continue
		}
		e.failQueued(p, err)
	}
	for _, r := range e.rdv {
		if r.cancel == nil {
			r.cancel = err
		}
	}
	e.checkRdv()
	// Refuse the rendezvous sends no receive will match now, so that
	// their senders need not wait to notice.
	for _, m := range e.unexpected {
		if m.rdv && atomic.CompareAndSwapUint64(&m.p.slots[m.slot], slotWord(m.gen, slotPosted, 0), slotWord(m.gen, slotFailed, 0)) {
			e.wake(m.p)
		}
		e.pool.putMsg(m)
	}
	clear(e.unexpected)
	e.unexpected = e.unexpected[:0]
}

// checkLiveness looks, at most every checkEvery unless forced, for local
// peers whose process has exited without closing: a crash. It fails the
// endpoint, naming the dead rank.
func (e *Endpoint) checkLiveness(force bool) {
	now := e.now()
	if !force && now-e.lastCheck < checkEvery {
		return
	}
	e.lastCheck = now
	for _, p := range e.peers {
		if p == nil {
			continue
		}
		if b := p.ctl.beat.Load(); b != p.beat {
			p.beat, p.beatAt = b, now
		}
		if p.closed || p.dead || p.pid == e.pid || !linuxsys.Exited(p.pidfd, p.pid) {
			continue
		}
		if p.ctl.state.Load()&ctlClosed != 0 {
			p.closing = true // a clean exit; progress fails what is left
			continue
		}
		if e.hdr.closeEpoch.Load() != e.seenEpoch {
			// Before it ended it may have said why (a rank it found dead
			// or stalled): the next progress pass reads that first.
			return
		}
		e.peerDied(p)
	}
}

// peerDied fails the endpoint because p's process is gone, and tells the
// other ranks at once, rather than each at its next check: then every
// rank names the dead one, not a rank that failed because of it and
// closed.
//
// An endpoint that has failed already publishes nothing: p most likely
// ended because of that failure (a rank that gives up ends the job), and
// ranks that have not yet read the news would blame p for it.
func (e *Endpoint) peerDied(p *peer) {
	p.dead = true
	if e.failed != nil {
		// Its ops have all failed; only sends it was reading wait on it.
		e.checkRdv()
		return
	}
	// Publish first: a peer whose send fail refuses below then sees
	// the death before the refusal.
	p.ctl.state.Or(ctlDead)
	e.hdr.closeEpoch.Add(1)
	e.fail(errPeer(p, transport.ErrPeerFailed))
	for _, q := range e.peers {
		if q != nil && !q.dead {
			e.wake(q)
		}
	}
}

// checkTimeouts fails the endpoint if one of ops has made no progress for
// Options.Timeout, blaming the rank that stalled: the op's peer, unless
// that peer is itself asleep in Wait for another rank. Then the rank it
// waits for is the suspect, and the suspect's own waiter, which sees it
// stall first-hand, blames it for everyone (ctlStalled); this rank gives
// up by itself only after twice the timeout. Ranks that wait for each
// other in a cycle are a deadlock (mismatched calls), reported at once.
func (e *Endpoint) checkTimeouts(ops []transport.Op) {
	now := e.now()
	for i := range ops {
		r, ok := ops[i].Handle.(*req)
		if !ok || ops[i].Done() || now-r.since <= e.opts.Timeout {
			continue
		}
		suspect, chain, cycle := e.blame(r.p, now)
		if e.hdr.closeEpoch.Load() != e.seenEpoch {
			// A peer closed, died or blamed someone meanwhile (a rank
			// that gives up stops waiting only after it says why): the
			// next progress pass learns who, before anyone is blamed.
			return
		}
		switch {
		case cycle:
			// Tell the others at once: they are in the cycle too, or
			// wait for a rank that is.
			e.myCtl.state.Or(ctlDeadlock)
			e.hdr.closeEpoch.Add(1)
			e.fail(&transport.Error{Peer: r.p.rank, Err: fmt.Errorf("%w: ranks %v wait for each other in a cycle: a deadlock (mismatched collective calls? GOCOLL_CHECK=1 finds them)",
				transport.ErrTimeout, append([]int{e.rank}, chain...))})
			for _, q := range e.peers {
				if q != nil {
					ringBell(q.ctl)
				}
			}
		case suspect == r.p:
			e.peerStalled(r.p)
		case now-r.since > 2*e.opts.Timeout:
			e.fail(&transport.Error{Peer: r.p.rank, Err: fmt.Errorf("%w: it has itself been waiting for rank %d", transport.ErrTimeout, chain[len(chain)-1])})
		default:
			continue
		}
		return
	}
}

// blame follows the ranks that wait for one another from p, and returns
// the first that is not asleep in Wait (the suspect) and the ranks on the
// way, or no suspect when the chain leaves this host or closes a cycle.
func (e *Endpoint) blame(p *peer, now time.Duration) (suspect *peer, chain []int, cycle bool) {
	for cur := p; ; {
		chain = append(chain, cur.rank)
		w := int(cur.ctl.waitingOn.Load()) - 1
		if w < 0 || now-cur.beatAt > aliveWindow {
			return cur, chain, false // not waiting, or waiting but no longer beating
		}
		if w == e.rank || slices.Contains(chain, w) {
			return nil, chain, true
		}
		if w >= e.size || e.lidx[w] < 0 {
			return nil, append(chain, w), false // waits for a rank on another host
		}
		cur = e.peers[e.lidx[w]]
	}
}

// aliveWindow is how recently a peer asleep in Wait must have beaten to
// count as alive: it beats at least every checkEvery.
const aliveWindow = time.Second

// peerStalled fails the endpoint because p made no progress for the
// timeout, and tells the other local ranks, so that all blame p.
func (e *Endpoint) peerStalled(p *peer) {
	p.stalled = true
	p.ctl.state.Or(ctlStalled)
	e.hdr.closeEpoch.Add(1)
	e.fail(&transport.Error{Peer: p.rank, Err: transport.ErrTimeout})
	for _, q := range e.peers {
		if q != nil && q != p {
			ringBell(q.ctl)
		}
	}
}

// publishWaiting says, in this rank's control block, which rank it
// sleeps for (the peer of its first pending op), and beats.
func (e *Endpoint) publishWaiting(ops []transport.Op) {
	for i := range ops {
		if !ops[i].Done() {
			e.myCtl.waitingOn.Store(int32(ops[i].Peer) + 1)
			break
		}
	}
	e.myCtl.beat.Add(1)
}

var (
	errSenderGaveUp      = fmt.Errorf("%w: it gave up on this rank (stalled) while this rank read its message", transport.ErrPeerFailed)
	errStalledElsewhere  = fmt.Errorf("%w (another rank waited for it longer than the timeout)", transport.ErrTimeout)
	errDeadlockElsewhere = fmt.Errorf("%w: it found ranks waiting for each other in a cycle: a deadlock (mismatched collective calls? GOCOLL_CHECK=1 finds them)", transport.ErrTimeout)
	errSelfStalled       = &transport.Error{Peer: -1, Err: fmt.Errorf("%w: this rank's peers gave up on it: it made no progress for longer than the timeout (was it stopped?)", transport.ErrTimeout)}
)
