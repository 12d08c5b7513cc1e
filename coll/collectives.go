package coll

import (
	"fmt"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/gpu/devcopy"
	"github.com/gocoll/gocoll/mpierr"
)

// The collectives: each checks its arguments (validate.go) under the
// GOCOLL_CHECK agreement (agreement.go) and runs the call (call.go), or,
// given a request, makes it the request's call (request.go).

// Allreduce combines Count elements from every rank with Op and leaves the
// result on every rank. In place, Recv holds the input.
func (c *Comm) Allreduce(a Args) error {
	return c.checked(signatureOf(algorithms.Allreduce, a), func() error { return c.allreduce(a, nil) })
}

// allreduce checks the arguments and runs the call, or, with r, makes
// it r's call (as do the other collectives' lower-case methods).
func (c *Comm) allreduce(a Args, r *Request) error {
	cl, err := c.checkAllreduce(a)
	if err != nil {
		return err
	}
	if wide, ok := wideType(cl.p, a); ok {
		return c.runWide(r, cl, a, cl.out.len(), wide)
	}
	return c.dispatch(r, &cl)
}

// ReduceScatter combines the vectors of all ranks and leaves block r, of
// Counts[r] elements, on rank r. In place, Recv holds the whole input and
// receives the result at its start.
func (c *Comm) ReduceScatter(a Args) error {
	return c.checked(signatureOf(algorithms.ReduceScatter, a), func() error { return c.reduceScatterV(a, nil) })
}

func (c *Comm) reduceScatterV(a Args, r *Request) error {
	cl, err := c.checkReduceScatter(a)
	if err != nil {
		return err
	}
	return c.reduceScatter(r, cl, a, a.Counts[c.rank])
}

// ReduceScatterBlock is ReduceScatter with Count elements for every rank.
func (c *Comm) ReduceScatterBlock(a Args) error {
	return c.checked(signatureOf(algorithms.ReduceScatterBlock, a), func() error { return c.reduceScatterBlock(a, nil) })
}

func (c *Comm) reduceScatterBlock(a Args, r *Request) error {
	cl, err := c.checkReduceScatterBlock(a)
	if err != nil {
		return err
	}
	return c.reduceScatter(r, cl, a, a.Count)
}

// reduceScatter runs a checked reduce-scatter whose rank receives mine
// elements.
func (c *Comm) reduceScatter(r *Request, cl call, a Args, mine int) error {
	if wide, ok := wideType(cl.p, a); ok {
		return c.runWide(r, cl, a, mine*cl.size, wide)
	}
	return c.dispatch(r, &cl)
}

// Allgather gathers Count elements from every rank, in rank order, into
// Recv on every rank. In place, each rank's contribution is already at its
// place in Recv.
func (c *Comm) Allgather(a Args) error {
	return c.checked(signatureOf(algorithms.Allgather, a), func() error { return c.allgather("MPI_Allgather", a, nil) })
}

func (c *Comm) allgather(name string, a Args, r *Request) error {
	cl, err := c.checkAllgather(name, a)
	if err != nil {
		return err
	}
	return c.dispatch(r, &cl)
}

// Allgatherv is Allgather with Counts[r] elements from rank r, laid out
// one after the other in Recv. In place, each rank's contribution is
// already at its place in Recv.
func (c *Comm) Allgatherv(a Args) error {
	sig := signatureOf(algorithms.Allgather, a)
	sig.call = callAllgatherv
	return c.checked(sig, func() error { return c.allgatherv(a, nil) })
}

func (c *Comm) allgatherv(a Args, r *Request) error {
	cl, g, err := c.checkAllgatherv(a)
	if err != nil {
		return err
	}
	if !g.packed && g.recv.onDevice() {
		if r != nil {
			return argError(cl.name, mpierr.Request, "a displaced MPI_Allgatherv on device memory cannot be a request")
		}
		return c.allgathervDevice(cl, a, g)
	}
	if !g.packed {
		// Displaced blocks: gather packed into a temporary, then place
		// them.
		out := make([]byte, g.total*cl.size)
		cl.out = hostBuffer(out)
		if a.InPlace {
			cl.in = cl.out.slice(g.before*cl.size, (g.before+a.Counts[c.rank])*cl.size)
		}
		cl.pre, cl.post = placement(a, g.recv.bytes(), out, c.rank, g.before, cl.size)
	}
	return c.dispatch(r, &cl)
}

// placement returns the hooks of a displaced Allgatherv gathered packed
// into out: pre copies an in-place contribution from its place in recv
// (nil when not in place), post places every block. (A function of its
// own, so that a packed call's variables are not captured and allocated.)
func placement(a Args, recv, out []byte, rank, before, size int) (pre, post func()) {
	block := func(i int) []byte {
		at := a.Displs[i] * size
		return recv[at : at+a.Counts[i]*size]
	}
	if a.InPlace {
		pre = func() { copy(out[before*size:], block(rank)) }
	}
	post = func() {
		off := 0
		for i, n := range a.Counts {
			copy(block(i), out[off*size:(off+n)*size])
			off += n
		}
	}
	return pre, post
}

// allgathervDevice runs a checked Allgatherv whose receive buffer is
// device memory and whose blocks are displaced: it gathers them packed
// into a device temporary in the receive buffer's context, then places
// each with a device-to-device copy. (In place, this rank's block is read
// from its place in the receive buffer, and is already where it goes.)
//
// Device memory, not a host temporary: every rank's call stays on device
// memory, so every rank takes the device route whatever its displacements
// (each rank has its own; an in-place rank with an empty block would have
// no device buffer left and take the host route alone), and the copies
// stay on the GPU. One allocation per call: displaced calls are rare.
func (c *Comm) allgathervDevice(cl call, a Args, g gathered) error {
	name, size := cl.name, cl.size
	recv := g.recv.gpu()
	ctx := devcopy.Of(c.cuda(), recv.Mem)
	n := g.total * size
	tmp, err := ctx.Alloc(n)
	if err != nil {
		return deviceError(name, fmt.Sprintf("allocating a temporary of %d bytes for the displaced blocks", n), err)
	}
	mem := c.Memory(tmp) // its buffer id, for the IPC handles the executor keeps
	if !mem.OnDevice() {
		ctx.Free(tmp)
		return deviceError(name, "the driver does not know the temporary it allocated", nil)
	}
	cl.out = deviceBuffer(gpu.Buffer{Ptr: tmp, Len: n, Mem: mem})
	if a.InPlace {
		at := a.Displs[c.rank] * size
		cl.in = g.recv.slice(at, at+a.Counts[c.rank]*size)
		cl.p.InPlace = false // the block goes from recvbuf to the temporary
	}
	err = c.run(&cl)
	if err == nil {
		err = placeDevice(ctx, recv.Ptr, tmp, a, c.rank, size)
		if err != nil {
			err = deviceError(name, "placing the blocks in recvbuf", err)
		}
	}
	if ferr := ctx.Free(tmp); ferr != nil && err == nil {
		err = deviceError(name, "freeing the device temporary", ferr)
	}
	return err
}

// placeDevice copies each rank's block from the packed temporary tmp to
// its place in recv, device to device (this rank's block too, unless in
// place).
func placeDevice(ctx devcopy.Context, recv, tmp uintptr, a Args, rank, size int) error {
	x, err := ctx.Begin()
	if err != nil {
		return err
	}
	off := 0
	for q, n := range a.Counts {
		if !(a.InPlace && q == rank) {
			x.Queue(recv+uintptr(a.Displs[q]*size), tmp+uintptr(off*size), n*size) // a failure is Finish's
		}
		off += n
	}
	return x.Finish()
}

// deviceError is the error of a driver call a collective made itself.
func deviceError(call, what string, err error) error {
	return &mpierr.Error{Call: call, Class: mpierr.Other, Msg: "CUDA device memory: " + what, Err: err}
}

// uniform returns p copies of n, reusing the slice of the last call.
func (c *Comm) uniform(n int) []int {
	return c.cache.uniformCounts(c.Size(), n)
}
