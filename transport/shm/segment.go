//go:build linux

package shm

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// The segment, as laid out in memory (see doc.go for the picture). Every
// shared field is reached through these overlay types, whose sizes are
// fixed by the padding and checked in segment_test.go.

const (
	segMagic   = 0x31_6d_68_73_6c_6c_6f_63 // "collshm1", little endian
	segVersion = 2

	cacheLine = 64
	headerLen = 4096 // the header page
	ctlLen    = 256  // one control block per local rank
	ringHdr   = 256  // a ring's indices, each on its own cache line
	slotsPer  = 1024 // rendezvous slots per local rank

	// A record is a 32-byte header and its payload, padded to a cache line.
	recHdrLen = 32
)

// header is the start of the segment, written once by the creator.
type header struct {
	magic   uint64
	version uint32
	n       uint32 // local ranks
	ringCap uint64 // bytes of data per ring, a power of two
	slots   uint32 // rendezvous slots per rank
	creator uint32 // pid of the creating process
	_       [32]byte
	// closeEpoch counts Closes and deaths; a rank that sees it change
	// looks at the peers' states, so that a poll costs one load.
	closeEpoch atomic.Uint32
	_          [60]byte
}

// ctl is one local rank's control block.
type ctl struct {
	pid   atomic.Uint32
	state atomic.Uint32 // ctlAttached, then ctlClosed, ctlDead or ctlStalled
	rank  atomic.Uint32 // global rank
	// waitingOn is 1 + the global rank this rank waits for while it
	// sleeps in Wait, 0 when it does not sleep there; beat counts its
	// wake-ups meanwhile. A rank whose op with it makes no progress
	// reads both to tell a peer that is itself waiting for another rank
	// from one that has gone quiet (stopped, or kept out of the
	// library), so that a stall is blamed on the rank that stalled.
	waitingOn atomic.Int32
	probe     atomic.Uint64 // address of cmaProbe in the rank's process
	beat      atomic.Uint64
	_         [32]byte
	// bell is the futex word the rank sleeps on: anyone who gives it
	// work (a record, a slot update, a Close) adds one and, if sleepers
	// is not zero, wakes it.
	bell     atomic.Uint32
	sleepers atomic.Uint32
	_        [56]byte
	_        [128]byte
}

const (
	ctlAttached = 1
	ctlClosed   = 2  // it called Close
	ctlDead     = 4  // a peer found its process gone without closing
	ctlStalled  = 8  // a peer waited for it longer than its timeout
	ctlDeadlock = 16 // it found ranks waiting for each other in a cycle
)

// ringHeader holds one single-producer, single-consumer ring's indices:
// free-running byte counts, each written by one side only.
type ringHeader struct {
	tail atomic.Uint64 // bytes published by the producer
	_    [56]byte
	head atomic.Uint64 // bytes consumed by the consumer
	_    [56]byte
	// waiting is set by a producer that found the ring full; the
	// consumer clears it and rings the producer's bell after making room.
	waiting atomic.Uint32
	_       [60]byte
	_       [64]byte
}

// recHeader opens every record in a ring.
type recHeader struct {
	kind  uint32 // recEager, recRTS, recData
	plen  uint32 // payload bytes after the header
	ctx   uint32 // tag
	seq   uint32
	round uint32
	_     uint32
	aux   uint64 // recRTS: slot and generation; recData: receive cookie
}

const (
	recEager = 1 // payload: the whole message
	recRTS   = 2 // payload: address and length of the send buffer
	recData  = 3 // payload: the next chunk of a copied rendezvous message
)

// recLen is the ring space a record with plen payload bytes takes.
func recLen(plen int) int { return (recHdrLen + plen + cacheLine - 1) &^ (cacheLine - 1) }

// layout gives the offsets of everything in a segment of n local ranks.
type layout struct {
	n       int
	ringCap int
	ctlOff  int
	slotOff int
	ringOff int
	stride  int // bytes per ring, header included
	total   int
}

func newLayout(n, ringCap int) layout {
	l := layout{n: n, ringCap: ringCap, ctlOff: headerLen}
	l.slotOff = l.ctlOff + n*ctlLen
	l.ringOff = roundUp(l.slotOff+n*slotsPer*8, 4096)
	l.stride = ringHdr + ringCap
	l.total = roundUp(l.ringOff+n*n*l.stride, 4096)
	return l
}

func roundUp(x, a int) int { return (x + a - 1) / a * a }

// ringCapFor picks the ring size for n local ranks: large rings for few
// ranks, so that small messages batch well, shrinking as the n*(n-1)
// rings multiply, so that a full node stays within tens of MiB.
func ringCapFor(n int) int {
	switch {
	case n <= 4:
		return 256 << 10
	case n <= 8:
		return 128 << 10
	case n <= 16:
		return 64 << 10
	case n <= 32:
		return 32 << 10
	case n <= 64:
		return 16 << 10
	case n <= 128:
		return 8 << 10
	default:
		return 4 << 10
	}
}

// segment is one process's mapping of the host's segment.
type segment struct {
	mem []byte
	lay layout
}

func (s *segment) at(off int) unsafe.Pointer { return unsafe.Pointer(&s.mem[off]) }

func (s *segment) header() *header { return (*header)(s.at(0)) }

func (s *segment) ctl(i int) *ctl { return (*ctl)(s.at(s.lay.ctlOff + i*ctlLen)) }

// slots returns local rank i's rendezvous slots, accessed atomically.
func (s *segment) slots(i int) []uint64 {
	return unsafe.Slice((*uint64)(s.at(s.lay.slotOff+i*slotsPer*8)), slotsPer)
}

// ring returns the header and data of the ring from local rank src to dst.
func (s *segment) ring(src, dst int) (*ringHeader, []byte) {
	off := s.lay.ringOff + (src*s.lay.n+dst)*s.lay.stride
	return (*ringHeader)(s.at(off)), s.mem[off+ringHdr : off+ringHdr+s.lay.ringCap : off+ringHdr+s.lay.ringCap]
}

func (s *segment) unmap() {
	if s.mem != nil {
		syscall.Munmap(s.mem)
		s.mem = nil
	}
}

// createSegment creates the file at path (mode 0600, failing if it exists),
// sizes it, maps it and writes the header.
func createSegment(path string, lay layout) (*segment, error) {
	const flags = syscall.O_RDWR | syscall.O_CREAT | syscall.O_EXCL | syscall.O_CLOEXEC | syscall.O_NOFOLLOW
	fd, err := syscall.Open(path, flags, 0o600)
	if errors.Is(err, syscall.EEXIST) && removeStale(path) {
		fd, err = syscall.Open(path, flags, 0o600)
	}
	if err != nil {
		if errors.Is(err, syscall.EEXIST) {
			return nil, fmt.Errorf("shm: %s exists: another job uses this JobID, or a job killed while starting left it behind", path)
		}
		return nil, fmt.Errorf("shm: create %s: %w", path, err)
	}
	defer syscall.Close(fd)
	fail := func(what string, err error) (*segment, error) {
		syscall.Unlink(path)
		return nil, fmt.Errorf("shm: %s %s (%d bytes): %w", what, path, lay.total, err)
	}
	if err := syscall.Fchmod(fd, 0o600); err != nil { // whatever the umask
		return fail("chmod", err)
	}
	// Reserve the memory now: a tmpfs that runs out later would kill
	// the job with SIGBUS instead of an error here.
	if err := syscall.Fallocate(fd, 0, 0, int64(lay.total)); err != nil && !errors.Is(err, syscall.EOPNOTSUPP) {
		return fail("allocate", err)
	}
	if err := syscall.Ftruncate(fd, int64(lay.total)); err != nil {
		return fail("size", err)
	}
	mem, err := syscall.Mmap(fd, 0, lay.total, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return fail("map", err)
	}
	s := &segment{mem: mem, lay: lay}
	h := s.header()
	h.version, h.n, h.ringCap, h.slots = segVersion, uint32(lay.n), uint64(lay.ringCap), slotsPer
	h.creator = uint32(os.Getpid())
	atomic.StoreUint64(&h.magic, segMagic)
	return s, nil
}

// removeStale removes the segment at path if the process that created it
// is gone: a job with the same JobID was killed inside New, between
// creating its segment and unlinking it. It reports whether it did.
func removeStale(path string) bool {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	var h header
	b := unsafe.Slice((*byte)(unsafe.Pointer(&h)), unsafe.Sizeof(h))
	if syscall.Fstat(fd, &st) != nil || int(st.Uid) != os.Geteuid() {
		return false
	}
	if n, err := syscall.Pread(fd, b, 0); err != nil || n != len(b) || h.magic != segMagic {
		return false
	}
	if syscall.Kill(int(h.creator), 0) != syscall.ESRCH {
		return false
	}
	return syscall.Unlink(path) == nil
}

// openSegment maps the segment another rank created at path, after
// checking that it belongs to this user and has the expected shape.
func openSegment(path string, lay layout) (*segment, error) {
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: open %s: %w", path, err)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("shm: stat %s: %w", path, err)
	}
	if int(st.Uid) != os.Geteuid() || st.Mode&0o077 != 0 || st.Size != int64(lay.total) {
		return nil, fmt.Errorf("shm: %s: owner %d, mode %o, %d bytes; want %d, 0600, %d bytes",
			path, st.Uid, st.Mode&0o777, st.Size, os.Geteuid(), lay.total)
	}
	mem, err := syscall.Mmap(fd, 0, lay.total, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: map %s: %w", path, err)
	}
	s := &segment{mem: mem, lay: lay}
	h := s.header()
	if atomic.LoadUint64(&h.magic) != segMagic || h.version != segVersion || int(h.n) != lay.n ||
		int(h.ringCap) != lay.ringCap || h.slots != slotsPer {
		s.unmap()
		return nil, fmt.Errorf("shm: %s is not a gocoll segment for %d local ranks", path, lay.n)
	}
	return s, nil
}
