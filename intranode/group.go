//go:build linux

package intranode

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/internal/linuxsys"
	"github.com/gocoll/gocoll/transport"
)

// Exchange is what Attach needs from the communicator it serves.
type Exchange interface {
	// Bcast copies buf from rank 0 to every rank.
	Bcast(buf []byte) error
	// AllTrue returns whether ok is true on every rank.
	AllTrue(ok bool) (bool, error)
}

// Options tune a group.
type Options struct {
	JobID   string        // names the segment file; letters, digits, '-', '_', '.'
	Context uint32        // the communicator's context, also in the name
	Slot    int           // bytes per rank and buffer set, every step's bound (GOCOLL_SHM_SLOT); 0: by size class (Steps)
	Timeout time.Duration // a peer that makes no progress for this long fails the call (0: none)
	NoCMA   bool          // Allgather copies through the slots at every size, never by CMA
	CMAMin  int           // the longest block from which Allgather uses CMA; 0: CMAMin, or CMAMinCrowded

	refuseCMA bool // tests: act as if the kernel refused process_vm_readv
}

// DefaultSlot is the data each rank places in a step below the large
// size classes: allreduce takes one step up to it (see Steps).
const DefaultSlot = 128 << 10

// Without Options.Slot, each rank's slot holds DefaultCapacity bytes (up
// to MaxRanksLarge ranks; DefaultSlot beyond), and a large allreduce
// moves LargeChunk bytes a step, a large reduce-scatter at most
// LargeChunk of every block a step (see Steps for why).
const (
	DefaultCapacity = 1 << 20
	LargeChunk      = 512 << 10
	MaxRanksLarge   = 8
)

// Steps are the bytes the collectives move per step, chosen per size
// class from the message and the slot (the same on every rank, and in
// the C half, which reads them from the rank's control line).
//
// Measured on the 2-core reference VM at np=2 (collbench's pattern,
// bench/abcoll.sh): one allreduce step per message wins up to 128 KiB;
// above, chunks of 512 KiB took 0.61-0.65 of the time of 128 KiB chunks
// from 1 to 4 MiB (256 KiB and 1 MiB chunks 0.81-0.97), and reduce-scatter
// pieces of 512 KiB a block 0.49-0.54 of 64 KiB ones: a rank rewriting
// slot lines its peer still holds in its cache pays for each line, while
// lines written a megabyte ago have left the peer's L2. With
// GOCOLL_SHM_SLOT set, every step is the slot (the behaviour before size
// classes).
type Steps struct {
	OneStep int // allreduce: the longest message in bytes taken in one step
	Chunk   int // allreduce: bytes of a chunk, above OneStep
	Piece   int // reduce_scatter: the most bytes of every block a step moves
	Gather  int // allgather through the slots: the most bytes of each block a step moves
}

// stepsFor returns the steps of a group of p ranks whose slot is slot
// bytes, chosen by size class unless the user set the slot (fixed).
func stepsFor(p, slot int, fixed bool) Steps {
	if fixed {
		return Steps{OneStep: slot, Chunk: slot, Piece: slot / p, Gather: slot}
	}
	return Steps{OneStep: min(DefaultSlot, slot), Chunk: min(LargeChunk, slot), Piece: min(LargeChunk, slot/p),
		Gather: min(LargeChunk, slot)}
}

const (
	cacheLine  = 64
	bellOffset = cacheLine          // the bell line, after a line of its own
	ctlOffset  = 2 * cacheLine      // rank q's control line is at ctlOffset + q*cacheLine
	sets       = 2                  // buffer sets, used by steps in turn (step % sets)
	dataAlign  = 4096               // the data sets start at the first multiple of it after the control lines
	rotateMin  = 16 << 10           // from this many bytes a step, its data moves around the slot (placed)
	rotateStep = 4096               // by a multiple of this
	magic      = 0x676f636f6c6c4731 // "gocollG1"
	spinFor    = 100 * time.Microsecond
	spinShort  = 500 * time.Microsecond // of sched_yield polls, when crowded
	checkEvery = 100 * time.Millisecond
)

// control is one rank's cache line: how many steps it has published, its
// pid (for liveness checks), once it gave up waiting, on whom (gaveUp,
// see check), and the address of its block in a CMA allgather (at
// Attach: of the probe word). The rank's steps and CMA threshold follow,
// written at Attach for the C half, which decides with them as Go does.
type control struct {
	step    atomic.Uint64
	pid     atomic.Uint32
	gaveUp  atomic.Uint32
	addr    atomic.Uint64
	oneStep atomic.Uint32 // Steps.OneStep
	piece   atomic.Uint32 // Steps.Piece
	cmaMin  atomic.Uint32 // the shortest allgather block read by CMA; 0: none
	_       [cacheLine - 36]byte
}

// bell is the line sleepers wait on.
type bell struct {
	seq      atomic.Uint32
	sleepers atomic.Int32
	_        [cacheLine - 8]byte
}

// Group is one rank's view of a communicator's shared segment. A group
// serves one collective at a time (its communicator serialises calls).
type Group struct {
	p, rank int
	slot    int
	mem     []byte
	ctl     []*control
	bell    *bell
	data    int // offset of the data sets
	result  int // offset of the result sets
	step    uint64
	steps   Steps

	pids, pidfds []int
	timeout      time.Duration
	spin         time.Duration
	crowded      bool
	epoch        time.Time
	lastCheck    time.Duration
	displ        []int    // reused by displacements
	got          []bool   // an allgather step's blocks read so far, by rank (Call.early)
	early        *Call    // while set, waits read what they can of its step (Call.early)
	scratch      []byte   // reused by reduce
	parts        [][]byte // the slots reduce combines, refilled per call
	call         Call     // the collective under way (Start...)
	warm         bool     // every page of the segment is mapped (warmUp)

	cma       bool  // Allgather may read peers' blocks with process_vm_readv
	cmaErr    error // why not, when it may not
	cmaMin    int
	refuseCMA bool
	iov       [2]linuxsys.IOVec
}

func layout(p, slot int) (data, result, total int) {
	ctlEnd := ctlOffset + cacheLine*p
	data = (ctlEnd + dataAlign - 1) &^ (dataAlign - 1)
	result = data + sets*p*slot
	total = result + sets*slot
	return
}

// Attach maps a shared segment for the p ranks of a communicator: rank 0
// creates it (mode 0600), every rank maps it, and once all have, rank 0
// removes the file, so that nothing is left behind even if a rank crashes
// later. Collective over the communicator; every rank returns an error if
// any rank failed.
func Attach(x Exchange, rank, p int, opts Options) (*Group, error) {
	slot := opts.Slot
	if slot <= 0 {
		slot = DefaultCapacity
		if p > MaxRanksLarge {
			slot = DefaultSlot
		}
	}
	slot = (slot + 63) &^ 63
	_, _, total := layout(p, slot)
	if !opts.NoCMA {
		linuxsys.AllowPtraceAny() // before the exchange below, after which peers probe this process
	}
	name := make([]byte, 200)
	var path string
	var createErr error
	if rank == 0 {
		var rnd [6]byte
		rand.Read(rnd[:])
		path = fmt.Sprintf("/dev/shm/gocoll-%s-c%d-%s", safe(opts.JobID), opts.Context, hex.EncodeToString(rnd[:]))
		createErr = create(path, total)
		if createErr == nil {
			copy(name, path)
		}
	}
	if err := x.Bcast(name); err != nil {
		return nil, err
	}
	if rank != 0 {
		path = string(name[:indexByte(name, 0)])
	}
	var g *Group
	var err error
	if path == "" {
		err = fmt.Errorf("intranode: rank 0 could not create the segment: %v", createErr)
	} else {
		g, err = mapSegment(path, rank, p, slot, total)
	}
	ok, xerr := x.AllTrue(err == nil)
	if rank == 0 && path != "" {
		os.Remove(path) // everyone has mapped it (or given up)
	}
	switch {
	case xerr != nil:
		err = xerr
	case !ok && err == nil:
		err = errors.New("intranode: another rank could not map the segment")
	}
	if err != nil {
		if g != nil {
			g.Close()
		}
		return nil, err
	}
	g.timeout = opts.Timeout
	g.steps = stepsFor(p, slot, opts.Slot > 0)
	for q := range p {
		g.pids[q] = int(g.ctl[q].pid.Load())
		g.pidfds[q] = -1
		if q != rank {
			g.pidfds[q] = linuxsys.PidfdOpen(g.pids[q])
		}
	}
	// CMA serves every rank or none: each probes every peer, and all
	// agree. Refused anywhere (Yama, seccomp, no such system call), the
	// copy path serves every size.
	g.cmaMin, g.refuseCMA = opts.CMAMin, opts.refuseCMA
	if g.cmaMin <= 0 {
		g.cmaMin = CMAMin
		if g.crowded {
			g.cmaMin = CMAMinCrowded
		}
	}
	g.cmaErr = errors.New("turned off")
	if !opts.NoCMA {
		g.cmaErr = g.probeCMA()
	}
	all, err := x.AllTrue(g.cmaErr == nil)
	if err != nil {
		g.Close()
		return nil, err
	}
	g.cma = all
	if !all && g.cmaErr == nil {
		g.cmaErr = errors.New("another rank cannot use it")
	}
	c := g.ctl[rank]
	c.oneStep.Store(uint32(g.steps.OneStep))
	c.piece.Store(uint32(g.steps.Piece))
	if g.cma {
		c.cmaMin.Store(uint32(min(g.cmaMin, 1<<31)))
	}
	return g, nil
}

func safe(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return len(b)
}

func create(path string, total int) error {
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	if err := syscall.Ftruncate(fd, int64(total)); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

func mapSegment(path string, rank, p, slot, total int) (*Group, error) {
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	mem, err := syscall.Mmap(fd, 0, total, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	data, result, _ := layout(p, slot)
	g := &Group{p: p, rank: rank, slot: slot, mem: mem, data: data, result: result,
		pids: make([]int, p), pidfds: make([]int, p), got: make([]bool, p), epoch: time.Now(), spin: spinFor}
	g.bell = (*bell)(unsafe.Pointer(&mem[bellOffset]))
	for q := range p {
		g.ctl = append(g.ctl, (*control)(unsafe.Pointer(&mem[ctlOffset+cacheLine*q])))
	}
	g.ctl[rank].pid.Store(uint32(os.Getpid()))
	g.ctl[rank].addr.Store(uint64(uintptr(unsafe.Pointer(&cmaProbe))))
	g.crowded = p > numCPU()
	if g.crowded {
		g.spin = spinShort
	}
	return g, nil
}

// Close unmaps the segment.
func (g *Group) Close() error {
	for _, fd := range g.pidfds {
		if fd >= 0 {
			syscall.Close(fd)
		}
	}
	g.pidfds = nil
	if g.mem == nil {
		return nil
	}
	err := syscall.Munmap(g.mem)
	g.mem = nil
	return err
}

// Size and Rank describe the group.
func (g *Group) Size() int { return g.p }
func (g *Group) Rank() int { return g.rank }

// Slot returns the bytes a rank can place per step.
func (g *Group) Slot() int { return g.slot }

// Steps returns the bytes the collectives move per step.
func (g *Group) Steps() Steps { return g.steps }

// slotBuf is rank q's slot of buffer set s.
func (g *Group) slotBuf(s, q int) []byte {
	off := g.data + (s*g.p+q)*g.slot
	return g.mem[off : off+g.slot : off+g.slot]
}

// resultBuf is the shared result area of set s.
func (g *Group) resultBuf(s int) []byte {
	off := g.result + s*g.slot
	return g.mem[off : off+g.slot : off+g.slot]
}

// publish announces that this rank has finished its part of the next step.
// The step count lives in the segment, not in the Group, so that code
// outside Go (the C ABI's fast path for small messages) can take steps
// too: it follows the same protocol on the same layout (see Layout).
func (g *Group) publish() {
	g.step = g.ctl[g.rank].step.Load() + 1
	g.ctl[g.rank].step.Store(g.step)
	if g.bell.sleepers.Load() > 0 {
		g.bell.seq.Add(1)
		linuxsys.FutexWakeAll((*uint32)(unsafe.Pointer(&g.bell.seq)))
	}
}

// warmUp maps every page of the segment writable the first time a call
// of m bytes places its data (rotateMin and up), not page by page as
// calls touch them: a step's data moves around its slot (placed), so the
// first calls of a size would each fault on fresh pages (a 16 KiB
// allreduce's first hundred calls averaged 18 us against 2.2 once the
// pages were there). Not at attach: a communicator of small calls never
// pays for the whole segment, 2(p+1) slots, and MPI_Comm_dup stays
// cheap (20,000 dup/free pairs populated 160 GiB). The engine's C half
// does the same for its calls (warm in engine.c).
func (g *Group) warmUp(m int) {
	if g.warm || m < rotateMin {
		return
	}
	g.warm = true
	linuxsys.Populate(g.mem)
}

// set returns the buffer set of the current step.
func (g *Group) set() int { return int(g.step % sets) }

// placed returns where in a span of a slot (the whole slot, or a
// reduce-scatter piece of it) step places its m bytes: at its start
// below rotateMin bytes, and from there on one place further, m rounded
// up to a page, each time the step's set comes round, through the span.
// A rank that rewrote the same bytes at every call would rewrite lines
// its peers have just read, which their caches still hold, and pay for
// each (its copy ran at 9-10 GB/s, against 35-38 GB/s into lines read a
// megabyte of traffic ago; bench/engineprof.sh and docs/tuning.md). Every
// rank and both halves compute it from the step and sizes every rank
// knows.
func placed(step uint64, m, span int) int {
	if m < rotateMin || 2*m > span {
		return 0
	}
	size := (m + rotateStep - 1) &^ (rotateStep - 1)
	return int(step/sets%uint64(span/size)) * size
}

// Layout describes the segment to code outside Go (the engine's C half,
// package intranode/engine): its base address, and the byte offsets of the
// bell line (sequence uint32, then sleepers int32), of rank q's control
// line (CtlOffset + 64q: the published step as a uint64), and of rank q's
// slot in set s (DataOffset + (s*p+q)*Slot). The offsets within lines and
// the line size are constants, generated into the C half's header from
// LayoutConstants.
type Layout struct {
	Base                  unsafe.Pointer
	P, Rank, Slot         int
	BellOffset, CtlOffset int
	DataOffset            int
	Crowded               bool // more ranks than cores: wait briefly, then sleep
}

// Layout returns the segment's layout.
func (g *Group) Layout() Layout {
	return Layout{Base: unsafe.Pointer(&g.mem[0]), P: g.p, Rank: g.rank, Slot: g.slot,
		BellOffset: bellOffset, CtlOffset: ctlOffset, DataOffset: g.data, Crowded: g.crowded}
}

// Wait blocks until every rank has published the step this rank last
// published (from Go or from outside): the slow path of outside code that
// gave up spinning.
func (g *Group) Wait() error {
	g.step = g.ctl[g.rank].step.Load()
	return g.waitAll()
}

// settled reports whether every rank has published the step this rank
// published last (from Go or from outside), which this rank may have
// left without waiting for them (a step in which it read nothing): then
// none reads the set of the step before any more, which its next step
// writes. It makes that step the group's current step.
func (g *Group) settled() bool {
	g.step = g.ctl[g.rank].step.Load()
	return g.ready()
}

// ready reports whether every rank has published the current step.
func (g *Group) ready() bool {
	for _, c := range g.ctl {
		if c.step.Load() < g.step {
			return false
		}
	}
	return true
}

// waitAll blocks until every rank has published the current step: it
// polls for a while, then sleeps on the bell, looking for dead peers now
// and then.
func (g *Group) waitAll() error {
	if g.ready() {
		return nil
	}
	start := time.Since(g.epoch)
	g.lastCheck = start
	return g.waitFrom(start, start)
}

// waitFrom is waitAll from start (on the group's clock) for a wait that
// began at since, perhaps in an earlier Progress: the timeout counts from
// then.
func (g *Group) waitFrom(start, since time.Duration) error {
	for spins := 1; ; spins++ {
		if g.ready() {
			return nil
		}
		if g.early != nil && g.early.early() {
			spins = 0 // a peer came: the others may be close behind
			continue
		}
		if g.crowded {
			// More ranks than cores: the rank we wait for may be waiting
			// for this core, so hand it over at once (a sched_yield costs
			// about a microsecond; the clock is read every 16 of them).
			linuxsys.SchedYield()
			if spins&15 != 0 {
				continue
			}
		} else if spins&63 != 0 { // reading the clock costs more than a poll
			linuxsys.Pause()
			continue
		}
		now := time.Since(g.epoch)
		if now-start < g.spin {
			continue
		}
		b := g.bell
		b.sleepers.Add(1)
		seq := b.seq.Load()
		if !g.ready() {
			linuxsys.FutexSleep((*uint32)(unsafe.Pointer(&b.seq)), seq, 10*time.Millisecond)
		}
		b.sleepers.Add(-1)
		if err := g.check(now, since); err != nil {
			return err
		}
	}
}

// Errors are the transport's: a *transport.Error whose Peer is the rank
// (in the group) to blame, wrapping ErrPeerFailed or ErrTimeout, so that
// a failure on the segment reads and classifies as a failure on a
// transport does.
var (
	// ErrPeerFailed: a peer's process ended while this rank waited for it.
	ErrPeerFailed = transport.ErrPeerFailed
	// ErrTimeout: a peer made no progress for the group's timeout.
	ErrTimeout = transport.ErrTimeout
)

// check looks for dead or stalled peers while waiting.
func (g *Group) check(now, start time.Duration) error {
	if now-g.lastCheck < checkEvery {
		return nil
	}
	g.lastCheck = now
	for q, c := range g.ctl {
		if c.step.Load() >= g.step || q == g.rank {
			continue
		}
		if linuxsys.Exited(g.pidfds[q], g.pids[q]) {
			return g.giveUp(g.explained(q))
		}
		if g.timeout > 0 && now-start > g.timeout {
			return g.giveUp(&transport.Error{Peer: q, Err: ErrTimeout})
		}
	}
	return nil
}

// giveUp records in this rank's control line on whom it gave up, so that
// ranks that see it end next (MPI_ERRORS_ARE_FATAL ends the process)
// blame that rank, not this one.
func (g *Group) giveUp(e *transport.Error) error {
	cause := uint32(1)
	if errors.Is(e, ErrTimeout) {
		cause = 2
	}
	g.ctl[g.rank].gaveUp.CompareAndSwap(0, cause<<24|uint32(e.Peer)+1)
	return e
}

// explained is the error for peer q, whose process has ended: if q had
// given up on another rank first, that rank is to blame.
func (g *Group) explained(q int) *transport.Error {
	w := g.ctl[q].gaveUp.Load()
	r := int(w&0xffffff) - 1
	if w == 0 || r < 0 || r >= g.p || r == q || r == g.rank {
		return &transport.Error{Peer: q, Err: ErrPeerFailed}
	}
	cause := ErrPeerFailed
	if w>>24 == 2 {
		cause = ErrTimeout
	}
	return &transport.Error{Peer: r, Err: fmt.Errorf("%w (reported by rank %d, which then ended)", cause, q)}
}
