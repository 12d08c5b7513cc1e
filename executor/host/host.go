// Package host is the executor that runs schedules on host memory: it
// turns each round into transport operations, waits for them, and applies
// the round's copy and reduce steps with a reduction kernel.
package host

import (
	"fmt"
	"unsafe"

	"github.com/gocoll/gocoll/schedule"
	"github.com/gocoll/gocoll/transport"
)

// Kernel sets dst = a op b element by element; dst may be a or b.
type Kernel func(dst, a, b []byte)

// Call is one rank's part of one collective call.
type Call struct {
	Sched    *schedule.Schedule
	In, Out  []byte // In may alias part of Out (MPI_IN_PLACE)
	Scratch  []byte // at least Sched.ScratchLen elements
	ElemSize int
	Reduce   Kernel // nil for collectives that do not reduce

	T     transport.Transport
	Ranks []int         // transport rank of each communicator rank
	Tag   transport.Tag // Context and Seq of the call; Round is set per round
}

// Executor runs one call at a time and keeps its operation buffer
// between calls, so that a call in steady state allocates nothing. A call
// runs to the end in Run, or resumably: Start, then Progress until it
// reports done, which never waits for a peer. It is not safe for
// concurrent use: a communicator owns one, and so does each call in
// flight.
type Executor struct {
	ops    []transport.Op
	c      *Call
	round  int  // the next round to finish
	posted bool // round's messages are started
}

// Run executes the call.
func (e *Executor) Run(c *Call) error {
	e.Start(c)
	_, err := e.advance(true)
	return err
}

// Start begins the call; Progress runs it.
func (e *Executor) Start(c *Call) {
	e.c, e.round, e.posted = c, 0, false
}

// Progress runs the call as far as it can go without waiting: it posts a
// round's messages, and once they have all completed applies the round's
// steps and goes on to the next. It reports whether the call is done and
// whether anything moved.
func (e *Executor) Progress() (done, moved bool, err error) {
	before := e.round
	wasPosted := e.posted
	done, err = e.advance(false)
	return done, done || e.round != before || e.posted != wasPosted, err
}

// Finish runs a started call to the end, waiting for peers.
func (e *Executor) Finish() error {
	_, err := e.advance(true)
	return err
}

// advance runs rounds until the call ends, or, unless block, until a
// round's messages have not all arrived.
func (e *Executor) advance(block bool) (bool, error) {
	c := e.c
	for e.round < len(c.Sched.Rounds) {
		i := e.round
		r := &c.Sched.Rounds[i]
		if r.Communicates() {
			if !e.posted {
				if err := e.post(c, i, r); err != nil {
					return true, err
				}
				e.posted = true
			}
			var err error
			if block {
				err = c.T.Wait(e.ops)
			} else {
				var done bool
				if done, err = c.T.Test(e.ops); !done {
					return false, nil
				}
			}
			e.posted = false
			if err == nil {
				err = e.received(c, i, r)
			}
			if err != nil {
				e.round = len(c.Sched.Rounds)
				return true, fmt.Errorf("round %d: %w", i, err)
			}
		}
		for _, st := range r.Steps {
			dst, a := c.bytes(st.Dst), c.bytes(st.A)
			if st.Kind == schedule.Copy {
				if !same(dst, a) {
					copy(dst, a)
				}
				continue
			}
			c.Reduce(dst, a, c.bytes(st.B))
		}
		e.round++
	}
	return true, nil
}

// post starts round i's receives and sends.
func (e *Executor) post(c *Call, i int, r *schedule.Round) error {
	ops := e.ops[:0]
	tag := c.Tag
	tag.Round = uint32(i)
	// Receives first, so that a rendezvous transport finds them posted.
	for _, t := range r.Recvs {
		ops = append(ops, transport.Op{Peer: c.Ranks[t.Peer], Tag: tag, Buf: c.bytes(t.Range), Recv: true})
	}
	for _, t := range r.Sends {
		ops = append(ops, transport.Op{Peer: c.Ranks[t.Peer], Tag: tag, Buf: c.bytes(t.Range)})
	}
	e.ops = ops
	if err := c.T.Start(ops); err != nil {
		e.round = len(c.Sched.Rounds)
		return fmt.Errorf("round %d: %w", i, err)
	}
	return nil
}

// received checks that every receive of round i got its whole block.
func (e *Executor) received(c *Call, i int, r *schedule.Round) error {
	for j, t := range r.Recvs {
		if e.ops[j].N != len(e.ops[j].Buf) {
			return fmt.Errorf("received %d bytes from rank %d, expected %d", e.ops[j].N, t.Peer, len(e.ops[j].Buf))
		}
	}
	return nil
}

// bytes returns the memory of a range.
func (c *Call) bytes(r schedule.Range) []byte {
	var buf []byte
	switch r.Buf {
	case schedule.Input:
		buf = c.In
	case schedule.Output:
		buf = c.Out
	default:
		buf = c.Scratch
	}
	return buf[r.Off*c.ElemSize : r.End()*c.ElemSize]
}

// same reports whether two equally long slices are the same memory, as an
// in-place copy of the input into the output is.
func same(a, b []byte) bool {
	return len(a) == 0 || unsafe.SliceData(a) == unsafe.SliceData(b)
}
