package coll

import (
	"fmt"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/coll/counters"
	"github.com/gocoll/gocoll/executor/host"
	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/schedule"
	"github.com/gocoll/gocoll/transport"
	"github.com/gocoll/gocoll/tuner"
)

// Allreduce combines Count elements from every rank with Op and leaves the
// result on every rank. In place, Recv holds the input.
func (c *Comm) Allreduce(a Args) error {
	return c.checked(signatureOf(algorithms.Allreduce, a), func() error { return c.allreduce(a, nil) })
}

// allreduce checks the arguments and runs the call, or, with r, makes
// it r's call (as do the other collectives' lower-case methods).
func (c *Comm) allreduce(a Args, r *Request) error {
	const call = "MPI_Allreduce"
	size, kernel, err := c.checkReduce(call, a)
	if err != nil {
		return err
	}
	if err := checkCount(call, "count", a.Count); err != nil {
		return err
	}
	n := a.Count * size
	in, out, err := c.buffers(call, a, n, n)
	if err != nil {
		return err
	}
	p := algorithms.Params{P: c.Size(), Rank: c.rank, Count: a.Count, Commutative: a.Op.commutative(), InPlace: a.InPlace, Reproducible: c.reproducible(a)}
	if wide, ok := wideType(p, a); ok {
		return c.runWide(r, call, algorithms.Allreduce, a, p, in, out, n, wide)
	}
	return c.dispatch(r, op{call: call, coll: algorithms.Allreduce, force: a.Algorithm, own: a.own, bytes: int64(n), p: p, in: in, out: out, size: size, kernel: kernel, g: gpuOpOf(a), hasG: true})
}

// ReduceScatter combines the vectors of all ranks and leaves block r, of
// Counts[r] elements, on rank r. In place, Recv holds the whole input and
// receives the result at its start.
func (c *Comm) ReduceScatter(a Args) error {
	return c.checked(signatureOf(algorithms.ReduceScatter, a), func() error { return c.reduceScatterV(a, nil) })
}

func (c *Comm) reduceScatterV(a Args, r *Request) error {
	const call = "MPI_Reduce_scatter"
	size, kernel, err := c.checkReduce(call, a)
	if err != nil {
		return err
	}
	if len(a.Counts) != c.Size() {
		return argError(call, mpierr.Arg, "recvcounts has %d entries, the communicator %d ranks", len(a.Counts), c.Size())
	}
	total := 0
	for i, n := range a.Counts {
		if n < 0 {
			return argError(call, mpierr.Count, "recvcounts[%d] is negative (%d)", i, n)
		}
		total += n
	}
	p := algorithms.Params{P: c.Size(), Rank: c.rank, Counts: a.Counts, Commutative: a.Op.commutative(), InPlace: a.InPlace, Reproducible: c.reproducible(a)}
	return c.reduceScatter(r, call, algorithms.ReduceScatter, a, p, total*size, a.Counts[c.rank]*size, size, kernel)
}

// ReduceScatterBlock is ReduceScatter with Count elements for every rank.
func (c *Comm) ReduceScatterBlock(a Args) error {
	return c.checked(signatureOf(algorithms.ReduceScatterBlock, a), func() error { return c.reduceScatterBlock(a, nil) })
}

func (c *Comm) reduceScatterBlock(a Args, r *Request) error {
	const call = "MPI_Reduce_scatter_block"
	size, kernel, err := c.checkReduce(call, a)
	if err != nil {
		return err
	}
	if err := checkCount(call, "recvcount", a.Count); err != nil {
		return err
	}
	p := algorithms.Params{P: c.Size(), Rank: c.rank, Counts: c.uniform(a.Count), Commutative: a.Op.commutative(), InPlace: a.InPlace, Reproducible: c.reproducible(a)}
	return c.reduceScatter(r, call, algorithms.ReduceScatterBlock, a, p, c.Size()*a.Count*size, a.Count*size, size, kernel)
}

func (c *Comm) reduceScatter(r *Request, call string, coll algorithms.Collective, a Args, p algorithms.Params, total, mine, size int, kernel ops.Kernel) error {
	outLen := mine
	if a.InPlace {
		outLen = total
	}
	in, out, err := c.buffers(call, a, total, outLen)
	if err != nil {
		return err
	}
	if wide, ok := wideType(p, a); ok {
		return c.runWide(r, call, coll, a, p, in, out, mine, wide)
	}
	return c.dispatch(r, op{call: call, coll: coll, force: a.Algorithm, own: a.own, bytes: int64(total), p: p, in: in, out: out, size: size, kernel: kernel, g: gpuOpOf(a), hasG: true})
}

// Allgather gathers Count elements from every rank, in rank order, into
// Recv on every rank. In place, each rank's contribution is already at its
// place in Recv.
func (c *Comm) Allgather(a Args) error {
	return c.checked(signatureOf(algorithms.Allgather, a), func() error { return c.allgather("MPI_Allgather", a, nil) })
}

func (c *Comm) allgather(call string, a Args, r *Request) error {
	if err := checkType(call, a.Type); err != nil {
		return err
	}
	if err := checkCount(call, "count", a.Count); err != nil {
		return err
	}
	size := a.elemSize()
	n := a.Count * size
	total := n * c.Size()
	if err := checkBuf(call, "recvbuf", a.Recv, total); err != nil {
		return err
	}
	out := a.Recv[:total]
	in := out[c.rank*n : (c.rank+1)*n]
	if !a.InPlace {
		if err := checkBuf(call, "sendbuf", a.Send, n); err != nil {
			return err
		}
		in = a.Send[:n]
		if err := checkDisjoint(call, in, out); err != nil {
			return err
		}
	}
	p := algorithms.Params{P: c.Size(), Rank: c.rank, Counts: c.uniform(a.Count), Commutative: true, InPlace: a.InPlace}
	return c.dispatch(r, op{call: call, coll: algorithms.Allgather, force: a.Algorithm, own: a.own, bytes: int64(total), p: p, in: in, out: out, size: size})
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
	const call = "MPI_Allgatherv"
	if err := checkType(call, a.Type); err != nil {
		return err
	}
	if len(a.Counts) != c.Size() {
		return argError(call, mpierr.Arg, "recvcounts has %d entries, the communicator %d ranks", len(a.Counts), c.Size())
	}
	if a.Displs != nil && len(a.Displs) != c.Size() {
		return argError(call, mpierr.Arg, "displs has %d entries, the communicator %d ranks", len(a.Displs), c.Size())
	}
	size := a.elemSize()
	total, before, end := 0, 0, 0
	packed := true // the displacements are the counts' prefix sums
	for i, n := range a.Counts {
		if n < 0 {
			return argError(call, mpierr.Count, "recvcounts[%d] is negative (%d)", i, n)
		}
		if a.Displs != nil {
			if a.Displs[i] < 0 {
				return argError(call, mpierr.Arg, "displs[%d] is negative (%d)", i, a.Displs[i])
			}
			packed = packed && a.Displs[i] == total
			end = max(end, a.Displs[i]+n)
		}
		if i < c.rank {
			before += n
		}
		total += n
	}
	if packed {
		end = total
	}
	if err := checkBuf(call, "recvbuf", a.Recv, end*size); err != nil {
		return err
	}
	recv := a.Recv[:end*size]
	n := a.Counts[c.rank] * size
	block := func(i int) []byte { // rank i's block in recv
		at := a.Displs[i] * size
		return recv[at : at+a.Counts[i]*size]
	}
	out := recv
	var pre, post func()
	if !packed {
		// Displaced blocks: gather packed into a temporary, then place
		// them.
		out = make([]byte, total*size)
		pre, post = placement(a, recv, out, c.rank, before, size)
	}
	in := out[before*size : before*size+n]
	if !a.InPlace {
		if err := checkBuf(call, "sendbuf", a.Send, n); err != nil {
			return err
		}
		in = a.Send[:n]
		if packed {
			if err := checkDisjoint(call, in, out); err != nil {
				return err
			}
		} else {
			for i := range a.Counts {
				if overlap(in, block(i)) {
					return argError(call, mpierr.Buffer, "sendbuf overlaps the block of rank %d in recvbuf (use MPI_IN_PLACE for an in-place call)", i)
				}
			}
		}
	}
	p := algorithms.Params{P: c.Size(), Rank: c.rank, Counts: a.Counts, Commutative: true, InPlace: a.InPlace}
	return c.dispatch(r, op{call: call, coll: algorithms.Allgather, force: a.Algorithm, own: a.own, bytes: int64(total * size), p: p, in: in, out: out, size: size, pre: pre, post: post})
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

// checkReduce validates the datatype and op of a reducing call and returns
// the element size and kernel.
func (c *Comm) checkReduce(call string, a Args) (int, ops.Kernel, error) {
	if err := checkType(call, a.Type); err != nil {
		return 0, nil, err
	}
	k, err := a.Op.kernel(call, a.Type)
	if err != nil {
		return 0, nil, err
	}
	return a.elemSize(), k, nil
}

// buffers validates the send and receive buffers of a reducing call and
// returns the input and output as the executor sees them: in place, the
// input is the start of the output.
func (c *Comm) buffers(call string, a Args, inLen, outLen int) (in, out []byte, err error) {
	if err := checkBuf(call, "recvbuf", a.Recv, outLen); err != nil {
		return nil, nil, err
	}
	out = a.Recv[:outLen]
	if a.InPlace {
		return out[:inLen], out, nil
	}
	if err := checkBuf(call, "sendbuf", a.Send, inLen); err != nil {
		return nil, nil, err
	}
	in = a.Send[:inLen]
	return in, out, checkDisjoint(call, in, out)
}

// uniform returns p copies of n, reusing the slice of the last call.
func (c *Comm) uniform(n int) []int {
	return c.cache.uniformCounts(c.Size(), n)
}

// op is one collective call whose arguments were checked: what it takes
// to choose an algorithm and run it, blocking or as a Request's.
type op struct {
	call   string // the blocking call's name (counters)
	form   string // a request's: MPI_Iallreduce, MPI_Allreduce_init; "": call
	coll   algorithms.Collective
	force  string // Args.Algorithm
	own    bool   // not counted (Args.own)
	bytes  int64
	p      algorithms.Params
	in     []byte
	out    []byte
	size   int
	kernel ops.Kernel
	g      gpuOp // the predefined op and datatype, for a GPU kernel
	hasG   bool
	// pre runs before each execution and post after each that succeeds:
	// the temporaries of reproducible 16-bit floats and of a displaced
	// Allgatherv. nil: nothing.
	pre, post func()
}

// label is the call's name as the program made it, for messages.
func (o *op) label() string {
	if o.form != "" {
		return o.form
	}
	return o.call
}

// route is how an op runs: the algorithm, and where.
type route struct {
	alg      *algorithms.Algorithm
	onDevice bool
	pl       placed
	h        *hierarchy // the shm form of a hierarchical algorithm
}

// resumable reports whether the route is a schedule on the host
// executor; the shm engine and the device executor have steppers of their
// own (stepperOf), and only hierarchical's shm form runs as one piece.
func (rt route) resumable() bool { return rt.scheduled() && !rt.onDevice }

// scheduled reports whether the route runs a schedule (on host or device
// memory), not the shm engine or hierarchical's shm form.
func (rt route) scheduled() bool { return !rt.alg.Direct && rt.h == nil }

// dispatch runs o now, or with r makes it r's call.
func (c *Comm) dispatch(r *Request, o op) error {
	if r != nil {
		r.o = o
		return nil
	}
	return c.run(&o)
}

// run runs o to the end, after the requests started before it on this
// communicator.
func (c *Comm) run(o *op) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return argError(o.call, mpierr.Comm, "communicator %s was freed (or MPI finalized)", c.name)
	}
	if c.inFlight.Load() > 0 {
		// The requests' begins set the GOCOLL_CHECK signature of their
		// own: keep this call's for its decide.
		pending, has := c.pending, c.hasPending
		c.hasPending = false
		c.drain()
		c.pending, c.hasPending = pending, has
	}
	if o.pre != nil {
		o.pre()
	}
	rt, err := c.decide(o)
	if err != nil {
		return err
	}
	if c.eng.comms.Load() > 0 {
		err = c.stepWithOthers(o, rt)
	} else {
		err = c.execute(o, rt)
	}
	if err != nil {
		return err
	}
	if o.post != nil {
		o.post()
	}
	return nil
}

// decide classifies the memory, agrees on the call (GOCOLL_CHECK) and
// picks the algorithm; it prints the call (GOCOLL_DEBUG) and counts it
// (package counters) unless o.own. c.mu is held.
func (c *Comm) decide(o *op) (route, error) {
	call, p := o.label(), o.p
	pl, onDevice := c.classify(o.in, o.out)
	if c.hasPending { // GOCOLL_CHECK: agree on the call before running it
		c.pending.device = onDevice
		c.hasPending = false
		if err := c.exchange(call, c.pending, true); err != nil {
			return route{}, err
		}
	}
	p.SharedMemory = c.shared != nil
	p.DeviceMemory = onDevice
	p.Nodes = c.nodes
	o.p = p
	choice, err := c.cfg.Tuner.Choose(tuner.Query{Collective: o.coll, Bytes: o.bytes, Params: p, Force: o.force})
	if err != nil {
		return route{}, argError(call, mpierr.Arg, "%v", err)
	}
	rt := route{alg: choice.Alg, onDevice: onDevice, pl: pl}
	// A hierarchical call takes the shm form where the communicator has
	// its node and slice communicators and the memory is the host's.
	composes := c.composes(o.coll, choice.Alg)
	if composes {
		rt.h = c.hierarchyFor(onDevice)
	}
	if c.cfg.Debug != nil {
		how := choice.How()
		if choice.Why != "" {
			how += ": " + choice.Why // the rule or the model's estimate
		}
		form := ""
		if composes {
			form = formNote(rt.h)
		}
		fmt.Fprintf(c.cfg.Debug, "gocoll: rank %d: %s comm=%s bytes=%d p=%d algorithm=%s (%s)%s%s\n",
			c.rank, call, c.name, o.bytes, p.P, choice.Alg.Name, how, form, memoryNote(onDevice))
	}
	if cl, ok := counters.CallOf(o.call); ok && !o.own && choice.Alg != nil {
		counters.Ran(cl, choice.Alg, choice.Fallback)
	}
	return rt, nil
}

// execute runs o on route rt to the end; c.mu is held.
func (c *Comm) execute(o *op, rt route) error {
	var g []gpuOp
	if o.hasG {
		g = []gpuOp{o.g}
	}
	if rt.alg.Direct {
		return c.runDirect(o.label(), o.coll, o.p, o.in, o.out, o.size, o.kernel, g...)
	}
	if rt.h != nil {
		return c.runHierarchical(o.label(), o.coll, rt.h, o.p, o.in, o.out, o.size, o.kernel)
	}
	s := c.cache.get(o.coll, rt.alg, o.p)
	c.seq++
	if rt.onDevice {
		return c.runDevice(o.label(), rt.alg.Name, s, rt.pl, o.in, o.out, o.size, o.kernel, g)
	}
	c.call = hostCall(c, s, o.in, o.out, o.size, o.kernel)
	if err := c.exec.Run(&c.call); err != nil {
		return c.runError(o.label(), rt.alg.Name, err)
	}
	return nil
}

// hostCall describes a call of schedule s to the host executor, with
// scratch memory from the communicator's (grown as needed, kept between
// calls) and the call's tag; c.mu is held and c.seq already advanced.
func hostCall(c *Comm, s *schedule.Schedule, in, out []byte, size int, kernel ops.Kernel) host.Call {
	return hostCallIn(c, s, in, out, c.scratchBytes(s.ScratchLen*size), size, kernel)
}

// hostCallIn is hostCall with scratch of the caller's (a Request's own).
func hostCallIn(c *Comm, s *schedule.Schedule, in, out, scratch []byte, size int, kernel ops.Kernel) host.Call {
	return host.Call{
		Sched: s, In: in, Out: out, Scratch: scratch, ElemSize: size, Reduce: host.Kernel(kernel),
		T: c.t, Ranks: c.ranks, Tag: transport.Tag{Context: c.ctx, Seq: c.seq},
	}
}
