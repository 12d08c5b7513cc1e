package coll

import (
	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/ops"
)

// Every collective's arguments are checked here, once, and become a call
// (call.go) that nothing below checks again: the datatype and op, the
// counts, the buffers' lengths, MPI_IN_PLACE and overlaps. The C entries
// check what only they can see (handles, NULL pointers, C's int ranges)
// and leave the rest to these.

// checkAllreduce checks an Allreduce of Count elements.
func (c *Comm) checkAllreduce(a Args) (call, error) {
	const name = "MPI_Allreduce"
	size, kernel, err := checkReduce(name, a)
	if err != nil {
		return call{}, err
	}
	if err := checkCount(name, "count", a.Count); err != nil {
		return call{}, err
	}
	n := a.Count * size
	in, out, err := buffers(name, a, n, n)
	if err != nil {
		return call{}, err
	}
	p := algorithms.Params{P: c.Size(), Rank: c.rank, Count: a.Count, Commutative: a.Op.commutative(), InPlace: a.InPlace, Reproducible: c.reproducible(a)}
	return call{name: name, coll: algorithms.Allreduce, force: a.Algorithm, own: a.own, bytes: int64(n), p: p,
		in: in, out: out, size: size, kernel: kernel, builtin: builtinOf(a)}, nil
}

// checkReduceScatter checks a ReduceScatter of Counts.
func (c *Comm) checkReduceScatter(a Args) (call, error) {
	const name = "MPI_Reduce_scatter"
	size, kernel, err := checkReduce(name, a)
	if err != nil {
		return call{}, err
	}
	if len(a.Counts) != c.Size() {
		return call{}, argError(name, mpierr.Arg, "recvcounts has %d entries, the communicator %d ranks", len(a.Counts), c.Size())
	}
	total := 0
	for i, n := range a.Counts {
		if n < 0 {
			return call{}, argError(name, mpierr.Count, "recvcounts[%d] is negative (%d)", i, n)
		}
		total += n
	}
	p := algorithms.Params{P: c.Size(), Rank: c.rank, Counts: a.Counts, Commutative: a.Op.commutative(), InPlace: a.InPlace, Reproducible: c.reproducible(a)}
	return reduceScatterCall(name, algorithms.ReduceScatter, a, p, total*size, a.Counts[c.rank]*size, size, kernel)
}

// checkReduceScatterBlock checks a ReduceScatterBlock of Count elements
// per rank.
func (c *Comm) checkReduceScatterBlock(a Args) (call, error) {
	const name = "MPI_Reduce_scatter_block"
	size, kernel, err := checkReduce(name, a)
	if err != nil {
		return call{}, err
	}
	if err := checkCount(name, "recvcount", a.Count); err != nil {
		return call{}, err
	}
	p := algorithms.Params{P: c.Size(), Rank: c.rank, Counts: c.uniform(a.Count), Commutative: a.Op.commutative(), InPlace: a.InPlace, Reproducible: c.reproducible(a)}
	return reduceScatterCall(name, algorithms.ReduceScatterBlock, a, p, c.Size()*a.Count*size, a.Count*size, size, kernel)
}

// reduceScatterCall checks the buffers of a reduce-scatter that reads
// total bytes and leaves mine: in place, Recv holds the whole input.
func reduceScatterCall(name string, coll algorithms.Collective, a Args, p algorithms.Params, total, mine, size int, kernel ops.Kernel) (call, error) {
	outLen := mine
	if a.InPlace {
		outLen = total
	}
	in, out, err := buffers(name, a, total, outLen)
	if err != nil {
		return call{}, err
	}
	return call{name: name, coll: coll, force: a.Algorithm, own: a.own, bytes: int64(total), p: p,
		in: in, out: out, size: size, kernel: kernel, builtin: builtinOf(a)}, nil
}

// checkAllgather checks an Allgather of Count elements per rank (name:
// MPI_Allgather, or MPI_Barrier, which is one).
func (c *Comm) checkAllgather(name string, a Args) (call, error) {
	if err := checkType(name, a.Type); err != nil {
		return call{}, err
	}
	if err := checkCount(name, "count", a.Count); err != nil {
		return call{}, err
	}
	size := a.elemSize()
	n := a.Count * size
	total := n * c.Size()
	out, err := recv(name, "recvbuf", a, total)
	if err != nil {
		return call{}, err
	}
	in, err := c.ownBlock(name, a, out, n)
	if err != nil {
		return call{}, err
	}
	p := algorithms.Params{P: c.Size(), Rank: c.rank, Counts: c.uniform(a.Count), Commutative: true, InPlace: a.InPlace}
	return call{name: name, coll: algorithms.Allgather, force: a.Algorithm, own: a.own, bytes: int64(total), p: p, in: in, out: out, size: size}, nil
}

// gathered is what checkAllgatherv learns of an Allgatherv's layout.
type gathered struct {
	recv   buffer // the whole receive buffer
	packed bool   // the blocks lie one after the other, in rank order
	total  int    // elements of all blocks
	before int    // elements of the blocks of the ranks before this one
}

// checkAllgatherv checks an Allgatherv of Counts at Displs: the call's
// buffers are set where the blocks are packed; displaced ones are
// gathered through a temporary (Allgatherv; in device memory where the
// receive buffer is, allgathervDevice).
func (c *Comm) checkAllgatherv(a Args) (call, gathered, error) {
	const name = "MPI_Allgatherv"
	var g gathered
	if err := checkType(name, a.Type); err != nil {
		return call{}, g, err
	}
	if len(a.Counts) != c.Size() {
		return call{}, g, argError(name, mpierr.Arg, "recvcounts has %d entries, the communicator %d ranks", len(a.Counts), c.Size())
	}
	if a.Displs != nil && len(a.Displs) != c.Size() {
		return call{}, g, argError(name, mpierr.Arg, "displs has %d entries, the communicator %d ranks", len(a.Displs), c.Size())
	}
	size := a.elemSize()
	end := 0
	g.packed = true // the displacements are the counts' prefix sums
	for i, n := range a.Counts {
		if n < 0 {
			return call{}, g, argError(name, mpierr.Count, "recvcounts[%d] is negative (%d)", i, n)
		}
		if a.Displs != nil {
			if a.Displs[i] < 0 {
				return call{}, g, argError(name, mpierr.Arg, "displs[%d] is negative (%d)", i, a.Displs[i])
			}
			g.packed = g.packed && a.Displs[i] == g.total
			end = max(end, a.Displs[i]+n)
		}
		if i < c.rank {
			g.before += n
		}
		g.total += n
	}
	if g.packed {
		end = g.total
	}
	var err error
	if g.recv, err = recv(name, "recvbuf", a, end*size); err != nil {
		return call{}, g, err
	}
	n := a.Counts[c.rank] * size
	var in, out buffer
	if g.packed {
		out = g.recv
		in = out.slice(g.before*size, g.before*size+n)
	}
	if !a.InPlace {
		if in, err = send(name, a, n); err != nil {
			return call{}, g, err
		}
		if g.packed {
			if err := checkDisjoint(name, in, out); err != nil {
				return call{}, g, err
			}
		} else {
			for i := range a.Counts {
				at := a.Displs[i] * size
				if in.overlaps(g.recv.slice(at, at+a.Counts[i]*size)) {
					return call{}, g, argError(name, mpierr.Buffer, "sendbuf overlaps the block of rank %d in recvbuf (use MPI_IN_PLACE for an in-place call)", i)
				}
			}
		}
	}
	p := algorithms.Params{P: c.Size(), Rank: c.rank, Counts: a.Counts, Commutative: true, InPlace: a.InPlace}
	return call{name: name, coll: algorithms.Allgather, force: a.Algorithm, own: a.own, bytes: int64(g.total * size), p: p, in: in, out: out, size: size}, g, nil
}

// checkBcast checks a Bcast of Count elements from Root.
func (c *Comm) checkBcast(a Args) (call, error) {
	const name = "MPI_Bcast"
	if err := checkType(name, a.Type); err != nil {
		return call{}, err
	}
	if err := c.checkCountRoot(name, a); err != nil {
		return call{}, err
	}
	n := a.Count * a.elemSize()
	buf, err := recv(name, "buffer", a, n)
	if err != nil {
		return call{}, err
	}
	p := algorithms.Params{P: c.Size(), Rank: c.rank, Root: a.Root, Count: a.Count, Commutative: true, InPlace: true}
	return call{name: name, coll: algorithms.Bcast, own: a.own, bytes: int64(n), p: p, in: buf, out: buf, size: a.elemSize()}, nil
}

// checkReduce checks a Reduce of Count elements to Root.
func (c *Comm) checkReduce(a Args) (call, error) {
	const name = "MPI_Reduce"
	size, kernel, err := checkReduce(name, a)
	if err != nil {
		return call{}, err
	}
	if err := c.checkCountRoot(name, a); err != nil {
		return call{}, err
	}
	n := a.Count * size
	var in, out buffer
	if c.rank == a.Root {
		if in, out, err = buffers(name, a, n, n); err != nil {
			return call{}, err
		}
	} else {
		if a.InPlace {
			return call{}, argError(name, mpierr.Buffer, "MPI_IN_PLACE is only allowed at the root")
		}
		if in, err = send(name, a, n); err != nil {
			return call{}, err
		}
	}
	p := algorithms.Params{P: c.Size(), Rank: c.rank, Root: a.Root, Count: a.Count, Commutative: a.Op.commutative(), InPlace: a.InPlace, Reproducible: c.reproducible(a)}
	return call{name: name, coll: algorithms.Reduce, own: a.own, bytes: int64(n), p: p, in: in, out: out, size: size, kernel: kernel}, nil
}

// checkGather checks a Gather of Count elements per rank to Root.
func (c *Comm) checkGather(a Args) (call, error) {
	const name = "MPI_Gather"
	if err := checkType(name, a.Type); err != nil {
		return call{}, err
	}
	if err := c.checkCountRoot(name, a); err != nil {
		return call{}, err
	}
	size := a.elemSize()
	n := a.Count * size
	var in, out buffer
	var err error
	switch {
	case c.rank == a.Root:
		if out, err = recv(name, "recvbuf", a, n*c.Size()); err == nil {
			in, err = c.ownBlock(name, a, out, n)
		}
	case a.InPlace:
		err = argError(name, mpierr.Buffer, "MPI_IN_PLACE is only allowed at the root")
	default:
		in, err = send(name, a, n)
	}
	if err != nil {
		return call{}, err
	}
	p := algorithms.Params{P: c.Size(), Rank: c.rank, Root: a.Root, Counts: c.uniform(a.Count), Commutative: true, InPlace: a.InPlace}
	return call{name: name, coll: algorithms.Gather, own: a.own, bytes: int64(n * c.Size()), p: p, in: in, out: out, size: size}, nil
}

// ownBlock is this rank's contribution to a gather of n-byte blocks into
// out: its block of out in place, else the send buffer, which must not
// overlap out.
func (c *Comm) ownBlock(name string, a Args, out buffer, n int) (buffer, error) {
	if a.InPlace {
		return out.slice(c.rank*n, (c.rank+1)*n), nil
	}
	in, err := send(name, a, n)
	if err != nil {
		return buffer{}, err
	}
	return in, checkDisjoint(name, in, out)
}

// checkReduce checks the datatype and op of a reducing call and returns
// the element size and kernel.
func checkReduce(name string, a Args) (int, ops.Kernel, error) {
	if err := checkType(name, a.Type); err != nil {
		return 0, nil, err
	}
	k, err := a.Op.kernel(name, a.Type)
	if err != nil {
		return 0, nil, err
	}
	return a.elemSize(), k, nil
}

// buffers checks the send and receive buffers of a reducing call and
// returns the input and output as the routes see them: in place, the
// input is the start of the output.
func buffers(name string, a Args, inLen, outLen int) (in, out buffer, err error) {
	if out, err = recv(name, "recvbuf", a, outLen); err != nil {
		return in, out, err
	}
	if a.InPlace {
		return out.slice(0, inLen), out, nil
	}
	if in, err = send(name, a, inLen); err != nil {
		return in, out, err
	}
	return in, out, checkDisjoint(name, in, out)
}

// send and recv are the first n bytes of the call's send and receive
// buffers (arg names the receive buffer in errors), in host memory (Send,
// Recv) or device memory (SendDevice, RecvDevice): an error when they are
// shorter.
func send(name string, a Args, n int) (buffer, error) {
	return span(name, "sendbuf", a.Send, a.SendDevice, n)
}

func recv(name, arg string, a Args, n int) (buffer, error) {
	return span(name, arg, a.Recv, a.RecvDevice, n)
}

func span(name, arg string, host []byte, dev *gpu.Buffer, n int) (buffer, error) {
	b, err := bufferOf(name, arg, host, dev)
	if err != nil {
		return buffer{}, err
	}
	if err := checkBuf(name, arg, b, n); err != nil {
		return buffer{}, err
	}
	return b.slice(0, n), nil
}

func bufferOf(name, arg string, host []byte, dev *gpu.Buffer) (buffer, error) {
	switch {
	case dev == nil:
		return hostBuffer(host), nil
	case !dev.OnDevice():
		return buffer{}, argError(name, mpierr.Buffer, "%s is given as device memory (%d bytes at %#x) that is not CUDA device memory", arg, dev.Len, dev.Ptr)
	case host != nil:
		return buffer{}, argError(name, mpierr.Buffer, "%s is given both as host and as device memory", arg)
	case dev.Len < 0 || (dev.Len > 0 && dev.Ptr == 0):
		return buffer{}, argError(name, mpierr.Buffer, "%s is a null or negative device buffer (%d bytes at %#x)", arg, dev.Len, dev.Ptr)
	}
	return deviceBuffer(*dev), nil
}

// checkCountRoot checks a rooted call's count and root.
func (c *Comm) checkCountRoot(name string, a Args) error {
	if err := checkCount(name, "count", a.Count); err != nil {
		return err
	}
	if a.Root < 0 || a.Root >= c.Size() {
		return argError(name, mpierr.Root, "root %d is not a rank of %s (size %d)", a.Root, c.name, c.Size())
	}
	return nil
}

// checkType fails for an invalid datatype.
func checkType(name string, t ops.Type) error {
	if !t.Valid() {
		return argError(name, mpierr.Type, "invalid datatype")
	}
	return nil
}

// checkCount fails for a negative count.
func checkCount(name, arg string, n int) error {
	if n < 0 {
		return argError(name, mpierr.Count, "%s is negative (%d)", arg, n)
	}
	return nil
}

// checkBuf fails when buf is shorter than need bytes.
func checkBuf(name, arg string, buf buffer, need int) error {
	if buf.len() < need {
		return argError(name, mpierr.Buffer, "%s holds %d bytes, the call needs %d", arg, buf.len(), need)
	}
	return nil
}

// checkDisjoint fails when the send and receive buffers share memory
// outside MPI_IN_PLACE.
func checkDisjoint(name string, send, recv buffer) error {
	if send.overlaps(recv) {
		return argError(name, mpierr.Buffer, "send and receive buffers overlap (use MPI_IN_PLACE for an in-place call)")
	}
	return nil
}
