// Package inproc is the transport between ranks that are goroutines of one
// process: for tests, for the Go API's RunLocal, and for trying collectives
// without a launcher.
//
// A message is copied once, straight from the send buffer into the receive
// buffer, by whichever side arrives second: a send whose receive is not
// posted yet waits in the receiver's queue of unexpected sends
// (rendezvous), so no intermediate buffer is ever allocated.
package inproc

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gocoll/gocoll/transport"
)

// New returns the n endpoints of a job whose ranks share this process.
func New(n int) []transport.Transport {
	w := &world{eps: make([]*endpoint, n)}
	out := make([]transport.Transport, n)
	for r := range n {
		ep := &endpoint{rank: r, w: w}
		ep.cond = sync.NewCond(&ep.mu)
		w.eps[r], out[r] = ep, ep
	}
	return out
}

type world struct {
	eps []*endpoint
}

type endpoint struct {
	rank int
	w    *world

	mu   sync.Mutex
	cond *sync.Cond // broadcast when an op owned by this endpoint completes
	// posted holds receives waiting for their send, in the order posted.
	posted []*transport.Op
	// unexpected holds sends to this rank waiting for their receive, in
	// the order sent. Both lists are short (the ops of a round or two) and
	// scanned from the front, which keeps messages from overtaking.
	unexpected []*transport.Op
	// closed is written under mu but read without it, so that a rank
	// holding its own lock can ask about a peer without lock nesting.
	closed atomic.Bool
}

func (e *endpoint) Rank() int { return e.rank }
func (e *endpoint) Size() int { return len(e.w.eps) }

// completion is an op to mark done once no lock is held, and its owner.
type completion struct {
	op    *transport.Op
	owner *endpoint
	n     int
	err   error
}

func (c completion) apply() {
	c.owner.mu.Lock()
	c.op.Complete(c.n, c.err)
	c.owner.cond.Broadcast()
	c.owner.mu.Unlock()
}

// deliver copies a send into a matched receive and returns both completions.
func deliver(send *transport.Op, sender *endpoint, recv *transport.Op, receiver *endpoint) (completion, completion) {
	if len(send.Buf) > len(recv.Buf) {
		err := transport.ErrTruncate
		return completion{send, sender, 0, &transport.Error{Peer: receiver.rank, Err: err}},
			completion{recv, receiver, 0, &transport.Error{Peer: sender.rank, Err: err}}
	}
	n := copy(recv.Buf, send.Buf)
	return completion{send, sender, n, nil}, completion{recv, receiver, n, nil}
}

// pop removes and returns the first op of q that matches (peer, tag).
// Queued sends are matched on their sender, stored in Handle.
func pop(q *[]*transport.Op, peer int, tag transport.Tag, sends bool) *transport.Op {
	for i, op := range *q {
		from := op.Peer
		if sends {
			from = op.Handle.(*endpoint).rank
		}
		if from == peer && op.Tag == tag {
			*q = append((*q)[:i], (*q)[i+1:]...)
			return op
		}
	}
	return nil
}

func (e *endpoint) Start(ops []transport.Op) error {
	for i := range ops {
		op := &ops[i]
		op.Reset()
		if err := transport.CheckPeer(op, e.rank, len(e.w.eps)); err != nil {
			op.Complete(0, err)
			continue
		}
		var done [2]completion
		var n int
		if op.Recv {
			n = e.startRecv(op, &done)
		} else {
			n = e.startSend(op, &done)
		}
		for _, c := range done[:n] {
			c.apply()
		}
	}
	return nil
}

// startRecv matches or queues a receive; it returns in done the ops to
// complete once the lock is released.
func (e *endpoint) startRecv(op *transport.Op, done *[2]completion) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.isClosed() {
		done[0] = completion{op, e, 0, &transport.Error{Peer: -1, Err: transport.ErrClosed}}
		return 1
	}
	if send := pop(&e.unexpected, op.Peer, op.Tag, true); send != nil {
		done[0], done[1] = deliver(send, e.w.eps[op.Peer], op, e)
		return 2
	}
	if e.w.eps[op.Peer].isClosed() {
		done[0] = completion{op, e, 0, &transport.Error{Peer: op.Peer, Err: transport.ErrPeerFailed}}
		return 1
	}
	e.posted = append(e.posted, op)
	return 0
}

// startSend matches or queues a send, like startRecv.
func (e *endpoint) startSend(op *transport.Op, done *[2]completion) int {
	if e.isClosed() {
		done[0] = completion{op, e, 0, &transport.Error{Peer: -1, Err: transport.ErrClosed}}
		return 1
	}
	dst := e.w.eps[op.Peer]
	dst.mu.Lock()
	defer dst.mu.Unlock()
	if dst.isClosed() {
		done[0] = completion{op, e, 0, &transport.Error{Peer: op.Peer, Err: transport.ErrPeerFailed}}
		return 1
	}
	if recv := pop(&dst.posted, e.rank, op.Tag, false); recv != nil {
		done[0], done[1] = deliver(op, e, recv, dst)
		return 2
	}
	op.Handle = e // the sender, for matching
	dst.unexpected = append(dst.unexpected, op)
	return 0
}

func (e *endpoint) isClosed() bool { return e.closed.Load() }

// Test reports whether every op has completed: the peer's Start
// completes a matched op.
func (e *endpoint) Test(ops []transport.Op) (bool, error) { return transport.Completed(ops) }

func (e *endpoint) Wait(ops []transport.Op) error {
	e.mu.Lock()
	for i := range ops {
		for !ops[i].Done() {
			e.cond.Wait()
		}
	}
	e.mu.Unlock()
	return transport.FirstError(ops)
}

// Close fails everything still pending on this endpoint: its posted
// receives, the sends queued for it, and, at the other ranks, receives from
// it and its own sends waiting there.
func (e *endpoint) Close() error {
	var done []completion
	e.mu.Lock()
	if e.isClosed() {
		e.mu.Unlock()
		return nil
	}
	e.closed.Store(true)
	for _, op := range e.posted {
		done = append(done, completion{op, e, 0, &transport.Error{Peer: -1, Err: transport.ErrClosed}})
	}
	for _, op := range e.unexpected {
		done = append(done, completion{op, op.Handle.(*endpoint), 0, &transport.Error{Peer: e.rank, Err: transport.ErrPeerFailed}})
	}
	e.posted, e.unexpected = nil, nil
	e.mu.Unlock()
	for _, other := range e.w.eps {
		if other == e {
			continue
		}
		other.mu.Lock()
		other.posted = slices.DeleteFunc(other.posted, func(op *transport.Op) bool {
			if op.Peer != e.rank {
				return false
			}
			done = append(done, completion{op, other, 0, &transport.Error{Peer: e.rank, Err: transport.ErrPeerFailed}})
			return true
		})
		other.unexpected = slices.DeleteFunc(other.unexpected, func(op *transport.Op) bool {
			if op.Handle.(*endpoint) != e {
				return false
			}
			done = append(done, completion{op, e, 0, &transport.Error{Peer: -1, Err: transport.ErrClosed}})
			return true
		})
		other.mu.Unlock()
	}
	for _, c := range done {
		c.apply()
	}
	return nil
}
