// Package p2p is MPI point-to-point messaging over a gocoll transport:
// MPI_Send, MPI_Recv, MPI_Isend, MPI_Irecv and friends, with wildcard
// source and tag, statuses and truncation.
//
// Transports match a receive to exactly one peer and tag, while MPI lets a
// receive match any source and any tag. So every message travels as an
// envelope (communicator context, sender, tag, length, and the payload
// itself when it is small) on one reserved transport tag per pair of
// ranks, received by a listener goroutine per peer that is always posted;
// the Hub matches envelopes against posted receives in MPI order. Large
// payloads follow as a second message with a per-pair sequence number,
// received once the envelope is matched (rendezvous).
//
// One Hub serves every communicator of a process: envelopes carry the
// communicator's context, so no listener has to be torn down when a
// communicator is freed.
package p2p

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/gocoll/gocoll/transport"
)

// Special ranks and tags, with MPI's values.
const (
	AnySource = -2
	ProcNull  = -1
	AnyTag    = -1
)

// Eager is the largest payload carried inside its envelope.
const Eager = 4096

const (
	envelopeCtx = 0xfffffffe // transport context of envelopes and payloads
	headerLen   = 24
)

// ErrTruncate is the error of a receive whose buffer is too short.
var ErrTruncate = errors.New("message truncated: longer than the receive buffer")

// Status describes a completed receive, in communicator ranks.
type Status struct {
	Source, Tag int
	Count       int // bytes received
	Err         error
}

// Hub carries the point-to-point traffic of one process.
type Hub struct {
	t transport.Transport

	mu      sync.Mutex
	started bool
	closed  error
	// unexpected holds matched-by-nobody envelopes, oldest first.
	unexpected []*envelope
	// posted holds receives waiting for a message, oldest first.
	posted []*Request
	// sendSeq numbers the rendezvous payloads to each peer.
	sendSeq []uint32
	// done is broadcast whenever a request completes.
	done *sync.Cond
}

// NewHub returns the hub of a process's transport.
func NewHub(t transport.Transport) *Hub {
	h := &Hub{t: t, sendSeq: make([]uint32, t.Size())}
	h.done = sync.NewCond(&h.mu)
	return h
}

// envelope is one incoming message before it is matched.
type envelope struct {
	ctx      uint32
	src, tag int // transport rank of the sender, MPI tag
	n        int // payload length
	seq      uint32
	data     []byte // the payload if eager (or sent to oneself)
	eager    bool
}

// start launches the listeners on the first use.
func (h *Hub) start() {
	if h.started {
		return
	}
	h.started = true
	for peer := range h.t.Size() {
		if peer != h.t.Rank() {
			go h.listen(peer)
		}
	}
}

// listen receives the envelopes from one peer, in order, until the
// transport closes.
func (h *Hub) listen(peer int) {
	buf := make([]byte, headerLen+Eager)
	ops := make([]transport.Op, 1)
	for {
		ops[0] = transport.Op{Peer: peer, Tag: transport.Tag{Context: envelopeCtx}, Buf: buf, Recv: true}
		err := h.t.Start(ops)
		if err == nil {
			err = h.t.Wait(ops)
		}
		if err != nil {
			h.fail(err)
			return
		}
		m := ops[0].N
		if m < headerLen {
			h.fail(fmt.Errorf("p2p: short envelope (%d bytes) from rank %d", m, peer))
			return
		}
		e := &envelope{
			ctx: binary.LittleEndian.Uint32(buf[0:]),
			tag: int(int32(binary.LittleEndian.Uint32(buf[4:]))),
			n:   int(binary.LittleEndian.Uint64(buf[8:])),
			seq: binary.LittleEndian.Uint32(buf[16:]),
			src: peer,
		}
		e.eager = e.n <= Eager
		if e.eager {
			if m != headerLen+e.n {
				h.fail(fmt.Errorf("p2p: envelope from rank %d says %d bytes, carries %d", peer, e.n, m-headerLen))
				return
			}
			e.data = slices.Clone(buf[headerLen:m])
		}
		h.arrive(e)
	}
}

// fail records a transport failure: every pending and later request fails.
func (h *Hub) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed == nil {
		h.closed = err
	}
	for _, r := range h.posted {
		r.finish(Status{Source: ProcNull, Err: err})
	}
	h.posted = nil
	h.done.Broadcast()
}

// arrive matches an envelope with the oldest posted receive, or queues it.
func (h *Hub) arrive(e *envelope) {
	h.mu.Lock()
	i := slices.IndexFunc(h.posted, func(r *Request) bool { return r.matches(e) })
	if i < 0 {
		h.unexpected = append(h.unexpected, e)
		h.mu.Unlock()
		return
	}
	r := h.posted[i]
	h.posted = slices.Delete(h.posted, i, i+1)
	h.mu.Unlock()
	h.deliver(r, e)
}

// deliver moves the message of e into the receive r and completes it.
func (h *Hub) deliver(r *Request, e *envelope) {
	st := Status{Source: r.commRank(e.src), Tag: e.tag, Count: min(e.n, len(r.buf))}
	if e.n > len(r.buf) {
		st.Err = ErrTruncate
	}
	if e.eager {
		copy(r.buf, e.data)
	} else {
		// The payload is on its way: receive it into place (or, when it
		// does not fit, into a temporary buffer so the sender completes).
		var dst []byte
		if st.Err != nil {
			dst = make([]byte, e.n)
		} else {
			dst = r.buf[:e.n:e.n]
		}
		ops := []transport.Op{{Peer: e.src, Tag: transport.Tag{Context: envelopeCtx, Seq: e.seq, Round: 1}, Buf: dst, Recv: true}}
		err := h.t.Start(ops)
		if err == nil {
			err = h.t.Wait(ops)
		}
		if err != nil {
			st.Err = err
		} else if st.Err != nil {
			copy(r.buf, dst)
		}
	}
	h.mu.Lock()
	r.finish(st)
	h.done.Broadcast()
	h.mu.Unlock()
}

// Request is a pending send or receive.
type Request struct {
	h    *Hub
	comm *Comm

	// receives
	source, tag int // comm rank or AnySource, tag or AnyTag
	buf         []byte

	// sends
	ops  [2]transport.Op
	nops int
	hdr  [headerLen + Eager]byte

	complete bool
	status   Status

	dev *staged // a message in device memory, staged (device.go); nil: none
}

func (r *Request) matches(e *envelope) bool {
	if e.ctx != r.comm.ctx || (r.tag != AnyTag && r.tag != e.tag) {
		return false
	}
	if r.source == AnySource {
		return slices.Contains(r.comm.ranks, e.src)
	}
	return r.comm.ranks[r.source] == e.src
}

func (r *Request) commRank(transportRank int) int { return r.comm.commRank(transportRank) }

// finish completes a receive; h.mu is held.
func (r *Request) finish(st Status) {
	r.status, r.complete = st, true
}

// Comm is a communicator's view of the hub.
type Comm struct {
	h     *Hub
	ctx   uint32
	ranks []int // transport rank of each communicator rank
	rank  int
}

// Comm returns the point-to-point side of a communicator with the given
// context and transport ranks; rank is this process's rank in it.
func (h *Hub) Comm(ctx uint32, ranks []int, rank int) *Comm {
	return &Comm{h: h, ctx: ctx, ranks: ranks, rank: rank}
}

func (c *Comm) commRank(transportRank int) int {
	return slices.Index(c.ranks, transportRank)
}

// Isend starts sending buf to rank dest with tag. buf must not change until
// the request completes.
func (c *Comm) Isend(buf []byte, dest, tag int) (*Request, error) {
	return c.isend(buf, dest, tag, nil)
}

// isend is Isend of a request that stages a device buffer (dev), if not nil.
func (c *Comm) isend(buf []byte, dest, tag int, dev *staged) (*Request, error) {
	h := c.h
	r := &Request{h: h, comm: c, dev: dev}
	if dest == ProcNull {
		r.complete = true
		r.status = Status{Source: ProcNull, Tag: AnyTag}
		return r, nil
	}
	h.mu.Lock()
	if h.closed != nil {
		err := h.closed
		h.mu.Unlock()
		return nil, err
	}
	h.start()
	to := c.ranks[dest]
	if to == h.t.Rank() {
		// To oneself: no transport, the envelope carries a copy.
		e := &envelope{ctx: c.ctx, src: to, tag: tag, n: len(buf), data: slices.Clone(buf), eager: true}
		h.mu.Unlock()
		h.arrive(e)
		r.complete = true
		return r, nil
	}
	var seq uint32
	if len(buf) > Eager {
		seq = h.sendSeq[to] + 1
		h.sendSeq[to] = seq
	}
	h.mu.Unlock()
	binary.LittleEndian.PutUint32(r.hdr[0:], c.ctx)
	binary.LittleEndian.PutUint32(r.hdr[4:], uint32(int32(tag)))
	binary.LittleEndian.PutUint64(r.hdr[8:], uint64(len(buf)))
	binary.LittleEndian.PutUint32(r.hdr[16:], seq)
	env := r.hdr[:headerLen]
	if len(buf) <= Eager {
		env = r.hdr[:headerLen+copy(r.hdr[headerLen:], buf)]
	}
	r.ops[0] = transport.Op{Peer: to, Tag: transport.Tag{Context: envelopeCtx}, Buf: env}
	r.nops = 1
	if len(buf) > Eager {
		r.ops[1] = transport.Op{Peer: to, Tag: transport.Tag{Context: envelopeCtx, Seq: seq, Round: 1}, Buf: buf}
		r.nops = 2
	}
	// Envelopes to one peer must leave in order: start them under the lock.
	h.mu.Lock()
	err := h.t.Start(r.ops[:r.nops])
	h.mu.Unlock()
	return r, err
}

// Irecv starts receiving into buf from source (or AnySource) with tag (or
// AnyTag).
func (c *Comm) Irecv(buf []byte, source, tag int) (*Request, error) {
	return c.irecv(buf, source, tag, nil)
}

// irecv is Irecv of a request that stages a device buffer (dev), if not nil.
func (c *Comm) irecv(buf []byte, source, tag int, dev *staged) (*Request, error) {
	h := c.h
	r := &Request{h: h, comm: c, source: source, tag: tag, buf: buf, dev: dev}
	if source == ProcNull {
		r.complete = true
		r.status = Status{Source: ProcNull, Tag: AnyTag}
		return r, nil
	}
	h.mu.Lock()
	if h.closed != nil {
		err := h.closed
		h.mu.Unlock()
		return nil, err
	}
	h.start()
	i := slices.IndexFunc(h.unexpected, r.matches)
	if i < 0 {
		h.posted = append(h.posted, r)
		h.mu.Unlock()
		return r, nil
	}
	e := h.unexpected[i]
	h.unexpected = slices.Delete(h.unexpected, i, i+1)
	h.mu.Unlock()
	if e.eager {
		h.deliver(r, e)
	} else {
		go h.deliver(r, e) // the payload receive may block; Wait waits for it
	}
	return r, nil
}

// Wait blocks until r completes and returns its status.
func (r *Request) Wait() (Status, error) {
	return r.settle(r.wait())
}

func (r *Request) wait() (Status, error) {
	if r.nops > 0 { // a send
		err := r.h.t.Wait(r.ops[:r.nops])
		r.nops = 0
		r.complete = true
		r.status.Err = err
		return r.status, err
	}
	h := r.h
	h.mu.Lock()
	for !r.complete {
		h.done.Wait()
	}
	h.mu.Unlock()
	return r.status, r.status.Err
}

// Test reports whether r has completed, and its status if so.
func (r *Request) Test() (bool, Status, error) {
	done, st, err := r.test()
	if done {
		st, err = r.settle(st, err)
	}
	return done, st, err
}

func (r *Request) test() (bool, Status, error) {
	if r.nops > 0 {
		for i := range r.nops {
			if !r.ops[i].Done() {
				return false, Status{}, nil
			}
		}
		st, err := r.wait()
		return true, st, err
	}
	h := r.h
	h.mu.Lock()
	done := r.complete
	h.mu.Unlock()
	if !done {
		return false, Status{}, nil
	}
	return true, r.status, r.status.Err
}
