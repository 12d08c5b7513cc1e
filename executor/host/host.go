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

// Executor runs calls one after the other and keeps its operation buffer
// between them, so that a call in steady state allocates nothing. It is not
// safe for concurrent use: a communicator owns one.
type Executor struct {
	ops []transport.Op
}

// Run executes the call.
func (e *Executor) Run(c *Call) error {
	for i := range c.Sched.Rounds {
		r := &c.Sched.Rounds[i]
		if r.Communicates() {
			if err := e.communicate(c, i, r); err != nil {
				return err
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
	}
	return nil
}

func (e *Executor) communicate(c *Call, i int, r *schedule.Round) error {
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
	err := c.T.Start(ops)
	if err == nil {
		err = c.T.Wait(ops)
	}
	if err != nil {
		return fmt.Errorf("round %d: %w", i, err)
	}
	for j, t := range r.Recvs {
		if ops[j].N != len(ops[j].Buf) {
			return fmt.Errorf("round %d: received %d bytes from rank %d, expected %d", i, ops[j].N, t.Peer, len(ops[j].Buf))
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
