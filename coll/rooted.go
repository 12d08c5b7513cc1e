package coll

import (
	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/ops"
)

func (c *Comm) checkRoot(call string, root int) error {
	if root < 0 || root >= c.Size() {
		return argError(call, mpierr.Root, "root %d is not a rank of %s (size %d)", root, c.name, c.Size())
	}
	return nil
}

// Bcast copies Count elements of Recv on the root to Recv on every rank.
func (c *Comm) Bcast(a Args) error {
	return c.checked(signatureOf(algorithms.Bcast, a), func() error { return c.bcast(a) })
}

func (c *Comm) bcast(a Args) error {
	const call = "MPI_Bcast"
	if err := checkType(call, a.Type); err != nil {
		return err
	}
	if err := checkCount(call, "count", a.Count); err != nil {
		return err
	}
	if err := c.checkRoot(call, a.Root); err != nil {
		return err
	}
	n := a.Count * a.elemSize()
	if err := checkBuf(call, "buffer", a.Recv, n); err != nil {
		return err
	}
	buf := a.Recv[:n]
	p := algorithms.Params{P: c.Size(), Rank: c.rank, Root: a.Root, Count: a.Count, Commutative: true, InPlace: true}
	return c.run(&op{call: call, coll: algorithms.Bcast, own: a.own, bytes: int64(n), p: p, in: buf, out: buf, size: a.elemSize()})
}

// Reduce combines Count elements from every rank with Op into Recv on the
// root (in place at the root: Recv holds its input). Recv is ignored on
// the other ranks.
func (c *Comm) Reduce(a Args) error {
	return c.checked(signatureOf(algorithms.Reduce, a), func() error { return c.reduce(a) })
}

func (c *Comm) reduce(a Args) error {
	const call = "MPI_Reduce"
	size, kernel, err := c.checkReduce(call, a)
	if err != nil {
		return err
	}
	if err := checkCount(call, "count", a.Count); err != nil {
		return err
	}
	if err := c.checkRoot(call, a.Root); err != nil {
		return err
	}
	n := a.Count * size
	var in, out []byte
	if c.rank == a.Root {
		if in, out, err = c.buffers(call, a, n, n); err != nil {
			return err
		}
	} else {
		if a.InPlace {
			return argError(call, mpierr.Buffer, "MPI_IN_PLACE is only allowed at the root")
		}
		if err := checkBuf(call, "sendbuf", a.Send, n); err != nil {
			return err
		}
		in = a.Send[:n]
	}
	p := algorithms.Params{P: c.Size(), Rank: c.rank, Root: a.Root, Count: a.Count, Commutative: a.Op.commutative(), InPlace: a.InPlace, Reproducible: c.reproducible(a)}
	if wide, ok := wideType(p, a); ok {
		return c.runWide(nil, call, algorithms.Reduce, a, p, in, out, len(out), wide)
	}
	return c.run(&op{call: call, coll: algorithms.Reduce, own: a.own, bytes: int64(n), p: p, in: in, out: out, size: size, kernel: kernel})
}

// Gather collects Count elements from every rank, in rank order, into Recv
// on the root (in place at the root: its block is already in Recv).
func (c *Comm) Gather(a Args) error {
	return c.checked(signatureOf(algorithms.Gather, a), func() error { return c.gather(a) })
}

func (c *Comm) gather(a Args) error {
	const call = "MPI_Gather"
	if err := checkType(call, a.Type); err != nil {
		return err
	}
	if err := checkCount(call, "count", a.Count); err != nil {
		return err
	}
	if err := c.checkRoot(call, a.Root); err != nil {
		return err
	}
	size := a.elemSize()
	n := a.Count * size
	var in, out []byte
	if c.rank == a.Root {
		total := n * c.Size()
		if err := checkBuf(call, "recvbuf", a.Recv, total); err != nil {
			return err
		}
		out = a.Recv[:total]
		in = out[c.rank*n : (c.rank+1)*n]
	} else if a.InPlace {
		return argError(call, mpierr.Buffer, "MPI_IN_PLACE is only allowed at the root")
	}
	if c.rank != a.Root || !a.InPlace {
		if err := checkBuf(call, "sendbuf", a.Send, n); err != nil {
			return err
		}
		in = a.Send[:n]
		if err := checkDisjoint(call, in, out); err != nil {
			return err
		}
	}
	p := algorithms.Params{P: c.Size(), Rank: c.rank, Root: a.Root, Counts: c.uniform(a.Count), Commutative: true, InPlace: a.InPlace}
	return c.run(&op{call: call, coll: algorithms.Gather, own: a.own, bytes: int64(n * c.Size()), p: p, in: in, out: out, size: size})
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
