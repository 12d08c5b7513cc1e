// Package transport defines how gocoll moves bytes between ranks.
//
// A Transport is one rank's endpoint in a job of Size ranks. Executors post
// the messages of a schedule round with Start and wait for them with Wait;
// the transport decides how the bytes travel (goroutines in one process,
// shared memory, TCP, or the host MPI's point-to-point calls). Each
// implementation lives in its own package and passes the conformance suite
// in package transporttest.
//
// # Contract
//
// Matching. A send matches the receive posted by its destination with the
// same source and Tag. Between one pair of ranks, operations with the same
// Tag match in the order they were started: messages never overtake one
// another. Tags carry the communicator's context, the call's sequence
// number and the round, so two collectives, or two communicators, never
// match each other's messages.
//
// Buffers. From Start until Wait returns for an op, its buffer belongs to the
// transport: the caller must not write a send buffer or read a receive
// buffer. After Wait returns, with or without an error, the transport no
// longer touches the buffer.
//
// Blocking. Start does not wait for the peer; it may copy a small message
// and return. Wait blocks until every op passed to it has completed;
// Test never blocks, and reports whether they have. A send
// may complete before the receiver posts its receive (eager) or only once it
// has (rendezvous): callers must post the receives of a round in the same
// Start as its sends, or before them.
//
// Lengths. Zero-length messages are legal and matched like any other. A
// message longer than the receive buffer fails the receive with ErrTruncate
// (the send may or may not see it, depending on whether it was eager); a
// shorter one completes with Op.N < len(Op.Buf), and the caller decides
// whether that is an error.
//
// Errors. A transport reports a failed peer, a closed endpoint or a timeout
// as an *Error naming the peer. Once an endpoint has failed, every later
// Start or Wait fails too.
//
// Concurrency. Start and Wait may be called from several goroutines at once
// provided each op slice is used by one goroutine.
package transport

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// Transport is one rank's endpoint.
type Transport interface {
	// Rank returns this endpoint's rank, 0 <= Rank < Size.
	Rank() int
	// Size returns the number of ranks in the job.
	Size() int
	// Start begins every op in ops. The ops must stay at the same address
	// until Wait returns for them.
	Start(ops []Op) error
	// Wait blocks until every op in ops has completed and returns the first
	// error among them.
	Wait(ops []Op) error
	// Test does what can be done for ops without waiting and reports
	// whether every one has completed; when it has, it returns the first
	// error among them, as Wait would. Resumable executors call it.
	Test(ops []Op) (bool, error)
	// Close releases the endpoint. Pending operations fail.
	Close() error
}

// Tag identifies a message among those between one pair of ranks.
type Tag struct {
	Context uint32 // the communicator
	Seq     uint32 // the collective call on that communicator
	Round   uint32 // the round of the call's schedule
}

func (t Tag) String() string {
	return fmt.Sprintf("ctx %d call %d round %d", t.Context, t.Seq, t.Round)
}

// Op is one send or receive.
type Op struct {
	Peer int    // the rank at the other end
	Tag  Tag    // matched against the peer's op
	Buf  []byte // bytes to send, or room for the bytes to receive
	Recv bool   // a receive; otherwise a send

	// N is, after Wait, the number of bytes received.
	N int
	// Err is, after Wait, the op's error.
	Err error

	done uint32
	// Handle is free for the transport's bookkeeping between Start and Wait.
	Handle any
}

// Reset clears the results of an earlier use; transports call it in Start.
func (o *Op) Reset() {
	o.N, o.Err, o.Handle = 0, nil, nil
	atomic.StoreUint32(&o.done, 0)
}

// Complete records the outcome of the op; transports call it exactly once
// per Start. It publishes N and Err to the goroutine that sees Done.
func (o *Op) Complete(n int, err error) {
	o.N, o.Err = n, err
	atomic.StoreUint32(&o.done, 1)
}

// Done reports whether the op has completed.
func (o *Op) Done() bool { return atomic.LoadUint32(&o.done) == 1 }

func (o *Op) String() string {
	dir := "send to"
	if o.Recv {
		dir = "receive from"
	}
	return fmt.Sprintf("%s rank %d (%v, %d bytes)", dir, o.Peer, o.Tag, len(o.Buf))
}

// Error is a failure of the transport, with the peer it concerns.
type Error struct {
	Peer int   // the rank at the other end, or -1
	Err  error // ErrClosed, ErrPeerFailed, ErrTruncate, ErrTimeout, ...
}

func (e *Error) Error() string {
	if e.Peer < 0 {
		return e.Err.Error()
	}
	return fmt.Sprintf("rank %d: %v", e.Peer, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

var (
	// ErrClosed: the local endpoint was closed.
	ErrClosed = errors.New("transport closed")
	// ErrPeerFailed: the peer died or closed its endpoint.
	ErrPeerFailed = errors.New("peer failed")
	// ErrTruncate: the message is longer than the receive buffer.
	ErrTruncate = errors.New("message truncated: longer than the receive buffer")
	// ErrTimeout: the peer did not answer in time.
	ErrTimeout = errors.New("timed out waiting for peer")
	// ErrBadPeer: the op names a rank outside the job, or this rank.
	ErrBadPeer = errors.New("invalid peer rank")
)

// CheckPeer returns an *Error for ops a transport cannot carry: a peer
// outside 0..size-1, or the rank itself.
func CheckPeer(op *Op, rank, size int) error {
	if op.Peer < 0 || op.Peer >= size || op.Peer == rank {
		return &Error{Peer: op.Peer, Err: ErrBadPeer}
	}
	return nil
}

// Completed is Test for transports whose ops complete without the
// caller's help (goroutines of their own deliver them).
func Completed(ops []Op) (bool, error) {
	for i := range ops {
		if !ops[i].Done() {
			return false, nil
		}
	}
	return true, FirstError(ops)
}

// FirstError returns the first error among completed ops.
func FirstError(ops []Op) error {
	for i := range ops {
		if ops[i].Err != nil {
			return ops[i].Err
		}
	}
	return nil
}
