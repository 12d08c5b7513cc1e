package device

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/schedule"
	"github.com/gocoll/gocoll/transport"
)

// run is one call in progress.
type run struct {
	x   *Executor
	st  *state
	e   *Engine
	drv gpu.Driver
	c   *Call

	in, out, scratch          uintptr    // the schedule's buffers, in the engine's context
	inMem, outMem, scratchMem gpu.Memory // their allocations
	copyOut                   bool       // out is a temporary: copy it to the caller's at the end

	evMu  sync.Mutex // st.events, from the transfer goroutines
	fence gpu.Event  // recorded on the compute stream at the start of the round
	ready bool       // fence has completed (peers may read our memory)
	count []int      // per peer: transfers of the round so far
}

// Message kinds, in the top bits of the tag's round: a round's data
// segments, IPC descriptors and acknowledgements never match each other.
// Bits 20..27 hold the transfer's index among the round's transfers
// between the same two ranks, so every transfer has tags of its own.
const (
	kindData = 0
	kindDesc = 1
	kindAck  = 2

	maxRounds    = 1 << 20
	maxTransfers = 1 << 8
)

func (r *run) tag(round, idx int, kind uint32) transport.Tag {
	t := r.c.Tag
	t.Round = uint32(round) | uint32(idx)<<20 | kind<<28
	return t
}

func (r *run) sameContext(m gpu.Memory) bool {
	return m.OnDevice() && (m.Context == r.e.ctx || m.Context == 0 && m.Device == r.e.dev)
}

func (r *run) run() error {
	c, st := r.c, r.st
	drv, comp := r.drv, st.comp
	if len(c.Sched.Rounds) >= maxRounds {
		return fmt.Errorf("device executor: %d rounds is too many", len(c.Sched.Rounds))
	}
	r.count = make([]int, len(c.Ranks))

	// Before anything touches the caller's buffers: the application's
	// work on its default streams.
	if err := r.order(); err != nil {
		return err
	}

	// The buffers in the engine's context: a buffer elsewhere (host
	// memory, another device), or one a reduction kernel could not read
	// (not aligned for its element type), is copied into a temporary
	// first; cuMemcpyAsync takes any byte address.
	r.out, r.outMem = c.Out.Ptr, c.Out.Mem
	inPlace := c.In.Len > 0 && c.In.Ptr >= c.Out.Ptr && c.In.Ptr+uintptr(c.In.Len) <= c.Out.Ptr+uintptr(c.Out.Len)
	align := r.kernelAlign()
	if c.Out.Len > 0 && (!r.sameContext(c.Out.Mem) || c.Out.Ptr%align != 0) {
		if err := st.ensure(&st.tmpOut, c.Out.Len); err != nil {
			return err
		}
		r.out, r.outMem, r.copyOut = st.tmpOut.ptr, st.tmpOut.mem, true
		if inPlace {
			if err := drv.MemcpyAsync(r.out, c.Out.Ptr, c.Out.Len, comp); err != nil {
				return err
			}
		}
	}
	switch {
	case inPlace:
		r.in, r.inMem = r.out+(c.In.Ptr-c.Out.Ptr), r.outMem
	case c.In.Len > 0 && (!r.sameContext(c.In.Mem) || c.In.Ptr%align != 0):
		if err := st.ensure(&st.tmpIn, c.In.Len); err != nil {
			return err
		}
		r.in, r.inMem = st.tmpIn.ptr, st.tmpIn.mem
		if err := drv.MemcpyAsync(r.in, c.In.Ptr, c.In.Len, comp); err != nil {
			return err
		}
	default:
		r.in, r.inMem = c.In.Ptr, c.In.Mem
	}
	if n := c.Sched.ScratchLen * c.ElemSize; n > 0 {
		if err := st.ensure(&st.scratch, n); err != nil {
			return err
		}
		r.scratch, r.scratchMem = st.scratch.ptr, st.scratch.mem
	}

	for i := range c.Sched.Rounds {
		rd := &c.Sched.Rounds[i]
		if rd.Communicates() {
			if err := r.communicate(i, rd); err != nil {
				return fmt.Errorf("round %d: %w", i, err)
			}
		}
		for _, s := range rd.Steps {
			if err := r.step(s); err != nil {
				return fmt.Errorf("round %d: %v: %w", i, s, err)
			}
		}
	}
	if r.copyOut {
		if err := drv.MemcpyAsync(c.Out.Ptr, r.out, c.Out.Len, comp); err != nil {
			return err
		}
	}
	// The call ends when the compute stream has caught up: it waited
	// for every copy of the last round.
	ev, err := r.event()
	if err != nil {
		return err
	}
	defer r.putEvents(ev)
	if err := drv.EventRecord(ev, comp); err != nil {
		return err
	}
	return r.wait(ev)
}

// order makes the call wait for the work the application queued before
// it on the legacy default stream and on the calling thread's per-thread
// default stream of the engine's context (gocoll's streams are
// non-blocking and would not): an event recorded on each, waited for by
// the compute stream. That is enough for every stream: the first copies
// of the caller's buffers and every kernel are on the compute stream, and
// before each round's transfers the copy streams wait for a fence
// recorded on it (communicate), which direct and IPC peers wait for too
// (makeReady). It runs on the thread that called Run, locked to it, the
// application's thread when called from C: the per-thread stream is that
// thread's.
func (r *run) order() error {
	var evs [2]gpu.Event
	defer func() {
		for _, ev := range evs {
			if ev != 0 {
				r.putEvents(ev)
			}
		}
	}()
	for i, s := range []gpu.Stream{gpu.StreamLegacy, gpu.StreamPerThread} {
		ev, err := r.event()
		if err != nil {
			return err
		}
		evs[i] = ev
		if err := r.drv.EventRecord(ev, s); err != nil {
			return fmt.Errorf("waiting for the application's default stream: %w", err)
		}
	}
	for _, ev := range evs {
		if err := r.drv.StreamWaitEvent(r.st.comp, ev); err != nil {
			return err
		}
	}
	return nil
}

// kernelAlign returns the alignment a reduction kernel needs of its
// operands: the size of its element type (the PTX loads and stores one
// element at a time, ld.global/st.global of 2, 4 or 8 bytes, which must
// be naturally aligned), or 1 when the call launches no kernel. step
// checks every launch's operands again: what staging cannot align (an
// in-place input at an odd offset into the output) is reduced on the
// host.
func (r *run) kernelAlign() uintptr {
	if r.c.Kernel == "" || r.c.Elem == gpu.ElemNone {
		return 1
	}
	return uintptr(r.c.Elem.Size())
}

// syncAll waits for everything queued on the state's streams, after a
// failure.
func (r *run) syncAll() {
	for _, s := range []gpu.Stream{r.st.up, r.st.down, r.st.comp} {
		if ev, err := r.event(); err == nil {
			if r.drv.EventRecord(ev, s) == nil {
				r.drv.EventSynchronize(ev)
			}
			r.putEvents(ev)
		}
	}
}

func (r *run) event() (gpu.Event, error) {
	r.evMu.Lock()
	defer r.evMu.Unlock()
	return r.st.event()
}

func (r *run) putEvents(evs ...gpu.Event) {
	r.evMu.Lock()
	r.st.putEvents(evs...)
	r.evMu.Unlock()
}

// wait blocks until ev's work is done: a few polls, then a blocking wait
// (the events are created with blocking sync, so the thread sleeps).
func (r *run) wait(ev gpu.Event) error {
	for range 20 {
		done, err := r.drv.EventQuery(ev)
		if err != nil || done {
			return err
		}
		runtime.Gosched()
	}
	return r.drv.EventSynchronize(ev)
}

// addr returns the device address of a range.
func (r *run) addr(rg schedule.Range) uintptr {
	off := uintptr(rg.Off * r.c.ElemSize)
	switch rg.Buf {
	case schedule.Input:
		return r.in + off
	case schedule.Output:
		return r.out + off
	}
	return r.scratch + off
}

// memOf returns the allocation behind a buffer.
func (r *run) memOf(b schedule.Buffer) gpu.Memory {
	switch b {
	case schedule.Input:
		return r.inMem
	case schedule.Output:
		return r.outMem
	}
	return r.scratchMem
}

// communicate performs a round's transfers. Receives run on goroutines
// of their own, so that every receive of the round is being served while
// the sends go out one after the other: no send can wait on a receive
// that waits on it.
func (r *run) communicate(i int, rd *schedule.Round) error {
	st, drv := r.st, r.drv
	// Fence: the round's copies wait for the steps before it.
	ev, err := r.event()
	if err != nil {
		return err
	}
	defer r.putEvents(ev)
	if err := drv.EventRecord(ev, st.comp); err != nil {
		return err
	}
	for _, s := range []gpu.Stream{st.down, st.up} {
		if err := drv.StreamWaitEvent(s, ev); err != nil {
			return err
		}
	}
	r.fence, r.ready = ev, false

	clear(r.count)
	var wg sync.WaitGroup
	errs := make([]error, len(rd.Recvs)+1)
	for j, t := range rd.Recvs {
		idx := r.count[t.Peer]
		r.count[t.Peer]++
		if idx >= maxTransfers {
			return fmt.Errorf("more than %d transfers from rank %d in one round", maxTransfers, t.Peer)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			leave, err := r.e.enter()
			if err != nil {
				errs[j] = err
				return
			}
			defer leave()
			errs[j] = r.recv(i, idx, t)
		}()
	}
	errs[len(rd.Recvs)] = r.sends(i, rd)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// The round's steps wait for what it received.
	done, err := r.event()
	if err != nil {
		return err
	}
	defer r.putEvents(done)
	if err := drv.EventRecord(done, st.up); err != nil {
		return err
	}
	return drv.StreamWaitEvent(st.comp, done)
}

// makeReady waits until the fence has completed, before a peer reads this
// rank's memory directly.
func (r *run) makeReady() error {
	if r.ready {
		return nil
	}
	if err := r.wait(r.fence); err != nil {
		return err
	}
	r.ready = true
	return nil
}

// pending is a send whose receiver reads our memory and answers.
type pending struct {
	t   schedule.Transfer
	idx int
	ops [2]transport.Op // the descriptor, the acknowledgement
	ack [ackLen]byte
	d   [descLen]byte
}

// sends performs a round's sends, in order.
func (r *run) sends(i int, rd *schedule.Round) error {
	c := r.c
	counts := make(map[int]int, len(rd.Sends))
	var waiting []*pending
	var err error
	for _, t := range rd.Sends {
		idx := counts[t.Peer]
		counts[t.Peer]++
		if idx >= maxTransfers {
			err = fmt.Errorf("more than %d transfers to rank %d in one round", maxTransfers, t.Peer)
			break
		}
		src, n := r.addr(t.Range), t.Range.Len*c.ElemSize
		path := r.x.peer(t.Peer)
		if path == PeerStaged {
			r.x.count(func(s *Stats) { s.Staged++ })
			if err = r.sendStaged(c.Ranks[t.Peer], r.tag(i, idx, kindData), src, n); err != nil {
				break
			}
			continue
		}
		p := &pending{t: t, idx: idx}
		d := descriptor{kind: descStaged, len: uint64(n)}
		switch mem := r.memOf(t.Range.Buf); {
		case path == PeerDirect:
			d.kind, d.addr = descDirect, uint64(src)
		case path == PeerIPC:
			if h, ok := r.e.handle(mem); ok {
				d.kind, d.handle, d.offset, d.bus = descIPC, h, uint64(src-mem.Base), r.e.bus
				d.rt, d.base, d.buf = r.e.rt.ID(), uint64(mem.Base), mem.BufferID
			}
		}
		if d.kind != descStaged {
			if err = r.makeReady(); err != nil {
				break
			}
		}
		d.encode(p.d[:])
		peer := c.Ranks[t.Peer]
		p.ops[0] = transport.Op{Peer: peer, Tag: r.tag(i, idx, kindDesc), Buf: p.d[:]}
		p.ops[1] = transport.Op{Peer: peer, Tag: r.tag(i, idx, kindAck), Buf: p.ack[:], Recv: true}
		if d.kind == descStaged {
			// Nothing to acknowledge: the data follows.
			if err = c.T.Start(p.ops[:1]); err == nil {
				err = c.T.Wait(p.ops[:1])
			}
			if err == nil {
				r.x.count(func(s *Stats) { s.Staged++ })
				err = r.sendStaged(peer, r.tag(i, idx, kindData), src, n)
			}
			if err != nil {
				break
			}
			continue
		}
		if err = c.T.Start(p.ops[:]); err != nil {
			break
		}
		if d.kind == descDirect {
			r.x.count(func(s *Stats) { s.Direct++ })
		} else {
			r.x.count(func(s *Stats) { s.IPC++ })
		}
		waiting = append(waiting, p)
	}
	// The peers copy from our memory and say when they are done; one
	// that could not map it asks for the data staged instead.
	for _, p := range waiting {
		if werr := c.T.Wait(p.ops[:]); werr != nil {
			err = errors.Join(err, werr)
			continue
		}
		if err != nil {
			continue
		}
		switch status := binary.LittleEndian.Uint32(p.ack[4:]); status {
		case ackDone:
		case ackStaged:
			r.x.count(func(s *Stats) { s.Fallbacks++ })
			err = r.sendStaged(c.Ranks[p.t.Peer], r.tag(i, p.idx, kindData), r.addr(p.t.Range), p.t.Range.Len*c.ElemSize)
		default:
			err = fmt.Errorf("rank %d failed to copy from this rank's memory (status %d)", p.t.Peer, status)
		}
	}
	return err
}

// recv performs one receive of a round.
func (r *run) recv(i, idx int, t schedule.Transfer) error {
	c := r.c
	dst, n := r.addr(t.Range), t.Range.Len*c.ElemSize
	peer := c.Ranks[t.Peer]
	if r.x.peer(t.Peer) == PeerStaged {
		return r.recvStaged(peer, r.tag(i, idx, kindData), dst, n)
	}
	var buf [descLen]byte
	op := []transport.Op{{Peer: peer, Tag: r.tag(i, idx, kindDesc), Buf: buf[:], Recv: true}}
	if err := c.T.Start(op); err != nil {
		return err
	}
	if err := c.T.Wait(op); err != nil {
		return err
	}
	d, err := decodeDescriptor(buf[:op[0].N])
	if err != nil {
		return fmt.Errorf("from rank %d: %w", t.Peer, err)
	}
	if d.len != uint64(n) {
		return fmt.Errorf("rank %d sends %d bytes, %d expected", t.Peer, d.len, n)
	}
	var src uintptr
	switch d.kind {
	case descStaged:
		return r.recvStaged(peer, r.tag(i, idx, kindData), dst, n)
	case descDirect:
		src = uintptr(d.addr)
	case descIPC:
		base, done, err := r.e.open(d)
		if err != nil {
			// Not reachable from here after all: ask for the data staged.
			if err := r.answer(peer, r.tag(i, idx, kindAck), ackStaged); err != nil {
				return err
			}
			return r.recvStaged(peer, r.tag(i, idx, kindData), dst, n)
		}
		src = base + uintptr(d.offset)
		defer done()
	}
	status := uint32(ackDone)
	ev, err := r.event()
	if err == nil {
		defer r.putEvents(ev)
		if err = r.drv.MemcpyAsync(dst, src, n, r.st.up); err == nil {
			if err = r.drv.EventRecord(ev, r.st.up); err == nil {
				err = r.wait(ev)
			}
		}
	}
	if err != nil {
		status = ackFailed
	}
	return errors.Join(err, r.answer(peer, r.tag(i, idx, kindAck), status))
}

// answer sends an acknowledgement.
func (r *run) answer(peer int, tag transport.Tag, status uint32) error {
	var b [ackLen]byte
	binary.LittleEndian.PutUint32(b[0:], ackMagic)
	binary.LittleEndian.PutUint32(b[4:], status)
	op := []transport.Op{{Peer: peer, Tag: tag, Buf: b[:]}}
	if err := r.c.T.Start(op); err != nil {
		return err
	}
	return r.c.T.Wait(op)
}

// segments returns the number of segments of an n-byte message.
func (r *run) segments(n int) int { return (n + r.e.opts.Segment - 1) / r.e.opts.Segment }

// segment returns the offset and length of segment k of an n-byte message.
func (r *run) segment(k, n int) (int, int) {
	off := k * r.e.opts.Segment
	return off, min(r.e.opts.Segment, n-off)
}

// sendStaged sends n bytes of device memory at src as segments: each is
// copied down into a pinned segment on the down stream and sent once its
// copy has completed, while the copies of the next ones proceed.
func (r *run) sendStaged(peer int, tag transport.Tag, src uintptr, n int) error {
	T, drv := r.c.T, r.drv
	K := r.segments(n)
	D := min(r.e.opts.Depth, K)
	slots, err := r.e.getSlots(D)
	if err != nil {
		return err
	}
	defer r.e.putSlots(slots)
	evs := make([]gpu.Event, 0, D)
	defer func() { r.putEvents(evs...) }()
	for range D {
		ev, err := r.event()
		if err != nil {
			return err
		}
		evs = append(evs, ev)
	}
	ops := make([]transport.Op, D)
	started, waited := 0, 0
	defer func() { // the transport owns started buffers until waited
		for ; waited < started; waited++ {
			T.Wait(ops[waited%D : waited%D+1])
		}
	}()
	issue := func(k int) error {
		off, l := r.segment(k, n)
		if err := drv.MemcpyAsync(slots[k%D], src+uintptr(off), l, r.st.down); err != nil {
			return err
		}
		return drv.EventRecord(evs[k%D], r.st.down)
	}
	start := func(k int) error {
		if err := r.wait(evs[k%D]); err != nil {
			return err
		}
		_, l := r.segment(k, n)
		ops[k%D] = transport.Op{Peer: peer, Tag: tag, Buf: hostBytes(slots[k%D], l)}
		if err := T.Start(ops[k%D : k%D+1]); err != nil {
			return err
		}
		started++
		return nil
	}
	for k := range K {
		if k >= D {
			// Segment k takes the slot of segment k-D: that one must be
			// on the wire and delivered.
			for started <= k-D {
				if err := start(started); err != nil {
					return err
				}
			}
			if err := T.Wait(ops[(k-D)%D : (k-D)%D+1]); err != nil {
				waited++
				return err
			}
			waited++
		}
		if err := issue(k); err != nil {
			return err
		}
		// Send what has landed, without waiting for what has not.
		for started <= k {
			if done, err := drv.EventQuery(evs[started%D]); err != nil || !done {
				break
			}
			if err := start(started); err != nil {
				return err
			}
		}
	}
	for started < K {
		if err := start(started); err != nil {
			return err
		}
	}
	for waited < K {
		w := waited
		waited++
		if err := T.Wait(ops[w%D : w%D+1]); err != nil {
			return err
		}
	}
	r.x.count(func(s *Stats) { s.Segments += K })
	return nil
}

// recvStaged receives n bytes into device memory at dst as segments:
// each lands in a pinned segment and is copied up on the up stream while
// the next ones arrive.
func (r *run) recvStaged(peer int, tag transport.Tag, dst uintptr, n int) error {
	T, drv := r.c.T, r.drv
	K := r.segments(n)
	D := min(r.e.opts.Depth, K)
	slots, err := r.e.getSlots(D)
	if err != nil {
		return err
	}
	evs := make([]gpu.Event, 0, D)
	ops := make([]transport.Op, D)
	posted, waited := 0, 0
	defer func() {
		for ; waited < posted; waited++ {
			T.Wait(ops[waited%D : waited%D+1])
		}
		// The slots go back only once their copies up have completed.
		for _, ev := range evs {
			r.drv.EventSynchronize(ev)
		}
		r.putEvents(evs...)
		r.e.putSlots(slots)
	}()
	for range D {
		ev, err := r.event()
		if err != nil {
			return err
		}
		evs = append(evs, ev)
	}
	post := func(k int) error {
		_, l := r.segment(k, n)
		ops[k%D] = transport.Op{Peer: peer, Tag: tag, Buf: hostBytes(slots[k%D], l), Recv: true}
		if err := T.Start(ops[k%D : k%D+1]); err != nil {
			return err
		}
		posted++
		return nil
	}
	for k := range D {
		if err := post(k); err != nil {
			return err
		}
	}
	for k := range K {
		op := &ops[k%D]
		waited++
		if err := T.Wait(ops[k%D : k%D+1]); err != nil {
			return err
		}
		off, l := r.segment(k, n)
		if op.N != l {
			return fmt.Errorf("received %d bytes from rank %d, expected %d (segment %d of %d)", op.N, peer, l, k, K)
		}
		if err := drv.MemcpyAsync(dst+uintptr(off), slots[k%D], l, r.st.up); err != nil {
			return err
		}
		if err := drv.EventRecord(evs[k%D], r.st.up); err != nil {
			return err
		}
		if k+D < K {
			if err := r.wait(evs[k%D]); err != nil {
				return err
			}
			if err := post(k + D); err != nil {
				return err
			}
		}
	}
	return nil
}

// hostBytes views n bytes of host memory at p (pinned memory the driver
// allocated) as a slice.
func hostBytes(p uintptr, n int) []byte {
	return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&p))), n)
}
