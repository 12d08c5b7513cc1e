package coll

import (
	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/ops"
)

// Bcast copies Count elements of Recv on the root to Recv on every rank.
func (c *Comm) Bcast(a Args) error {
	return c.checked(signatureOf(algorithms.Bcast, a), func() error { return c.bcast(a) })
}

func (c *Comm) bcast(a Args) error {
	cl, err := c.checkBcast(a)
	if err != nil {
		return err
	}
	return c.run(&cl)
}

// Reduce combines Count elements from every rank with Op into Recv on the
// root (in place at the root: Recv holds its input). Recv is ignored on
// the other ranks.
func (c *Comm) Reduce(a Args) error {
	return c.checked(signatureOf(algorithms.Reduce, a), func() error { return c.reduce(a) })
}

func (c *Comm) reduce(a Args) error {
	cl, err := c.checkReduce(a)
	if err != nil {
		return err
	}
	if wide, ok := wideType(cl.p, a); ok {
		return c.runWide(nil, cl, a, cl.out.len(), wide)
	}
	return c.run(&cl)
}

// Gather collects Count elements from every rank, in rank order, into Recv
// on the root (in place at the root: its block is already in Recv).
func (c *Comm) Gather(a Args) error {
	return c.checked(signatureOf(algorithms.Gather, a), func() error { return c.gather(a) })
}

func (c *Comm) gather(a Args) error {
	cl, err := c.checkGather(a)
	if err != nil {
		return err
	}
	return c.run(&cl)
}

// Barrier returns once every rank has entered it. It is an allgather of
// one byte per rank with Bruck's algorithm: ceil(lg p) rounds, and a rank
// leaves only after hearing, directly or not, from every other.
func (c *Comm) Barrier() error { return c.runBarrier(false) }

// Sync is Barrier as gocoll's own call, which the path counters
// (GOCOLL_REPORT) do not count: MPI_Finalize's.
func (c *Comm) Sync() error { return c.runBarrier(true) }

func (c *Comm) runBarrier(own bool) error {
	c.mu.Lock()
	if len(c.barrier) != c.Size() {
		c.barrier = make([]byte, c.Size())
	}
	buf := c.barrier
	c.mu.Unlock()
	a := Args{InPlace: true, Recv: buf, Count: 1, Type: ops.Byte, Algorithm: "bruck", own: own}
	sig := signature{call: callBarrier}
	return c.checked(sig, func() error { return c.allgather("MPI_Barrier", a, nil) })
}
