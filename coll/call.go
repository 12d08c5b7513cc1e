package coll

import (
	"unsafe"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/ops"
)

// call is one collective call whose arguments were checked (validate.go):
// what it takes to choose a route and run it, blocking or as a Request's.
type call struct {
	name  string // the blocking call's MPI name (counters)
	form  string // a request's: MPI_Iallreduce, MPI_Allreduce_init; "": name
	coll  algorithms.Collective
	force string // Args.Algorithm
	own   bool   // not counted (Args.own)
	bytes int64
	p     algorithms.Params
	in    buffer
	out   buffer
	size  int
	// kernel combines elements on the host; builtin names the
	// predefined op and datatype behind it, from which the shm engine
	// and the device executor take kernels of their own (none: a user
	// op, or a call that does not reduce).
	kernel  ops.Kernel
	builtin builtinOp
	// pre runs before each execution and post after each that succeeds:
	// the temporaries of reproducible 16-bit floats and of a displaced
	// Allgatherv. nil: nothing.
	pre, post func()
}

// label is the call's name as the program made it, for messages.
func (cl *call) label() string {
	if cl.form != "" {
		return cl.form
	}
	return cl.name
}

// onDevice reports whether a buffer of the call is CUDA memory: the call
// then runs on the device route.
func (cl *call) onDevice() bool { return cl.in.onDevice() || cl.out.onDevice() }

// builtinOp is the predefined op and datatype of a reducing call; the
// zero value is none.
type builtinOp struct {
	op  ops.Op
	typ ops.Type
}

func builtinOf(a Args) builtinOp { return builtinOp{a.Op.Builtin, a.Type} }

// buffer is one of a call's buffers, n bytes: host memory (host), or
// device memory by address (dev, and mem says where it lives): the CPU
// never touches it. Small, since calls copy their buffers: a host call
// costs a few words, and only a device call carries its Memory.
type buffer struct {
	host unsafe.Pointer
	dev  uintptr
	n    int
	mem  *gpu.Memory // nil: host memory
}

func hostBuffer(b []byte) buffer {
	return buffer{host: unsafe.Pointer(unsafe.SliceData(b)), n: len(b)}
}

// deviceBuffer is d as a call's buffer (its Memory moves to the heap:
// device calls allocate).
func deviceBuffer(d gpu.Buffer) buffer {
	m := d.Mem
	return buffer{dev: d.Ptr, n: d.Len, mem: &m}
}

func (b buffer) onDevice() bool { return b.mem != nil }

func (b buffer) len() int { return b.n }

// bytes is a host buffer's memory.
func (b buffer) bytes() []byte { return unsafe.Slice((*byte)(b.host), b.n) }

// addr is the buffer's first byte, 0 for an empty host buffer.
func (b buffer) addr() uintptr {
	if b.onDevice() {
		return b.dev
	}
	return uintptr(b.host)
}

// slice returns bytes [lo, hi) of the buffer.
func (b buffer) slice(lo, hi int) buffer {
	if b.onDevice() {
		b.dev += uintptr(lo)
	} else if hi > lo {
		b.host = unsafe.Add(b.host, lo)
	}
	b.n = hi - lo
	return b
}

// gpu is the buffer as the device executor takes it: host memory by
// address too (it copies it to the device).
func (b buffer) gpu() gpu.Buffer {
	if b.onDevice() {
		return gpu.Buffer{Ptr: b.dev, Len: b.n, Mem: *b.mem}
	}
	return gpu.Buffer{Ptr: uintptr(b.host), Len: b.n}
}

// overlaps reports whether two non-empty buffers share memory.
func (b buffer) overlaps(o buffer) bool {
	if b.n == 0 || o.n == 0 {
		return false
	}
	x, y := b.addr(), o.addr()
	return x < y+uintptr(o.n) && y < x+uintptr(b.n)
}

// dispatch runs cl now, or with r makes it r's call.
func (c *Comm) dispatch(r *Request, cl *call) error {
	if r != nil {
		r.cl = *cl
		return nil
	}
	return c.run(cl)
}

// run runs cl to the end, after the requests started before it on this
// communicator: its route starts it, and its stepper finishes it.
func (c *Comm) run(cl *call) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return argError(cl.name, mpierr.Comm, "communicator %s was freed (or MPI finalized)", c.name)
	}
	if c.inFlight.Load() > 0 {
		// The requests' begins set the GOCOLL_CHECK signature of their
		// own: keep this call's for its decide.
		pending, has := c.pending, c.hasPending
		c.hasPending = false
		c.drain()
		c.pending, c.hasPending = pending, has
	}
	if cl.pre != nil {
		cl.pre()
	}
	pl, err := c.decide(cl)
	if err != nil {
		return err
	}
	st, err := pl.route.start(c, *cl, pl)
	if err != nil {
		return err
	}
	if c.loop.comms.Load() > 0 {
		err = c.finishWithOthers(st)
	} else {
		err = st.Finish()
	}
	if err != nil {
		return err
	}
	if cl.post != nil {
		cl.post()
	}
	return nil
}

// finishWithOthers finishes a blocking call while other communicators
// have requests in flight: it steps the call and moves theirs while it
// waits, since a peer may need one of them before it can answer this
// call (MPI's progress rule). c.mu is held.
func (c *Comm) finishWithOthers(st stepper) error {
	var pat patience
	for {
		done, moved, err := st.Progress()
		if done {
			return err
		}
		if c.loop.progressAll() || moved {
			pat.moved()
		} else if pat.stalled(c.cfg.Timeout) {
			return st.Finish()
		}
	}
}
