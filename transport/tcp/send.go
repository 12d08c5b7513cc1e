package tcp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/gocoll/gocoll/transport"
)

const (
	maxBatch = 64 // most sends per writev

	// inlineMax is the longest send that Start may write itself, copied
	// into a staging frame, when the connection's write side is idle:
	// that saves waking the writer goroutine, a few microseconds per
	// message. Longer sends go to the writer, which writes them from the
	// caller's buffer.
	inlineMax = 16 << 10

	// sockBuf is the SO_SNDBUF and SO_RCVBUF asked for, where the
	// kernel's limits allow it; below those limits, asking would cap the
	// buffers lower than the kernel's autotuning would grow them.
	sockBuf = 4 << 20
)

// writeState says who owns a connection's write side.
type writeState int

const (
	writeIdle   writeState = iota
	writeInline            // a Start is writing a frame itself
	writeWriter            // the writer goroutine
)

func putHeader(h []byte, tag transport.Tag, n int) {
	binary.LittleEndian.PutUint32(h, kindData)
	binary.LittleEndian.PutUint32(h[4:], tag.Context)
	binary.LittleEndian.PutUint32(h[8:], tag.Seq)
	binary.LittleEndian.PutUint32(h[12:], tag.Round)
	binary.LittleEndian.PutUint64(h[16:], uint64(n))
}

func (p *peer) startSend(op *transport.Op) {
	p.mu.Lock()
	if p.ep.closed.Load() {
		p.mu.Unlock()
		op.Complete(0, p.ep.errClosed)
		return
	}
	if p.err != nil {
		err := p.err
		p.mu.Unlock()
		op.Complete(0, err)
		return
	}
	if len(op.Buf) > MaxMessage {
		p.mu.Unlock()
		op.Complete(0, &transport.Error{Peer: p.rank, Err: fmt.Errorf("message of %d bytes is longer than tcp.MaxMessage", len(op.Buf))})
		return
	}
	if p.state == stateConnected && p.wstate == writeIdle && len(p.sendq) == 0 && len(p.ctrl) == 0 && len(op.Buf) <= inlineMax && p.inline != nil {
		p.wstate = writeInline
		p.mu.Unlock()
		p.sendInline(op)
		return
	}
	p.sendq = append(p.sendq, op)
	p.active.Add(1)
	if p.state == stateConnected {
		p.signal()
	} else {
		p.connectLocked()
	}
	p.mu.Unlock()
}

// sendInline writes a small frame from Start with one non-blocking write.
// The frame is staged in the peer's own buffer, so the send completes at
// once; what the kernel does not take goes to the writer.
func (p *peer) sendInline(op *transport.Op) {
	in := p.inline
	frame := in.staging[:headerLen+len(op.Buf)]
	putHeader(frame, op.Tag, len(op.Buf))
	copy(frame[headerLen:], op.Buf)
	n, err := in.write(frame)
	if err != nil {
		err = p.failWrite(err)
		if p.ep.spreads(err) {
			p.ep.abandon(op.Tag, err)
		}
		op.Complete(0, err)
		return
	}
	p.progress.Store(p.ep.now())
	p.mu.Lock()
	if n == len(frame) {
		p.wstate = writeIdle
		if len(p.sendq) > 0 {
			p.signal()
		}
	} else {
		p.tail, p.wstate = frame[n:], writeWriter
		p.signal()
	}
	p.mu.Unlock()
	op.Complete(len(op.Buf), nil)
}

// inliner makes one non-blocking write on a connection.
type inliner struct {
	raw     syscall.RawConn
	staging []byte
	buf     []byte
	n       int
	err     error
	fn      func(fd uintptr) bool // made once: a closure per call would allocate
}

func newInliner(c net.Conn) *inliner {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	in := &inliner{raw: raw, staging: make([]byte, headerLen+inlineMax)}
	in.fn = func(fd uintptr) bool {
		in.n, in.err = rawWrite(fd, in.buf)
		return true // one attempt: never wait for the socket
	}
	return in
}

// write writes what the kernel takes of b now and returns how much that
// was; a full socket is not an error.
func (in *inliner) write(b []byte) (int, error) {
	in.buf = b
	err := in.raw.Write(in.fn)
	n, werr := in.n, in.err
	in.buf, in.err = nil, nil
	if err == nil {
		err = werr
	}
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
		err = nil
	}
	return max(n, 0), err
}

// writeLoop sends the queued sends in batches until the peer fails.
func (p *peer) writeLoop(c net.Conn) {
	defer p.ep.wg.Done()
	w := &writer{hdrs: make([]byte, headerLen*maxBatch)}
	for range p.wake {
		for {
			p.mu.Lock()
			if p.err != nil {
				p.mu.Unlock()
				return
			}
			if p.wstate == writeInline {
				p.mu.Unlock()
				break // the inline sender signals when it is done
			}
			if p.tail != nil {
				tail := p.tail
				p.tail, p.wstate = nil, writeWriter
				p.mu.Unlock()
				if _, err := c.Write(tail); err != nil {
					p.failWrite(err)
					return
				}
				p.progress.Store(p.ep.now())
				continue
			}
			if len(p.ctrl) > 0 {
				// Control frames go between data frames.
				frames := p.ctrl
				p.ctrl, p.wstate = nil, writeWriter
				p.mu.Unlock()
				for i, f := range frames {
					if _, err := c.Write(f); err != nil {
						p.ep.ctrlPending.Add(-int32(len(frames) - i))
						p.failWrite(err)
						return
					}
					p.ep.ctrlPending.Add(-1)
				}
				continue
			}
			k := min(len(p.sendq), maxBatch)
			if k == 0 {
				p.wstate = writeIdle
				p.mu.Unlock()
				break
			}
			p.wstate = writeWriter
			w.batch = append(w.batch[:0], p.sendq[:k]...)
			rest := copy(p.sendq, p.sendq[k:])
			clear(p.sendq[rest:])
			p.sendq = p.sendq[:rest]
			p.mu.Unlock()

			err := p.writeBatch(c, w)
			if err != nil {
				err = p.failWrite(err)
			}
			for i, op := range w.batch {
				if err != nil {
					p.finish(op, 0, err)
				} else {
					p.finish(op, len(op.Buf), nil)
				}
				w.batch[i] = nil
			}
			if err != nil {
				return
			}
		}
	}
}

// writer is the writer goroutine's reusable memory.
type writer struct {
	hdrs    []byte
	batch   []*transport.Op
	pieces  [][]byte    // headers and payloads of the batch, in order
	backing [][]byte    // capacity for iov
	iov     net.Buffers // one writev's worth; WriteTo consumes it
}

// writeBatch writes the frames of w.batch with writev, at most ioSlice
// bytes per call.
func (p *peer) writeBatch(c net.Conn, w *writer) error {
	w.pieces = w.pieces[:0]
	for i, op := range w.batch {
		h := w.hdrs[i*headerLen : (i+1)*headerLen]
		putHeader(h, op.Tag, len(op.Buf))
		w.pieces = append(w.pieces, h)
		if len(op.Buf) > 0 {
			w.pieces = append(w.pieces, op.Buf)
		}
	}
	v := w.pieces
	for len(v) > 0 {
		iov := w.backing[:0]
		room := ioSlice
		for len(v) > 0 && room > 0 {
			b := v[0]
			if len(b) > room {
				iov = append(iov, b[:room])
				v[0] = b[room:]
				break
			}
			iov = append(iov, b)
			room -= len(b)
			v = v[1:]
		}
		w.backing = iov
		w.iov = iov
		if _, err := w.iov.WriteTo(c); err != nil {
			return err
		}
		p.progress.Store(p.ep.now())
	}
	clear(w.pieces)
	clear(w.backing[:cap(w.backing)])
	return nil
}

// setSocketOptions turns Nagle off and asks for large buffers where the
// kernel allows them.
func setSocketOptions(tc *net.TCPConn) {
	tc.SetNoDelay(true)
	if l := bufLimits(); l[0] >= sockBuf {
		tc.SetReadBuffer(sockBuf)
	}
	if l := bufLimits(); l[1] >= sockBuf {
		tc.SetWriteBuffer(sockBuf)
	}
}

// bufLimits reads net.core.rmem_max and wmem_max (0 where unknown).
var bufLimits = sync.OnceValue(func() [2]int {
	var l [2]int
	for i, name := range []string{"rmem_max", "wmem_max"} {
		b, err := os.ReadFile("/proc/sys/net/core/" + name)
		if err == nil {
			l[i], _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
	return l
})

// failWrite fails the peer after a write error: explained by what the
// peer told before it ended, if it did.
func (p *peer) failWrite(err error) error {
	if lw := p.explained(); lw != nil {
		return p.fail(lw)
	}
	return p.fail(peerFailed(p.rank, "%v", err))
}
