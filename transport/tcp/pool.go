package tcp

import (
	"fmt"
	"math/bits"
	"sync"

	"github.com/gocoll/gocoll/transport"
)

// Unexpected messages are stored in chunks from size-class pools: a
// message of up to maxChunk bytes takes one chunk of the next power of
// two, a longer one a list of maxChunk chunks, allocated as its bytes
// arrive.
const (
	minChunkShift = 6  // 64 B
	maxChunkShift = 18 // 256 KiB
	maxChunk      = 1 << maxChunkShift
)

type chunk struct{ b []byte }

var chunkPools [maxChunkShift - minChunkShift + 1]sync.Pool

func chunkClass(n int) int {
	return max(bits.Len(uint(n-1)), minChunkShift) - minChunkShift
}

// getChunk returns a chunk of n bytes, 0 < n <= maxChunk.
func getChunk(n int) *chunk {
	cls := chunkClass(n)
	if v := chunkPools[cls].Get(); v != nil {
		c := v.(*chunk)
		c.b = c.b[:n]
		return c
	}
	return &chunk{b: make([]byte, n, 1<<(cls+minChunkShift))}
}

func putChunk(c *chunk) {
	chunkPools[chunkClass(cap(c.b))].Put(c)
}

// message is an unexpected message: arrived, or arriving, before its
// receive was posted. The reader writes chunks and got; done and claim
// are guarded by the peer's mutex.
type message struct {
	tag    transport.Tag
	n, got int
	chunks []*chunk
	done   bool          // every byte has arrived
	claim  *transport.Op // the receive that took it while it arrived
}

var messagePool = sync.Pool{New: func() any { return new(message) }}

func newMessage(tag transport.Tag, n int) *message {
	m := messagePool.Get().(*message)
	m.tag, m.n = tag, n
	return m
}

// copyTo copies the bytes that have arrived into buf.
func (m *message) copyTo(buf []byte) {
	off := 0
	for _, c := range m.chunks {
		off += copy(buf[off:], c.b)
	}
}

// deliver copies a complete message into op's buffer and returns the
// receive's outcome.
func (m *message) deliver(op *transport.Op, from int) (int, error) {
	if m.n > len(op.Buf) {
		return 0, &transport.Error{Peer: from, Err: fmt.Errorf("%w: %d bytes into %d", transport.ErrTruncate, m.n, len(op.Buf))}
	}
	m.copyTo(op.Buf)
	return m.n, nil
}

// release returns the message and its chunks to their pools.
func (m *message) release() {
	for i, c := range m.chunks {
		putChunk(c)
		m.chunks[i] = nil
	}
	*m = message{chunks: m.chunks[:0]}
	messagePool.Put(m)
}
