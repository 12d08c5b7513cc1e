//go:build linux

package shm

import (
	"math/bits"
	"time"

	"github.com/gocoll/gocoll/transport"
)

// req is the endpoint's state for one pending op; op.Handle points to it.
type req struct {
	op     *transport.Op
	p      *peer
	state  uint8
	slot   uint32 // send: rendezvous slot
	gen    uint32 // send: the slot's generation
	cookie uint32 // send: where recData goes; receive: its recvIDs cookie
	off    int    // bytes copied so far through recData records
	total  int    // receive: length of the message being copied
	since  time.Duration
	// cancel, when set on a send a peer is still reading, is the error
	// to complete it with once the peer lets go of the buffer.
	cancel error
}

// req states.
const (
	sendQueued = iota + 1 // in p.queue
	sendRdv               // RTS out, in e.rdv
	sendStream            // copying through the ring, in p.streams
	recvPosted            // in e.posted
	recvStream            // receiving recData, in e.recvIDs
)

// msg is an arrival with no receive posted yet.
type msg struct {
	p   *peer
	tag transport.Tag
	rdv bool
	buf []byte // eager: the message, from the pool
	// rendezvous: where the message is and which slot answers for it
	addr  uintptr
	total int
	slot  uint32
	gen   uint32
}

// pool recycles reqs, msgs and eager buffers, so that an op in steady
// state allocates nothing. Buffers come in power-of-two classes from 64
// bytes up to the eager limit; each class keeps at most maxPerClass.
type pool struct {
	reqs []*req
	msgs []*msg
	bufs [][][]byte
}

const (
	minBufShift = 6
	maxPerClass = 64
)

// init sets the pool up with enough for a few rounds of a few ops, so
// that even the first ops of a job rarely allocate.
func (p *pool) init(eagerLimit int) {
	p.bufs = make([][][]byte, bufClass(eagerLimit)+1)
	const reqs, msgs = 32, 16
	for _, r := range make([]req, reqs) {
		p.reqs = append(p.reqs, &r)
	}
	for _, m := range make([]msg, msgs) {
		p.msgs = append(p.msgs, &m)
	}
}

func (p *pool) getReq() *req {
	if n := len(p.reqs); n > 0 {
		r := p.reqs[n-1]
		p.reqs = p.reqs[:n-1]
		return r
	}
	return new(req)
}

func (p *pool) putReq(r *req) {
	*r = req{}
	p.reqs = append(p.reqs, r)
}

func (p *pool) getMsg() *msg {
	if n := len(p.msgs); n > 0 {
		m := p.msgs[n-1]
		p.msgs = p.msgs[:n-1]
		return m
	}
	return new(msg)
}

func (p *pool) putMsg(m *msg) {
	if m.buf != nil {
		p.putBuf(m.buf)
	}
	*m = msg{}
	p.msgs = append(p.msgs, m)
}

// bufClass returns the class whose buffers hold n bytes.
func bufClass(n int) int {
	if n <= 1<<minBufShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minBufShift
}

func (p *pool) getBuf(n int) []byte {
	c := bufClass(n)
	if c >= len(p.bufs) {
		return make([]byte, n)
	}
	if k := len(p.bufs[c]); k > 0 {
		b := p.bufs[c][k-1]
		p.bufs[c] = p.bufs[c][:k-1]
		return b[:n]
	}
	return make([]byte, n, 1<<(c+minBufShift))
}

func (p *pool) putBuf(b []byte) {
	c := bufClass(cap(b))
	if c < len(p.bufs) && cap(b) == 1<<(c+minBufShift) && len(p.bufs[c]) < maxPerClass {
		p.bufs[c] = append(p.bufs[c], b[:0])
	}
}
