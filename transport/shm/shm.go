//go:build linux

package shm

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/bootstrap"
	"github.com/gocoll/gocoll/internal/linuxsys"
	"github.com/gocoll/gocoll/transport"
)

// Endpoint is one rank's shared-memory transport. It carries messages to
// the ranks on its host (see Reaches); ops naming any other rank fail with
// transport.ErrBadPeer.
type Endpoint struct {
	rank, size int
	opts       Options
	me         int     // local index of this rank
	lidx       []int32 // global rank -> local index, or -1 off this host
	seg        *segment
	myCtl      *ctl
	hdr        *header
	pid        int
	epoch      time.Time // origin of the op timestamps
	spin       time.Duration
	crowded    bool // more local ranks than cores: yield while polling
	samePID    bool // some local peers are goroutines of this process

	// mu guards everything below; the protocol runs under it.
	mu     sync.Mutex
	idle   *sync.Cond // signalled when waiting drops to 0 after Close
	closed bool
	failed error // set once: every later op fails with it
	// waiting counts Wait calls inside the endpoint, which Close lets
	// drain before it unmaps the segment.
	waiting int

	peers      []*peer // by local index; nil at me
	posted     []*req  // receives not yet matched, in the order posted
	unexpected []*msg  // arrivals not yet matched, in the order arrived
	rdv        []*req  // sends whose RTS is out, watching their slot
	slots      []uint64
	slotFree   []uint32
	slotGen    []uint32
	recvIDs    []*req // receives fed by recData records, by cookie index
	recvGen    []uint16
	recvFree   []uint16
	toWake     []*peer
	seenEpoch  uint32
	lastCheck  time.Duration // last liveness check, since epoch
	completed  bool          // an op completed in this progress pass
	events     uint64        // counts records moved and ops completed
	iov        [2]linuxsys.IOVec
	pool       pool

	// localSleepers counts this endpoint's goroutines in (or entering)
	// a futex sleep, so that one that completes another's op wakes it.
	localSleepers int32
}

// peer is a rank on this host, as one endpoint sees it.
type peer struct {
	rank    int
	li      int
	pid     int
	pidfd   int
	ctl     *ctl
	slots   []uint64 // the peer's rendezvous slots, which receivers update
	in, out ring
	queue   []*req // sends not yet in the ring, in the order started
	streams []*req // sends copying through the ring (no CMA)
	cma     bool   // read its rendezvous messages with process_vm_readv
	eager   int    // the largest message sent to it in one record
	closing bool   // its closed flag was seen; handle after draining
	closed  bool   // it closed: ops with it fail
	dead    bool   // its process exited without closing
	stalled bool   // marked stalled (ctlStalled): a read of ours it began may never end
	wake    bool   // in toWake
	// beat is the peer's ctl.beat when last sampled, and beatAt when it
	// last changed: a rank asleep in Wait beats every sleep.
	beat   uint64
	beatAt time.Duration
}

// cmaProbe is what New reads from each peer to learn whether
// process_vm_readv works between them.
var cmaProbe uint64 = 0x9e3779b97f4a7c15

// Test hooks.
var (
	testBeforeUnlink func(path string) // called by the creator before unlinking
	testNoCMA        bool              // copy every rendezvous message through the ring
	testEagerLimit   int               // overrides the eager limit when > 0
)

const (
	// The largest message sent through the rings, when the receiver
	// reads larger ones with CMA, or when they are copied through the
	// ring too; larger ones rendezvous. Chosen with BenchmarkEagerLimit
	// (see doc.go).
	eagerCMA  = 32 << 10
	eagerCopy = 64 << 10
	// Wait polls for spinLong before it sleeps on the futex when the
	// host has a core per local rank, and for spinShort when it has
	// not (then a poll takes a core from a peer that needs it).
	spinLong  = 200 * time.Microsecond
	spinShort = 10 * time.Microsecond
	// yieldAfter is how long Wait polls without progress before it
	// calls sched_yield between polls, in case the peer it waits for is
	// waiting for this core.
	yieldAfter = 20 * time.Microsecond
	// checkEvery is how often a waiting rank looks for dead peers.
	checkEvery = 100 * time.Millisecond
)

var errClosed = &transport.Error{Peer: -1, Err: transport.ErrClosed}

// New creates this rank's endpoint. It is collective over all ranks of
// kvs, also those on other hosts, which find no peers: every rank must
// call it. Each rank publishes its Card, and rank 0 the job's name where
// opts.JobID is empty; one Fence, then Join.
func New(kvs bootstrap.KVS, opts Options) (*Endpoint, error) {
	rank, size := kvs.Rank(), kvs.Size()
	key := "shm-" + opts.JobID + "-"
	job := opts.JobID
	if job == "" && rank == 0 {
		job = NewJobName()
		if err := kvs.Put(key+"job", job); err != nil {
			return nil, err
		}
	}
	if err := kvs.Put(fmt.Sprintf("%scard-%d", key, rank), MyCard().String()); err != nil {
		return nil, err
	}
	if err := kvs.Fence(); err != nil {
		return nil, err
	}
	if job == "" {
		v, err := kvs.Get(key + "job")
		if err != nil {
			return nil, err
		}
		job = v
	}
	cards := make([]Card, size)
	for r := range size {
		v, err := kvs.Get(fmt.Sprintf("%scard-%d", key, r))
		if err == nil {
			cards[r], err = ParseCard(v)
		}
		if err != nil {
			return nil, err
		}
	}
	opts.JobID = job
	return Join(rank, cards, opts)
}

// Card is what a rank publishes for the shared-memory transport: which
// host it runs on and its process.
type Card struct {
	Host string // a hash of bootstrap.HostID, hex
	PID  int
}

// MyCard is this process's Card.
func MyCard() Card {
	host := sha256.Sum256([]byte(bootstrap.HostID())) // any HostID fits a KVS value
	return Card{Host: hex.EncodeToString(host[:16]), PID: os.Getpid()}
}

func (c Card) String() string { return c.Host + "." + strconv.Itoa(c.PID) }

// ParseCard reads Card.String.
func ParseCard(s string) (Card, error) {
	h, pid, ok := strings.Cut(s, ".")
	n, err := strconv.Atoi(pid)
	if !ok || err != nil || h == "" {
		return Card{}, fmt.Errorf("shm: %q is not a rank's card", s)
	}
	return Card{Host: h, PID: n}, nil
}

// NewJobName makes a random name for the job's segments, for rank 0 to
// publish where Options.JobID is empty.
func NewJobName() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Join creates this rank's endpoint from every rank's Card, with no
// further exchange through the launcher: ranks with the same host share
// one segment, named by opts.JobID (which must be set, the same on every
// rank). The lowest of them creates it; the others wait for it to appear
// with the creator's pid in its header, map it and mark themselves
// attached in it; every rank waits until all of its host's ranks have,
// and the creator then unlinks it, so that it goes away with the last
// process whatever happens next. Waits end with an error when a rank that
// is waited for has exited, or after opts.Timeout (300 s if 0).
func Join(rank int, cards []Card, opts Options) (*Endpoint, error) {
	size := len(cards)
	if !validJobID(opts.JobID) || opts.JobID == "" {
		return nil, fmt.Errorf("shm: JobID %q: use letters, digits, '.', '_' and '-', at most 64", opts.JobID)
	}
	if rank < 0 || rank >= size {
		return nil, fmt.Errorf("shm: rank %d of %d cards", rank, size)
	}
	linuxsys.AllowPtraceAny()
	// Group the ranks by host; hosts are numbered by their lowest rank.
	e := &Endpoint{rank: rank, size: size, opts: opts, lidx: make([]int32, size), pid: os.Getpid(), epoch: time.Now()}
	e.idle = sync.NewCond(&e.mu)
	hostIdx := map[string]int{}
	var locals []int
	hosts := make([]int, size)
	for r, c := range cards {
		h, ok := hostIdx[c.Host]
		if !ok {
			h = len(hostIdx)
			hostIdx[c.Host] = h
		}
		hosts[r] = h
	}
	myHost := hosts[rank]
	for r := range size {
		e.lidx[r] = -1
		if hosts[r] == myHost {
			e.lidx[r] = int32(len(locals))
			locals = append(locals, r)
		}
	}
	e.me = int(e.lidx[rank])
	n := len(locals)
	lay := newLayout(n, ringCapFor(n))
	path := fmt.Sprintf("/dev/shm/gocoll-%s-%d", opts.JobID, myHost)
	if n == 1 {
		return e, nil
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 300 * time.Second
	}
	deadline := time.Now().Add(timeout)
	creator := cards[locals[0]].PID
	var seg *segment
	var err error
	if e.me == 0 {
		seg, err = createSegment(path, lay)
	} else {
		seg, err = awaitSegment(path, lay, locals[0], creator, deadline)
	}
	if err != nil {
		return nil, err
	}
	c := seg.ctl(e.me)
	c.pid.Store(uint32(e.pid))
	c.rank.Store(uint32(rank))
	c.probe.Store(uint64(uintptr(unsafe.Pointer(&cmaProbe))))
	c.state.Store(ctlAttached)
	err = awaitAttached(seg, locals, cards, deadline)
	if e.me == 0 {
		if testBeforeUnlink != nil {
			testBeforeUnlink(path)
		}
		syscall.Unlink(path)
	}
	if err == nil {
		err = e.attach(seg, locals)
	}
	if err != nil {
		seg.unmap()
		return nil, err
	}
	return e, nil
}

// awaitSegment maps the segment that local rank creatorRank (process pid)
// creates at path, once it is there and whole.
func awaitSegment(path string, lay layout, creatorRank, pid int, deadline time.Time) (*segment, error) {
	var last error
	for pause := 20 * time.Microsecond; ; pause = min(2*pause, 2*time.Millisecond) {
		seg, err := openSegment(path, lay)
		if err == nil && int(seg.header().creator) == pid {
			return seg, nil
		}
		if err == nil { // a stale segment of an earlier job: its creator replaces it
			seg.unmap()
			err = fmt.Errorf("shm: %s was made by process %d, not rank %d's", path, seg.header().creator, creatorRank)
		}
		last = err
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			return nil, fmt.Errorf("shm: rank %d (pid %d) exited before creating %s", creatorRank, pid, path)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("shm: rank %d did not create %s in time: %w", creatorRank, path, last)
		}
		time.Sleep(pause)
	}
}

// awaitAttached waits until every local rank has marked itself attached.
func awaitAttached(seg *segment, locals []int, cards []Card, deadline time.Time) error {
	for pause := 20 * time.Microsecond; ; pause = min(2*pause, 2*time.Millisecond) {
		missing := -1
		for i, r := range locals {
			c := seg.ctl(i)
			if c.state.Load()&ctlAttached == 0 || int(c.rank.Load()) != r {
				missing = r
				break
			}
		}
		if missing < 0 {
			return nil
		}
		if syscall.Kill(cards[missing].PID, 0) == syscall.ESRCH {
			return fmt.Errorf("shm: rank %d (pid %d) exited before mapping the segment", missing, cards[missing].PID)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("shm: rank %d did not map the segment in time", missing)
		}
		time.Sleep(pause)
	}
}

func validJobID(s string) bool {
	if len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return s != "." && s != ".."
}

// attach checks that every local rank mapped the segment and sets up the
// peers: rings, slots, pidfds, and whether cross-memory attach works.
func (e *Endpoint) attach(seg *segment, locals []int) error {
	n := len(locals)
	e.seg, e.hdr, e.myCtl = seg, seg.header(), seg.ctl(e.me)
	e.peers = make([]*peer, n)
	for i, r := range locals {
		c := seg.ctl(i)
		if c.state.Load()&ctlAttached == 0 || int(c.rank.Load()) != r {
			return fmt.Errorf("shm: rank %d did not map the segment", r)
		}
		if i == e.me {
			continue
		}
		p := &peer{rank: r, li: i, pid: int(c.pid.Load()), pidfd: -1, ctl: c, slots: seg.slots(i)}
		p.in = newRing(seg.ring(i, e.me))
		p.out = newRing(seg.ring(e.me, i))
		if p.pid != e.pid {
			p.pidfd = linuxsys.PidfdOpen(p.pid)
		}
		var probe [8]byte
		if !testNoCMA && linuxsys.VMRead(p.pid, probe[:], uintptr(c.probe.Load()), &e.iov) == nil {
			p.cma = *(*uint64)(unsafe.Pointer(&probe)) == cmaProbe
		}
		e.peers[i] = p
	}
	e.slots = seg.slots(e.me)
	e.slotFree = make([]uint32, slotsPer)
	e.slotGen = make([]uint32, slotsPer)
	for i := range e.slotFree {
		e.slotFree[i] = uint32(slotsPer - 1 - i)
	}
	e.seenEpoch = e.hdr.closeEpoch.Load()
	e.crowded = n > linuxsys.NodeCPUs() // CPUs the node's ranks share, not this rank's binding
	for _, p := range e.peers {
		// Ranks that are goroutines of this process (tests, Go's
		// RunLocal-style jobs) need runtime.Gosched to let each other
		// run; ranks that are processes must not call it: from a cgo
		// callback (the C ABI) the goroutine is locked to its thread, and
		// Gosched then hands the thread off and sleeps, costing
		// microseconds per poll.
		e.samePID = e.samePID || (p != nil && p.pid == e.pid)
	}
	e.spin = spinLong
	if e.crowded {
		e.spin = spinShort
	}
	for _, p := range e.peers {
		if p != nil {
			p.eager = e.eagerLimit(p.cma)
		}
	}
	e.pool.init(e.eagerLimit(false))
	e.posted = make([]*req, 0, 16)
	e.unexpected = make([]*msg, 0, 16)
	e.rdv = make([]*req, 0, 16)
	e.toWake = make([]*peer, 0, n)
	for _, p := range e.peers {
		if p != nil {
			p.queue = make([]*req, 0, 8)
		}
	}
	return nil
}

// eagerLimit is the largest message sent in one ring record, to a peer
// that reads rendezvous messages with CMA or not: a quarter of the ring,
// at most eagerCMA or eagerCopy.
func (e *Endpoint) eagerLimit(cma bool) int {
	lim := min(e.seg.lay.ringCap/4, eagerCopy)
	if cma {
		lim = min(lim, eagerCMA)
	}
	if testEagerLimit > 0 {
		lim = min(lim, testEagerLimit)
	}
	return lim
}

// Rank returns this endpoint's rank in the job.
func (e *Endpoint) Rank() int { return e.rank }

// Size returns the number of ranks in the job, on every host.
func (e *Endpoint) Size() int { return e.size }

// Reaches reports whether ops with peer can go through this endpoint: it
// is another rank on this host.
func (e *Endpoint) Reaches(peer int) bool {
	return peer >= 0 && peer < e.size && peer != e.rank && e.lidx[peer] >= 0
}

// Close fails the endpoint's pending ops with ErrClosed and tells its
// peers, whose ops with this rank then fail with ErrPeerFailed. It waits
// for peers still reading a send buffer, and for Waits in other goroutines
// to return, before it unmaps the segment.
func (e *Endpoint) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	if e.seg == nil {
		e.closed = true
		return nil
	}
	e.fail(errClosed)
	e.closed = true
	e.myCtl.state.Or(ctlClosed)
	e.hdr.closeEpoch.Add(1)
	e.toWake = e.toWake[:0]
	for _, p := range e.peers {
		if p != nil {
			p.wake = false
			ringBell(p.ctl)
		}
	}
	ringBell(e.myCtl) // our own goroutines asleep in Wait
	// A peer may be in the middle of reading one of our send buffers:
	// the buffer goes back to its owner only when it is done.
	for len(e.rdv) > 0 {
		seq := e.myCtl.bell.Load()
		e.mu.Unlock()
		linuxsys.FutexSleep((*uint32)(unsafe.Pointer(&e.myCtl.bell)), seq, 10*time.Millisecond)
		e.mu.Lock()
		e.checkRdv()
		e.checkLiveness(true)
		e.ringBells()
	}
	for e.waiting > 0 {
		e.idle.Wait()
	}
	for _, p := range e.peers {
		if p != nil && p.pidfd >= 0 {
			syscall.Close(p.pidfd)
		}
	}
	e.seg.unmap()
	return nil
}

// ringBell gives c's rank work: it bumps the bell and wakes any sleeper.
func ringBell(c *ctl) {
	c.bell.Add(1)
	if c.sleepers.Load() != 0 {
		linuxsys.FutexWakeAll((*uint32)(unsafe.Pointer(&c.bell)))
	}
}

var _ transport.Transport = (*Endpoint)(nil)

// errPeer returns the error for an op with p that cannot go on.
func errPeer(p *peer, err error) error { return &transport.Error{Peer: p.rank, Err: err} }
