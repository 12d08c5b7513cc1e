package device

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/schedule"
	"github.com/gocoll/gocoll/transport"
)

// The transfers of a round, as tasks (resume.go). A staged transfer
// moves segments through pinned slots; a transfer to a peer on the node
// sends a descriptor of this rank's memory, which the receiver copies
// from and acknowledges (or asks for the data staged).

// newSend returns the task of send t, transfer idx to its peer in round i.
func (r *run) newSend(i, idx int, t schedule.Transfer) task {
	src, n := r.addr(t.Range), t.Range.Len*r.c.ElemSize
	if r.x.peer(t.Peer) == PeerStaged {
		r.x.count(func(s *Stats) { s.Staged++ })
		return &stagedSend{r: r, peer: r.c.Ranks[t.Peer], tag: r.tag(i, idx, kindData), src: src, n: n}
	}
	return &descSend{r: r, i: i, idx: idx, t: t}
}

// newRecv returns the task of receive t, transfer idx from its peer in
// round i, its first receive posted.
func (r *run) newRecv(i, idx int, t schedule.Transfer) (task, error) {
	dst, n := r.addr(t.Range), t.Range.Len*r.c.ElemSize
	peer := r.c.Ranks[t.Peer]
	if r.x.peer(t.Peer) == PeerStaged {
		s := &stagedRecv{r: r, peer: peer, tag: r.tag(i, idx, kindData), dst: dst, n: n}
		return s, s.start()
	}
	d := &descRecv{r: r, i: i, idx: idx, t: t, peer: peer}
	d.op[0] = transport.Op{Peer: peer, Tag: r.tag(i, idx, kindDesc), Buf: d.buf[:], Recv: true}
	return d, r.c.T.Start(d.op[:])
}

// stagedSend sends n bytes of device memory at src as segments: each is
// copied down into a pinned slot on the down stream and sent once its
// copy has completed, while the copies of the next ones proceed; segment
// k takes the slot of segment k-D once that one is delivered.
type stagedSend struct {
	r                       *run
	peer                    int
	tag                     transport.Tag
	src                     uintptr
	n                       int
	K, D                    int
	slots                   []uintptr
	evs                     []gpu.Event
	ops                     []transport.Op
	init                    bool
	issued, started, waited int
}

func (s *stagedSend) poll() (done, moved bool, err error) {
	r := s.r
	T, drv := r.c.T, r.drv
	if !s.init {
		s.init, moved = true, true
		s.K = r.segments(s.n)
		s.D = min(r.w.opts.Depth, s.K)
		if s.K == 0 {
			return true, true, nil
		}
		if s.slots, err = r.w.getSlots(s.D); err != nil {
			return true, true, err
		}
		for range s.D {
			ev, err := r.event()
			if err != nil {
				return s.fail(err)
			}
			s.evs = append(s.evs, ev)
		}
		s.ops = make([]transport.Op, s.D)
	}
	D := s.D
	for progressed := true; progressed; {
		progressed = false
		for s.issued < s.K && s.issued-D < s.waited {
			k := s.issued
			off, l := r.segment(k, s.n)
			if err := drv.MemcpyAsync(s.slots[k%D], s.src+uintptr(off), l, r.st.down); err != nil {
				return s.fail(err)
			}
			s.issued++
			if err := drv.EventRecord(s.evs[k%D], r.st.down); err != nil {
				return s.fail(err)
			}
			progressed = true
		}
		// Send what has landed, in order, without waiting for what has not.
		for s.started < s.issued {
			k := s.started
			ok, err := drv.EventQuery(s.evs[k%D])
			if err != nil {
				return s.fail(err)
			}
			if !ok {
				break
			}
			_, l := r.segment(k, s.n)
			s.ops[k%D] = transport.Op{Peer: s.peer, Tag: s.tag, Buf: hostBytes(s.slots[k%D], l)}
			if err := T.Start(s.ops[k%D : k%D+1]); err != nil {
				return s.fail(err)
			}
			s.started++
			progressed = true
		}
		for s.waited < s.started {
			k := s.waited
			ok, err := T.Test(s.ops[k%D : k%D+1])
			if !ok {
				break
			}
			s.waited++
			if err != nil {
				return s.fail(err)
			}
			progressed = true
		}
		moved = moved || progressed
	}
	if s.waited < s.K {
		return false, moved, nil
	}
	r.x.count(func(st *Stats) { st.Segments += s.K })
	r.w.putSlots(s.slots)
	r.putEvents(s.evs...)
	return true, true, nil
}

func (s *stagedSend) next() (gpu.Event, []transport.Op) {
	if !s.init {
		return 0, nil
	}
	if s.started < s.issued {
		return s.evs[s.started%s.D], nil
	}
	if s.waited < s.started {
		k := s.waited % s.D
		return 0, s.ops[k : k+1]
	}
	return 0, nil
}

// fail ends the task after err: the transport owns started buffers until
// they complete, and the down copies write the slots until they have.
func (s *stagedSend) fail(err error) (bool, bool, error) {
	r := s.r
	for ; s.waited < s.started; s.waited++ {
		k := s.waited % s.D
		r.c.T.Wait(s.ops[k : k+1])
	}
	for _, ev := range s.evs {
		r.drv.EventSynchronize(ev)
	}
	if s.slots != nil {
		r.w.putSlots(s.slots)
	}
	r.putEvents(s.evs...)
	return true, true, err
}

// stagedRecv receives n bytes into device memory at dst as segments:
// each lands in a pinned slot and is copied up on the up stream while the
// next ones arrive; segment k+D is received into the slot of segment k
// once its copy up has completed.
type stagedRecv struct {
	r                      *run
	peer                   int
	tag                    transport.Tag
	dst                    uintptr
	n                      int
	K, D                   int
	slots                  []uintptr
	evs                    []gpu.Event
	ops                    []transport.Op
	posted, waited, landed int // landed: slots whose last copy up has completed, at the end
}

// start posts the first D receives.
func (s *stagedRecv) start() error {
	r := s.r
	s.K = r.segments(s.n)
	s.D = min(r.w.opts.Depth, s.K)
	if s.K == 0 {
		return nil
	}
	var err error
	if s.slots, err = r.w.getSlots(s.D); err != nil {
		s.K = 0
		return err
	}
	for range s.D {
		ev, err := r.event()
		if err != nil {
			s.release()
			s.K = 0
			return err
		}
		s.evs = append(s.evs, ev)
	}
	s.ops = make([]transport.Op, s.D)
	for k := range s.D {
		if err := s.post(k); err != nil {
			s.fail(err)
			s.K = 0
			return err
		}
	}
	return nil
}

func (s *stagedRecv) post(k int) error {
	_, l := s.r.segment(k, s.n)
	s.ops[k%s.D] = transport.Op{Peer: s.peer, Tag: s.tag, Buf: hostBytes(s.slots[k%s.D], l), Recv: true}
	if err := s.r.c.T.Start(s.ops[k%s.D : k%s.D+1]); err != nil {
		return err
	}
	s.posted++
	return nil
}

func (s *stagedRecv) poll() (done, moved bool, err error) {
	r := s.r
	T, drv := r.c.T, r.drv
	if s.K == 0 {
		return true, true, nil
	}
	D := s.D
	for progressed := true; progressed; {
		progressed = false
		for s.waited < s.posted {
			k := s.waited
			op := &s.ops[k%D]
			ok, err := T.Test(s.ops[k%D : k%D+1])
			if !ok {
				break
			}
			s.waited++
			if err != nil {
				return s.fail(err)
			}
			off, l := r.segment(k, s.n)
			if op.N != l {
				return s.fail(fmt.Errorf("received %d bytes from rank %d, expected %d (segment %d of %d)", op.N, s.peer, l, k, s.K))
			}
			if err := drv.MemcpyAsync(s.dst+uintptr(off), s.slots[k%D], l, r.st.up); err != nil {
				return s.fail(err)
			}
			if err := drv.EventRecord(s.evs[k%D], r.st.up); err != nil {
				return s.fail(err)
			}
			progressed = true
		}
		for s.posted < s.K && s.posted-D < s.waited {
			ok, err := drv.EventQuery(s.evs[s.posted%D])
			if err != nil {
				return s.fail(err)
			}
			if !ok {
				break
			}
			if err := s.post(s.posted); err != nil {
				return s.fail(err)
			}
			progressed = true
		}
		moved = moved || progressed
	}
	if s.waited < s.K {
		return false, moved, nil
	}
	// The slots go back only once their copies up have completed.
	for ; s.landed < D; s.landed++ {
		ok, err := drv.EventQuery(s.evs[s.landed])
		if err != nil {
			return s.fail(err)
		}
		if !ok {
			return false, moved, nil
		}
		moved = true
	}
	s.release()
	return true, true, nil
}

func (s *stagedRecv) next() (gpu.Event, []transport.Op) {
	if s.K == 0 {
		return 0, nil
	}
	if s.posted < s.K && s.posted-s.D < s.waited {
		return s.evs[s.posted%s.D], nil
	}
	if s.waited < s.posted {
		k := s.waited % s.D
		return 0, s.ops[k : k+1]
	}
	if s.landed < s.D {
		return s.evs[s.landed], nil
	}
	return 0, nil
}

func (s *stagedRecv) fail(err error) (bool, bool, error) {
	for ; s.waited < s.posted; s.waited++ {
		k := s.waited % s.D
		s.r.c.T.Wait(s.ops[k : k+1])
	}
	for _, ev := range s.evs {
		s.r.drv.EventSynchronize(ev)
	}
	s.release()
	return true, true, err
}

func (s *stagedRecv) release() {
	if s.slots != nil {
		s.r.w.putSlots(s.slots)
		s.slots = nil
	}
	s.r.putEvents(s.evs...)
	s.evs = nil
}

// descSend is a send to a peer on the node: a descriptor of this rank's
// memory (once the fence has completed: the peer reads it directly),
// then the peer's acknowledgement; or the data staged, where the memory
// cannot be shared or the peer could not map it.
type descSend struct {
	r      *run
	i, idx int
	t      schedule.Transfer
	state  int // 0: not sent; 1: descriptor of a staged send; 2: descriptor and acknowledgement; 3: staged
	ops    [2]transport.Op
	ack    [ackLen]byte
	d      [descLen]byte
	sub    *stagedSend
}

func (s *descSend) poll() (done, moved bool, err error) {
	r := s.r
	c := r.c
	switch s.state {
	case 0:
		src, n := r.addr(s.t.Range), s.t.Range.Len*c.ElemSize
		d := descriptor{kind: descStaged, len: uint64(n)}
		switch mem := r.memOf(s.t.Range.Buf); r.x.peer(s.t.Peer) {
		case PeerDirect:
			d.kind, d.addr = descDirect, uint64(src)
		case PeerIPC:
			if h, ok := r.w.handle(mem); ok {
				d.kind, d.handle, d.offset, d.bus = descIPC, h, uint64(src-mem.Base), r.w.bus
				d.rt, d.base, d.buf = r.w.rt.ID(), uint64(mem.Base), mem.BufferID
			}
		}
		if d.kind != descStaged && !r.ready {
			ok, err := r.drv.EventQuery(r.fence)
			if err != nil {
				return true, true, err
			}
			if !ok {
				return false, false, nil
			}
			r.ready = true
		}
		d.encode(s.d[:])
		peer := c.Ranks[s.t.Peer]
		s.ops[0] = transport.Op{Peer: peer, Tag: r.tag(s.i, s.idx, kindDesc), Buf: s.d[:]}
		s.ops[1] = transport.Op{Peer: peer, Tag: r.tag(s.i, s.idx, kindAck), Buf: s.ack[:], Recv: true}
		if d.kind == descStaged {
			// Nothing to acknowledge: the data follows.
			if err := c.T.Start(s.ops[:1]); err != nil {
				return true, true, err
			}
			s.state = 1
		} else {
			if err := c.T.Start(s.ops[:]); err != nil {
				return true, true, err
			}
			if d.kind == descDirect {
				r.x.count(func(s *Stats) { s.Direct++ })
			} else {
				r.x.count(func(s *Stats) { s.IPC++ })
			}
			s.state = 2
		}
		done, _, err := s.poll()
		return done, true, err
	case 1:
		ok, err := c.T.Test(s.ops[:1])
		if !ok {
			return false, false, nil
		}
		if err != nil {
			return true, true, err
		}
		r.x.count(func(s *Stats) { s.Staged++ })
		s.staged()
		done, _, err := s.sub.poll()
		return done, true, err
	case 2:
		// The peer copies from our memory and says when it is done; one
		// that could not map it asks for the data staged instead.
		ok, err := c.T.Test(s.ops[:])
		if !ok {
			return false, false, nil
		}
		if err != nil {
			return true, true, err
		}
		switch status := binary.LittleEndian.Uint32(s.ack[4:]); status {
		case ackDone:
			return true, true, nil
		case ackStaged:
			r.x.count(func(s *Stats) { s.Fallbacks++ })
			s.staged()
			done, _, err := s.sub.poll()
			return done, true, err
		default:
			return true, true, fmt.Errorf("rank %d failed to copy from this rank's memory (status %d)", s.t.Peer, status)
		}
	}
	return s.sub.poll()
}

// staged goes on as a staged send.
func (s *descSend) staged() {
	r := s.r
	s.sub = &stagedSend{r: r, peer: r.c.Ranks[s.t.Peer], tag: r.tag(s.i, s.idx, kindData),
		src: r.addr(s.t.Range), n: s.t.Range.Len * r.c.ElemSize}
	s.state = 3
}

func (s *descSend) next() (gpu.Event, []transport.Op) {
	switch s.state {
	case 0:
		return s.r.fence, nil
	case 1:
		return 0, s.ops[:1]
	case 2:
		return 0, s.ops[:]
	}
	return s.sub.next()
}

// descRecv is a receive from a peer on the node: its descriptor, then a
// copy device to device from its memory (mapped by IPC, or in this
// address space) on the up stream, then the acknowledgement; or the data
// staged.
type descRecv struct {
	r      *run
	i, idx int
	t      schedule.Transfer
	peer   int
	buf    [descLen]byte
	op     [1]transport.Op // the descriptor
	state  int             // 0: descriptor posted; 1: copying; 2: acknowledging (and maybe staged); 3: staged
	ev     gpu.Event
	unmap  func()
	copied error // the copy's failure, acknowledged as such
	ackBuf [ackLen]byte
	ackOp  [1]transport.Op
	acked  bool
	sub    *stagedRecv
	subErr error
	subEnd bool
}

func (s *descRecv) poll() (done, moved bool, err error) {
	r := s.r
	c := r.c
	n := s.t.Range.Len * c.ElemSize
	dst := r.addr(s.t.Range)
	switch s.state {
	case 0:
		ok, err := c.T.Test(s.op[:])
		if !ok {
			return false, false, nil
		}
		if err != nil {
			return true, true, err
		}
		d, err := decodeDescriptor(s.buf[:s.op[0].N])
		if err != nil {
			return true, true, fmt.Errorf("from rank %d: %w", s.t.Peer, err)
		}
		if d.len != uint64(n) {
			return true, true, fmt.Errorf("rank %d sends %d bytes, %d expected", s.t.Peer, d.len, n)
		}
		var src uintptr
		switch d.kind {
		case descStaged:
			s.sub = &stagedRecv{r: r, peer: s.peer, tag: r.tag(s.i, s.idx, kindData), dst: dst, n: n}
			if err := s.sub.start(); err != nil {
				return true, true, err
			}
			s.state = 3
			done, _, err := s.sub.poll()
			return done, true, err
		case descDirect:
			src = uintptr(d.addr)
		case descIPC:
			base, unmap, err := r.w.open(d)
			if err != nil {
				// Not reachable from here after all: ask for the data staged.
				if err := s.answer(ackStaged); err != nil {
					return true, true, err
				}
				s.sub = &stagedRecv{r: r, peer: s.peer, tag: r.tag(s.i, s.idx, kindData), dst: dst, n: n}
				if err := s.sub.start(); err != nil {
					s.subErr, s.subEnd = err, true
				}
				s.state = 2
				done, _, err := s.poll()
				return done, true, err
			}
			src, s.unmap = base+uintptr(d.offset), unmap
		}
		ev, err := r.event()
		if err == nil {
			s.ev = ev
			if err = r.drv.MemcpyAsync(dst, src, n, r.st.up); err == nil {
				err = r.drv.EventRecord(ev, r.st.up)
			}
		}
		if err != nil {
			return s.copyEnded(err)
		}
		s.state = 1
		done, _, err := s.poll()
		return done, true, err
	case 1:
		ok, err := r.drv.EventQuery(s.ev)
		if err == nil && !ok {
			return false, false, nil
		}
		return s.copyEnded(err)
	case 2:
		moved := false
		if !s.acked {
			ok, err := c.T.Test(s.ackOp[:])
			if ok {
				s.acked, moved = true, true
				s.copied = errors.Join(s.copied, err)
			}
		}
		if !s.subEnd {
			d, m, err := s.sub.poll()
			moved = moved || m
			if d {
				s.subEnd, s.subErr = true, err
			}
		}
		if !s.acked || !s.subEnd {
			return false, moved, nil
		}
		return true, true, errors.Join(s.copied, s.subErr)
	}
	return s.sub.poll()
}

// copyEnded acknowledges the copy, or its failure.
func (s *descRecv) copyEnded(err error) (bool, bool, error) {
	if s.ev != 0 {
		s.r.putEvents(s.ev)
		s.ev = 0
	}
	if s.unmap != nil {
		s.unmap()
		s.unmap = nil
	}
	status := uint32(ackDone)
	if err != nil {
		status = ackFailed
	}
	s.copied = err
	s.subEnd = true // no staged data
	if aerr := s.answer(status); aerr != nil {
		return true, true, errors.Join(err, aerr)
	}
	s.state = 2
	done, _, perr := s.poll()
	return done, true, perr
}

// answer starts the acknowledgement.
func (s *descRecv) answer(status uint32) error {
	binary.LittleEndian.PutUint32(s.ackBuf[0:], ackMagic)
	binary.LittleEndian.PutUint32(s.ackBuf[4:], status)
	s.ackOp[0] = transport.Op{Peer: s.peer, Tag: s.r.tag(s.i, s.idx, kindAck), Buf: s.ackBuf[:]}
	return s.r.c.T.Start(s.ackOp[:])
}

func (s *descRecv) next() (gpu.Event, []transport.Op) {
	switch s.state {
	case 0:
		return 0, s.op[:]
	case 1:
		return s.ev, nil
	case 2:
		if !s.subEnd {
			if ev, ops := s.sub.next(); ev != 0 || s.acked {
				return ev, ops
			}
		}
		if !s.acked {
			return 0, s.ackOp[:]
		}
		return 0, nil
	}
	return s.sub.next()
}
