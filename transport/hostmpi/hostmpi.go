// Package hostmpi is the transport over the host MPI's own point-to-point
// calls, for LD_PRELOAD mode: gocoll's messages travel as MPI_Isend and
// MPI_Irecv on a communicator that belongs to gocoll alone (a private
// duplicate of the user's communicator), so gocoll runs on every network
// the host MPI runs on, InfiniBand included, and its messages can never
// match the application's receives.
//
// # The MPI underneath
//
// The package does not call MPI itself: it drives an implementation of the
// MPI interface, PMPI_Isend, PMPI_Irecv, PMPI_Test and PMPI_Cancel on one
// communicator. Package preload implements it with the host library's
// PMPI_ functions, found at run time; the tests implement it with an
// in-process model of MPI's matching rules, so that the transport passes
// the conformance suite (transporttest) without an MPI job. Every call
// into MPI is made by the goroutine that called Start, Wait or Close:
// under LD_PRELOAD that goroutine runs on the application's thread that
// called the collective, which keeps MPI_THREAD_FUNNELED's promise that
// only that thread calls MPI.
//
// # Tags
//
// MPI matches a receive by (communicator, source, tag) and never lets two
// messages with the same triple overtake each other. A transport.Tag
// (context, call sequence number, round) is folded into an MPI tag of the
// bits MPI_TAG_UB allows (31 on Open MPI, 28 on MPICH 4.0): the top bit
// is reserved for Close notices, the round takes up to 10 bits, the
// context up to 4 and the sequence number the rest, each modulo its
// width. Wrapping is safe where one goroutine drives the endpoint, as the
// executor does: every message of a call between a pair is sent and
// received in schedule order, so MPI's non-overtaking rule matches them
// correctly even when two share a tag. Contexts used at the same time
// from different goroutines must differ modulo 16 (LD_PRELOAD mode uses
// one context per endpoint: the context is implied by the communicator).
//
// # Progress
//
// MPI moves data only inside MPI calls (no progress thread is assumed).
// Wait therefore polls with Test, and between polls calls Options.Idle,
// through which LD_PRELOAD mode drives the shared-memory transport: a rank
// waiting here for a peer on another host keeps serving the ranks of its
// own host, so that a schedule mixing both transports cannot deadlock with
// each rank blocked in the transport the other needs. After a short spin
// without progress it yields the CPU between polls (oversubscribed hosts).
//
// # Failure
//
// The host MPI detects dead peers and, by default, ends the job. With
// Options.Notify, Close also tells every peer, which fails the ops it has
// pending with this rank with transport.ErrPeerFailed instead of leaving
// them blocked: that costs p-1 messages per Close, and an MPI_ANY_SOURCE
// receive kept posted. LD_PRELOAD mode does without: ranks free a
// communicator together (MPI_Comm_free is collective), after their last
// call on it has completed.
package hostmpi

import (
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/gocoll/gocoll/transport"
)

// AnySource is the peer of a receive that matches a message from any
// rank (MPI_ANY_SOURCE).
const AnySource = -1

// Request is a host MPI request handle (MPI_Request), pointer-sized on
// Open MPI, an int on MPICH.
type Request uintptr

// Result is the outcome of a completed request.
type Result struct {
	N         int   // bytes received (receives only)
	Source    int   // the sender (receives only)
	Truncated bool  // the message was longer than the receive buffer
	Cancelled bool  // the request was cancelled before it matched
	Err       error // any other failure
}

// MPI is the host MPI's point-to-point layer on one communicator that
// belongs to the endpoint alone. Buffers passed to Isend and Irecv stay
// valid and untouched by the caller until Test reports the request
// complete. Implementations need not be safe for concurrent use unless the
// endpoint is used from several goroutines at once.
type MPI interface {
	Rank() int
	Size() int
	// TagUB is the largest tag the communicator accepts (MPI_TAG_UB).
	TagUB() int
	// Isend starts sending buf to peer under tag (MPI_Isend of MPI_BYTE).
	Isend(buf []byte, peer, tag int) (Request, error)
	// Irecv starts receiving at most len(buf) bytes from peer (or
	// AnySource) under tag (MPI_Irecv of MPI_BYTE).
	Irecv(buf []byte, peer, tag int) (Request, error)
	// Test reports whether the request has completed and, if so, how; a
	// completed request is freed (MPI_Test).
	Test(r Request) (bool, Result)
	// Cancel asks MPI to cancel a request (MPI_Cancel); Test still has to
	// see it complete, cancelled or not.
	Cancel(r Request) error
}

// Options configures New.
type Options struct {
	// Idle, if set, is called between polls while Wait waits: LD_PRELOAD
	// mode drives its shared-memory transport with it.
	Idle func()
	// Notify makes Close tell every peer, so that their pending ops with
	// this rank fail instead of blocking (see the package documentation).
	Notify bool
}

// Endpoint is one rank's transport over the host MPI.
type Endpoint struct {
	mpi        MPI
	rank, size int
	opts       Options
	tags       layout

	mu      sync.Mutex
	closed  bool
	pending map[*req]struct{} // started, not yet completed
	gone    []bool            // peers that said goodbye (Notify)
	bye     Request           // the posted goodbye receive (Notify)
	byeBuf  [1]byte
	free    []*req
}

// req is the endpoint's state for one started op.
type req struct {
	h   Request
	op  *transport.Op
	pin runtime.Pinner // the buffer, while MPI holds its address
}

// New returns the endpoint of this rank over m.
func New(m MPI, opts Options) (*Endpoint, error) {
	ub := m.TagUB()
	if ub < 1<<14-1 {
		return nil, fmt.Errorf("hostmpi: MPI_TAG_UB is %d, below MPI's minimum of 32767", ub)
	}
	e := &Endpoint{mpi: m, rank: m.Rank(), size: m.Size(), opts: opts, tags: newLayout(ub), pending: map[*req]struct{}{}}
	if opts.Notify {
		e.gone = make([]bool, e.size)
		if err := e.postBye(); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// layout folds a transport.Tag into an MPI tag.
type layout struct {
	roundBits, ctxBits, seqBits uint
	bye                         int // the tag of Close notices
}

func newLayout(ub int) layout {
	avail := uint(bits.Len(uint(ub))) - 1 // the top bit is for goodbyes
	l := layout{roundBits: min(10, avail/2)}
	l.ctxBits = min(4, (avail-l.roundBits)/3)
	l.seqBits = avail - l.roundBits - l.ctxBits
	l.bye = 1 << avail
	return l
}

func (l layout) tag(t transport.Tag) int {
	mask := func(v uint32, n uint) int { return int(v & (1<<n - 1)) }
	return mask(t.Context, l.ctxBits)<<(l.seqBits+l.roundBits) | mask(t.Seq, l.seqBits)<<l.roundBits | mask(t.Round, l.roundBits)
}

// Rank returns this endpoint's rank.
func (e *Endpoint) Rank() int { return e.rank }

// Size returns the number of ranks.
func (e *Endpoint) Size() int { return e.size }

var errClosed = &transport.Error{Peer: -1, Err: transport.ErrClosed}

// Start posts every op as an MPI_Isend or MPI_Irecv.
func (e *Endpoint) Start(ops []transport.Op) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range ops {
		op := &ops[i]
		op.Reset()
		if err := transport.CheckPeer(op, e.rank, e.size); err != nil {
			op.Complete(0, err)
			continue
		}
		if e.closed {
			op.Complete(0, errClosed)
			continue
		}
		if e.gone != nil && e.gone[op.Peer] {
			op.Complete(0, &transport.Error{Peer: op.Peer, Err: transport.ErrPeerFailed})
			continue
		}
		r := e.newReq(op)
		var err error
		if op.Recv {
			r.h, err = e.mpi.Irecv(op.Buf, op.Peer, e.tags.tag(op.Tag))
		} else {
			r.h, err = e.mpi.Isend(op.Buf, op.Peer, e.tags.tag(op.Tag))
		}
		if err != nil {
			e.release(r)
			op.Complete(0, &transport.Error{Peer: op.Peer, Err: err})
			continue
		}
		op.Handle = r
		e.pending[r] = struct{}{}
	}
	return nil
}

func (e *Endpoint) newReq(op *transport.Op) *req {
	var r *req
	if n := len(e.free); n > 0 {
		r, e.free = e.free[n-1], e.free[:n-1]
	} else {
		r = new(req)
	}
	r.op = op
	if len(op.Buf) > 0 {
		r.pin.Pin(&op.Buf[0])
	}
	return r
}

func (e *Endpoint) release(r *req) {
	r.pin.Unpin()
	r.op, r.h = nil, 0
	e.free = append(e.free, r)
}

// finish completes r's op with res and recycles r. Called with mu held.
func (e *Endpoint) finish(r *req, res Result) {
	op := r.op
	delete(e.pending, r)
	e.release(r)
	op.Handle = nil
	var err error
	switch {
	case res.Truncated:
		err = &transport.Error{Peer: op.Peer, Err: transport.ErrTruncate}
	case res.Cancelled:
		err = errClosed
	case res.Err != nil:
		err = &transport.Error{Peer: op.Peer, Err: res.Err}
	}
	if !op.Recv {
		res.N = 0
	}
	op.Complete(res.N, err)
}

// Spinning: Wait polls without pause for spinFor after its last progress,
// then yields the CPU between polls.
const spinFor = 50 * time.Microsecond

// Wait polls the ops' requests until every op has completed, calling
// Options.Idle between polls.
func (e *Endpoint) Wait(ops []transport.Op) error {
	last := time.Now()
	for polls := 0; ; polls++ {
		done, moved := e.poll(ops)
		if done {
			return transport.FirstError(ops)
		}
		if e.opts.Idle != nil {
			e.opts.Idle()
		}
		if moved {
			last = time.Now()
		} else if polls%16 == 15 && time.Since(last) > spinFor {
			syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
		}
	}
}

// Test polls the ops' requests once and reports whether every op has
// completed.
func (e *Endpoint) Test(ops []transport.Op) (bool, error) {
	if done, _ := e.poll(ops); !done {
		return false, nil
	}
	return true, transport.FirstError(ops)
}

// poll tests every incomplete op once and reports whether all are done and
// whether any completed.
func (e *Endpoint) poll(ops []transport.Op) (done, moved bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gone != nil && !e.closed {
		e.checkBye()
	}
	done = true
	for i := range ops {
		op := &ops[i]
		if op.Done() {
			continue
		}
		r, ok := op.Handle.(*req)
		if !ok {
			// Never started here (Start was not called, or a Close
			// completed it meanwhile and the caller raced): fail it.
			op.Complete(0, errClosed)
			moved = true
			continue
		}
		if e.gone != nil && e.gone[op.Peer] {
			e.cancel(r)
			op.Complete(0, &transport.Error{Peer: op.Peer, Err: transport.ErrPeerFailed})
			moved = true
			continue
		}
		if ok, res := e.mpi.Test(r.h); ok {
			e.finish(r, res)
			moved = true
			continue
		}
		done = false
	}
	return done, moved
}

// cancel withdraws r from MPI and waits until MPI is done with it; it does
// not complete r's op. Called with mu held.
func (e *Endpoint) cancel(r *req) {
	e.mpi.Cancel(r.h)
	for {
		if ok, _ := e.mpi.Test(r.h); ok {
			break
		}
	}
	op := r.op
	delete(e.pending, r)
	e.release(r)
	op.Handle = nil
}

// postBye posts the receive of Close notices from any peer.
func (e *Endpoint) postBye() error {
	h, err := e.mpi.Irecv(e.byeBuf[:0], AnySource, e.tags.bye)
	if err != nil {
		return fmt.Errorf("hostmpi: posting the receive of Close notices: %w", err)
	}
	e.bye = h
	return nil
}

// checkBye records the peers whose Close notice arrived. Called with mu
// held.
func (e *Endpoint) checkBye() {
	for {
		ok, res := e.mpi.Test(e.bye)
		if !ok {
			return
		}
		if res.Source >= 0 && res.Source < e.size {
			e.gone[res.Source] = true
		}
		if e.postBye() != nil {
			e.bye = 0
			return
		}
	}
}

// Close fails the endpoint's pending ops with ErrClosed (cancelling their
// MPI requests) and, with Options.Notify, tells every peer. It does not
// free the communicator, which belongs to the caller.
func (e *Endpoint) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	for r := range e.pending {
		op := r.op
		e.cancel(r)
		op.Complete(0, errClosed)
	}
	if e.gone == nil {
		return nil
	}
	var errs []error
	if e.bye != 0 {
		e.mpi.Cancel(e.bye)
		for ok := false; !ok; ok, _ = e.mpi.Test(e.bye) {
		}
	}
	var sends []Request
	for peer := range e.size {
		if peer == e.rank || e.gone[peer] {
			continue
		}
		h, err := e.mpi.Isend(nil, peer, e.tags.bye)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		sends = append(sends, h)
	}
	for _, h := range sends {
		for {
			ok, res := e.mpi.Test(h)
			if ok {
				if res.Err != nil {
					errs = append(errs, res.Err)
				}
				break
			}
			if e.opts.Idle != nil {
				e.opts.Idle()
			}
		}
	}
	return errors.Join(errs...)
}

var _ transport.Transport = (*Endpoint)(nil)
