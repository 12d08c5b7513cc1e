package tcp

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gocoll/gocoll/transport"
)

const (
	headerLen = 24
	kindData  = 1

	readBufSize = 64 << 10 // bufio: batches small frames, large reads bypass it
	ioSlice     = 4 << 20  // most bytes per read or writev, so progress is seen
)

type peerState int

const (
	stateIdle      peerState = iota
	stateDialing             // our dial is in progress
	stateAwaiting            // our dial lost the race; the peer's is coming
	stateConnected           // conn carries frames
	stateFailed              // err says why; final
)

// peer is the endpoint's state for one other rank.
type peer struct {
	ep   *Endpoint
	rank int

	mu    sync.Mutex
	state peerState
	err   error // why the peer failed; set once
	conn  net.Conn
	// dialedByUs says which side dialed conn.
	dialedByUs bool
	// posted holds receives waiting for their message, in the order
	// posted; unexpected holds messages waiting for their receive, in the
	// order they arrived (the last may still be arriving). Both are
	// scanned from the front, which keeps messages from overtaking.
	posted     []*transport.Op
	unexpected []*message
	// sendq holds sends not yet taken by the writer, in the order started.
	sendq []*transport.Op
	// wstate says who owns the connection's write side; tail is the part
	// of an inline frame the kernel did not take, for the writer to
	// finish before anything else.
	wstate writeState
	tail   []byte
	inline *inliner // nil where inline sends are not possible

	wake chan struct{} // capacity 1: the writer has work, or should exit

	// active counts ops started with this peer and not yet completed;
	// progress is the time stamp of the last byte moved. The watchdog
	// reads both.
	active   atomic.Int32
	progress atomic.Int64

	// ctrl holds control frames (abandon.go) for the writer, which sends
	// them between data frames. statusAt is when the peer last said it
	// waits for another rank, statusFor that rank + 1.
	ctrl      [][]byte
	statusAt  atomic.Int64
	statusFor atomic.Int32
	// lastWords is the first abandon frame the peer sent: the failure of
	// another rank, which explains the peer's own end if it follows.
	lastWords error
}

// finish completes an op that was counted in active. An op failed by a
// peer's death or stall abandons its call (abandon.go).
func (p *peer) finish(op *transport.Op, n int, err error) {
	tag := op.Tag
	if p.ep.spreads(err) {
		// Queue the news before the op completes, so that a Wait that
		// returns this error finds the frames to flush.
		err = p.ep.awaitCause(tag, err)
		p.ep.abandon(tag, err)
	}
	p.ep.complete(op, n, err)
	p.active.Add(-1)
}

func (p *peer) startRecv(op *transport.Op) {
	p.mu.Lock()
	if p.ep.closed.Load() {
		p.mu.Unlock()
		op.Complete(0, p.ep.errClosed)
		return
	}
	for i, m := range p.unexpected {
		if m.tag != op.Tag {
			continue
		}
		p.unexpected = slices.Delete(p.unexpected, i, i+1)
		if !m.done {
			// Still arriving: the reader will finish into op.
			m.claim = op
			p.active.Add(1)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		n, err := m.deliver(op, p.rank)
		m.release()
		op.Complete(n, err)
		return
	}
	if p.err != nil {
		err := p.err
		p.mu.Unlock()
		op.Complete(0, err)
		return
	}
	p.posted = append(p.posted, op)
	p.active.Add(1)
	p.connectLocked()
	p.mu.Unlock()
}

// signal wakes the writer without blocking.
func (p *peer) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// connectLocked starts a dial if nothing connects the peer yet.
func (p *peer) connectLocked() {
	if p.state != stateIdle {
		return
	}
	p.state = stateDialing
	p.progress.Store(p.ep.now())
	p.ep.wg.Add(1)
	go p.dial()
}

// attachLocked makes c the peer's connection and starts its reader and
// writer. br holds what c delivered after the handshake.
func (p *peer) attachLocked(c net.Conn, br *bufio.Reader, dialedByUs bool) {
	if tc, ok := c.(*net.TCPConn); ok {
		setSocketOptions(tc)
	}
	p.conn, p.dialedByUs = c, dialedByUs
	p.inline = newInliner(c)
	p.state = stateConnected
	p.progress.Store(p.ep.now())
	p.ep.wg.Add(2)
	go p.readLoop(br)
	go p.writeLoop(c)
	p.signal()
}

// fail marks the peer failed with err unless it already failed, closes its
// connection and completes the ops that neither the reader nor the writer
// is working on; they complete theirs when their I/O fails, which closing
// the connection makes immediate. It returns the peer's error.
func (p *peer) fail(err error) error {
	p.mu.Lock()
	if p.err != nil {
		err = p.err
		p.mu.Unlock()
		return err
	}
	p.err = err
	p.state = stateFailed
	posted, sendq, c := p.posted, p.sendq, p.conn
	p.posted, p.sendq = nil, nil
	p.ep.ctrlPending.Add(-int32(len(p.ctrl)))
	p.ctrl = nil
	p.mu.Unlock()
	if c != nil {
		c.Close()
	}
	p.signal()
	for _, op := range posted {
		p.finish(op, 0, err)
	}
	for _, op := range sendq {
		p.finish(op, 0, err)
	}
	return err
}

// dropUnexpected returns the chunks of queued messages to their pools; the
// endpoint is closed and no receive can take them any more.
func (p *peer) dropUnexpected() {
	p.mu.Lock()
	q := p.unexpected
	p.unexpected = nil
	p.mu.Unlock()
	for _, m := range q {
		if m.done {
			m.release()
		}
	}
}

// readLoop reads frames until the connection fails.
func (p *peer) readLoop(br *bufio.Reader) {
	defer p.ep.wg.Done()
	hdr := make([]byte, headerLen)
	for {
		if _, err := io.ReadFull(br, hdr); err != nil {
			p.failRead(err)
			return
		}
		kind := binary.LittleEndian.Uint32(hdr)
		tag := transport.Tag{
			Context: binary.LittleEndian.Uint32(hdr[4:]),
			Seq:     binary.LittleEndian.Uint32(hdr[8:]),
			Round:   binary.LittleEndian.Uint32(hdr[12:]),
		}
		length := binary.LittleEndian.Uint64(hdr[16:])
		switch {
		case kind == kindStatus && length == 0:
			// Not progress: a peer that only says it waits still stalls.
			p.statusFor.Store(int32(tag.Context))
			p.statusAt.Store(p.ep.now())
			continue
		case kind == kindAbandon && length > 0 && length <= maxReason:
			payload := make([]byte, length)
			if _, err := io.ReadFull(br, payload); err != nil {
				p.failRead(err)
				return
			}
			p.onAbandon(transport.Tag{Context: tag.Context, Seq: tag.Seq}, tag.Round, payload)
			continue
		}
		p.progress.Store(p.ep.now())
		if kind != kindData || length > MaxMessage {
			p.ep.logf("rank %d: protocol error: frame kind %d, length %d", p.rank, kind, length)
			p.fail(peerFailed(p.rank, "protocol error: frame kind %d, length %d", kind, length))
			return
		}
		n := int(length)

		p.mu.Lock()
		var op *transport.Op
		for i, r := range p.posted {
			if r.Tag == tag {
				op = r
				p.posted = slices.Delete(p.posted, i, i+1)
				break
			}
		}
		var m *message
		if op == nil {
			m = newMessage(tag, n)
			p.unexpected = append(p.unexpected, m)
		}
		p.mu.Unlock()

		var err error
		if op != nil {
			err = p.readInto(br, op, n, 0)
		} else {
			err = p.readUnexpected(br, m)
		}
		if err != nil {
			return
		}
	}
}

// failRead fails the peer after a read error and returns its error.
func (p *peer) failRead(err error) error {
	if lw := p.explained(); lw != nil {
		return p.fail(lw) // closed, or reset: it ended after telling us why
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return p.fail(peerFailed(p.rank, "connection closed"))
	}
	return p.fail(peerFailed(p.rank, "%v", err))
}

// readInto reads the rest of an n-byte message, of which got bytes are
// already in op.Buf, and completes op. It returns an error only if the
// connection failed.
func (p *peer) readInto(br *bufio.Reader, op *transport.Op, n, got int) error {
	if n > len(op.Buf) {
		if err := p.discard(br, n-got); err != nil {
			p.finish(op, 0, p.failRead(err))
			return err
		}
		p.finish(op, 0, &transport.Error{Peer: p.rank, Err: fmt.Errorf("%w: %d bytes into %d", transport.ErrTruncate, n, len(op.Buf))})
		return nil
	}
	for got < n {
		k := min(n-got, ioSlice)
		if _, err := io.ReadFull(br, op.Buf[got:got+k]); err != nil {
			p.finish(op, 0, p.failRead(err))
			return err
		}
		got += k
		p.progress.Store(p.ep.now())
	}
	p.finish(op, n, nil)
	return nil
}

func (p *peer) discard(br *bufio.Reader, n int) error {
	for n > 0 {
		k, err := br.Discard(min(n, ioSlice))
		if err != nil {
			return err
		}
		n -= k
		p.progress.Store(p.ep.now())
	}
	return nil
}

// readUnexpected reads a message that no receive was waiting for into
// pooled chunks. A receive that claims it while it arrives takes over the
// rest of the read.
func (p *peer) readUnexpected(br *bufio.Reader, m *message) error {
	for m.got < m.n {
		p.mu.Lock()
		op := m.claim
		p.mu.Unlock()
		if op != nil {
			if m.n <= len(op.Buf) {
				m.copyTo(op.Buf)
			}
			n, got := m.n, m.got
			m.release()
			return p.readInto(br, op, n, got)
		}
		c := getChunk(min(m.n-m.got, maxChunk))
		m.chunks = append(m.chunks, c)
		if _, err := io.ReadFull(br, c.b); err != nil {
			err = p.failRead(err)
			p.mu.Lock()
			if i := slices.Index(p.unexpected, m); i >= 0 {
				p.unexpected = slices.Delete(p.unexpected, i, i+1)
			}
			op := m.claim
			p.mu.Unlock()
			if op != nil {
				p.finish(op, 0, err)
			}
			m.release()
			return err
		}
		m.got += len(c.b)
		p.progress.Store(p.ep.now())
	}
	p.mu.Lock()
	m.done = true
	op := m.claim
	p.mu.Unlock()
	if op != nil {
		n, err := m.deliver(op, p.rank)
		m.release()
		p.finish(op, n, err)
	}
	return nil
}
