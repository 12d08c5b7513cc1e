//go:build linux

package shm

import "unsafe"

// A ring carries records from one local rank to another. Its indices are
// free-running byte counts; the producer alone writes tail and the
// consumer alone writes head, so neither needs a lock. Records start on a
// cache line and their 32-byte headers never wrap; payloads may wrap
// around the end of the data and are copied in two pieces.
//
// Each side keeps a private copy of its own index and a cached copy of
// the other's, so that a poll of an idle ring reads one shared cache line.
type ring struct {
	hdr  *ringHeader
	data []byte
	mask uint64
	pos  uint64 // producer: the next tail; consumer: the next head
	seen uint64 // producer: the last head read; consumer: the last tail read
}

func newRing(hdr *ringHeader, data []byte) ring {
	return ring{hdr: hdr, data: data, mask: uint64(len(data) - 1)}
}

// room returns the bytes a producer may write now, reading head again
// only if the cached value does not leave want bytes.
func (r *ring) room(want int) int {
	free := uint64(len(r.data)) - (r.pos - r.seen)
	if free < uint64(want) {
		r.seen = r.hdr.head.Load()
		free = uint64(len(r.data)) - (r.pos - r.seen)
	}
	return int(free)
}

// header returns the record header at byte count pos.
func (r *ring) header(pos uint64) *recHeader {
	return (*recHeader)(unsafe.Pointer(&r.data[pos&r.mask]))
}

// put copies b into the ring at byte count pos, wrapping at the end.
func (r *ring) put(pos uint64, b []byte) {
	i := int(pos & r.mask)
	n := copy(r.data[i:], b)
	copy(r.data, b[n:])
}

// get copies len(b) bytes at byte count pos out of the ring.
func (r *ring) get(pos uint64, b []byte) {
	i := int(pos & r.mask)
	n := copy(b, r.data[i:])
	copy(b[n:], r.data)
}

// publish makes every record written so far visible to the consumer.
func (r *ring) publish() { r.hdr.tail.Store(r.pos) }

// available returns the count up to which the consumer may read.
func (r *ring) available() uint64 {
	if r.seen == r.pos {
		r.seen = r.hdr.tail.Load()
	}
	return r.seen
}

// release gives the bytes consumed so far back to the producer and
// reports whether the producer asked to be told.
func (r *ring) release() bool {
	r.hdr.head.Store(r.pos)
	return r.hdr.waiting.Load() != 0 && r.hdr.waiting.Swap(0) != 0
}
