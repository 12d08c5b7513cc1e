// Package device is the executor that runs schedules on CUDA device
// memory. It runs the very schedules the host executor runs (algorithms
// know nothing of memory kinds); what differs is how bytes move:
//
//   - Staging. A message between ranks that cannot reach each other's
//     GPU memory travels through pinned host memory in segments
//     (Options.Segment, 1 MiB): the sender copies segment k down
//     (device to host, on its "down" stream) while segment k-1 is on the
//     wire; the receiver copies segment k up (host to device, "up"
//     stream) while segment k+1 arrives. Each segment is its own
//     transport message, so transfers overlap with both copies, Depth
//     segments deep per transfer.
//   - IPC. Ranks on one node exchange a small descriptor instead: the
//     sender's allocation as a CUDA IPC handle and an offset; the
//     receiver maps it once (cuIpcOpenMemHandle, cached) and copies
//     device to device, then acknowledges, after which the sender may
//     reuse its memory. Ranks that are goroutines of one process (a Go
//     program's RunLocal) share the address space and copy directly.
//   - Reductions. Reduce steps of MPI_SUM, MPI_PROD, MPI_MAX and
//     MPI_MIN on binary16, bfloat16, float32, float64 and the 32- and
//     64-bit integers run as GPU kernels (package gpu's PTX) on the
//     "compute" stream; every other op (user ops, MAXLOC, bitwise,
//     complex, ...) is staged to the host in segments, reduced by the
//     host kernel, and copied back, the copies of the next segment
//     overlapping the host reduction of this one.
//
// Streams are ordered by events: before a round's transfers both copy
// streams wait for the compute stream (the round's sends read what the
// last steps wrote; its receives overwrite what they read), and the
// round's steps wait for the up stream. The call returns once its last
// step has completed on the GPU, so the caller's buffers are final.
//
// The application's work: the streams are non-blocking, so each call
// first makes the compute stream wait for events recorded on the legacy
// default stream and on the calling thread's per-thread default stream
// (run.order); work on the application's own streams is the
// application's to finish before the call. Nothing is done that could
// poison the application's context: buffers not aligned for a kernel's
// element type are staged (kernelAlign), a PTX module the driver cannot
// load sends reductions to the host (workspace.function), and a workspace
// retains the primary context it works in (acquire).
//
// Messages carry tags of their own kind (data, descriptor,
// acknowledgement) and index within the round, so every rank of a call
// must use the device executor: all ranks pass device memory, or none
// does (gocoll's dispatch classifies each rank's buffers separately).
package device

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gocoll/gocoll/executor/host"
	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/schedule"
	"github.com/gocoll/gocoll/transport"
)

// Call is one rank's part of one collective call on device memory.
type Call struct {
	Sched    *schedule.Schedule
	In, Out  gpu.Buffer // In may alias part of Out (MPI_IN_PLACE)
	ElemSize int
	// Kernel is the GPU reduction kernel (package gpu's KernelName) of
	// the call's op and type, or "" when reductions run on the host.
	Kernel string
	Elem   gpu.Elem // the kernel's element type
	// Reduce is the host kernel: reductions without a GPU kernel use it.
	// Nil for collectives that do not reduce.
	Reduce host.Kernel

	T     transport.Transport
	Ranks []int         // transport rank of each communicator rank
	Tag   transport.Tag // Context and Seq of the call; Round is set per round
}

// Executor runs device calls for one communicator, one at a time, to
// the end (Run) or resumably (Start, then Progress until it reports done,
// or Finish), as the host executor does. It keeps streams, events and
// device scratch memory between calls. Make one with New; Close frees
// what it holds. Start, Progress and Finish are for one goroutine at a
// time; each makes the workspace's context current on its thread for its
// duration only.
type Executor struct {
	rt    *gpu.Runtime
	opts  Options
	peers []Peer // per communicator rank, from the communicator's exchange

	mu     sync.Mutex
	states map[*workspace]*state

	cur *run // the call started and not done (Start)

	statsMu sync.Mutex
	stats   Stats
}

// Stats counts how an executor's transfers and steps ran.
type Stats struct {
	Staged, IPC, Direct   int // transfers sent, by path
	Fallbacks             int // IPC transfers the receiver could not map, sent staged
	Segments              int // staged segments sent
	GPUReduce, HostReduce int // reduce steps, by where they ran
}

// Stats returns the executor's counters.
func (x *Executor) Stats() Stats {
	x.statsMu.Lock()
	defer x.statsMu.Unlock()
	return x.stats
}

func (x *Executor) count(f func(*Stats)) {
	x.statsMu.Lock()
	f(&x.stats)
	x.statsMu.Unlock()
}

// state is an executor's resources in one context.
type state struct {
	w                      *workspace
	up, down, comp         gpu.Stream
	events                 []gpu.Event // free events
	all                    []gpu.Event
	scratch, tmpIn, tmpOut devMem
	host                   devMem        // the Stage's pinned host memory (its mem unused)
	spin                   time.Duration // how long a host wait polls without pause (spinFor, or 0 where crowded)
	crowded                bool          // Options.Crowded
}

type devMem struct {
	ptr uintptr
	n   int
	mem gpu.Memory
}

// New returns an executor over rt. peers says, per communicator rank,
// how this rank reaches it (see Peers); nil means staging only.
func New(rt *gpu.Runtime, opts Options, peers []Peer) *Executor {
	return &Executor{rt: rt, opts: opts.withDefaults(), peers: peers, states: map[*workspace]*state{}}
}

// Close frees the executor's streams, events and device memory, and
// releases its workspaces.
func (x *Executor) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	var errs []error
	for w, st := range x.states {
		leave, err := w.enter()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, m := range []devMem{st.scratch, st.tmpIn, st.tmpOut} {
			if m.ptr != 0 {
				errs = append(errs, w.drv.MemFree(m.ptr))
			}
		}
		if st.host.ptr != 0 {
			errs = append(errs, w.drv.MemFreeHost(st.host.ptr))
		}
		for _, ev := range st.all {
			errs = append(errs, w.drv.EventDestroy(ev))
		}
		for _, s := range []gpu.Stream{st.up, st.down, st.comp} {
			errs = append(errs, w.drv.StreamDestroy(s))
		}
		leave()
		errs = append(errs, w.release())
		delete(x.states, w)
	}
	return errors.Join(errs...)
}

// state returns the executor's resources in the context of mem, making
// them at first use, with the context current on the locked thread.
func (x *Executor) state(mem gpu.Memory) (*state, func(), error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for w, st := range x.states {
		if w.ctx == mem.Context && w.dev == mem.Device {
			leave, err := w.enter()
			return st, leave, err
		}
	}
	w, err := acquire(x.rt, mem, x.opts)
	if err != nil {
		return nil, nil, err
	}
	if st := x.states[w]; st != nil { // a context the memory did not name
		w.release()
		leave, err := w.enter()
		return st, leave, err
	}
	leave, err := w.enter()
	if err != nil {
		w.release()
		return nil, nil, err
	}
	st := &state{w: w, spin: spinFor, crowded: x.opts.Crowded}
	if st.crowded {
		st.spin = 0
	}
	for _, s := range []*gpu.Stream{&st.up, &st.down, &st.comp} {
		if *s, err = w.drv.StreamCreate(); err != nil {
			leave()
			w.release()
			return nil, nil, err
		}
	}
	x.states[w] = st
	return st, leave, nil
}

// event returns a free event of the state.
func (st *state) event() (gpu.Event, error) {
	if n := len(st.events); n > 0 {
		ev := st.events[n-1]
		st.events = st.events[:n-1]
		return ev, nil
	}
	ev, err := st.w.drv.EventCreate()
	if err == nil {
		st.all = append(st.all, ev)
	}
	return ev, err
}

func (st *state) putEvents(evs ...gpu.Event) { st.events = append(st.events, evs...) }

// ensure grows a device buffer of the state to n bytes.
func (st *state) ensure(m *devMem, n int) error {
	if m.n >= n {
		return nil
	}
	if m.ptr != 0 {
		st.w.forgetHandle(m.mem)
		if err := st.w.drv.MemFree(m.ptr); err != nil {
			return err
		}
		*m = devMem{}
	}
	p, err := st.w.drv.MemAlloc(n)
	if err != nil {
		return fmt.Errorf("device scratch memory (%d bytes): %w", n, err)
	}
	*m = devMem{ptr: p, n: n, mem: gpu.Memory{Kind: gpu.Device, Context: st.w.ctx, Device: st.w.dev, Base: p, Size: n}}
	if a, err := st.w.drv.PointerAttributes(p); err == nil {
		m.mem.BufferID = a.BufferID // so that its IPC handle is cached (workspace.handle)
	}
	return nil
}

// Start begins a call on the calling thread: it orders the call after
// the application's work on the default streams (run.order, which must
// run on the application's thread) and places the buffers; Progress or
// Finish run it. One call at a time.
func (x *Executor) Start(c *Call) error {
	if x.cur != nil {
		return errors.New("device executor: a call is already in progress")
	}
	mem := c.Out.Mem
	if !mem.OnDevice() {
		mem = c.In.Mem
	}
	if !mem.OnDevice() {
		return errors.New("device executor: neither buffer is device memory")
	}
	st, leave, err := x.state(mem)
	if err != nil {
		return err
	}
	defer leave()
	r := &run{x: x, st: st, w: st.w, drv: st.w.drv, c: c}
	if err := r.begin(); err != nil {
		// A failed call leaves the streams in an unknown state: wait for
		// what was queued before anyone reuses the buffers.
		r.syncAll()
		return err
	}
	x.cur = r
	return nil
}

// Progress moves the started call as far as it can without waiting for
// a peer or the GPU; it reports whether the call is done (then its error
// is final, and the caller's buffers hold the result) and whether
// anything moved.
func (x *Executor) Progress() (done, moved bool, err error) {
	return x.advance(false)
}

// Finish runs the started call to the end.
func (x *Executor) Finish() error {
	_, _, err := x.advance(true)
	return err
}

// Run executes the call: Start, then Finish. Errors name the driver call
// or the transfer that failed.
func (x *Executor) Run(c *Call) error {
	if err := x.Start(c); err != nil {
		return err
	}
	return x.Finish()
}

func (x *Executor) advance(block bool) (done, moved bool, err error) {
	r := x.cur
	if r == nil {
		return true, false, nil
	}
	leave, err := r.w.enter()
	if err != nil {
		// Nothing more can be done in the context: the call ends here.
		x.cur = nil
		return true, true, err
	}
	defer leave()
	done, moved, err = r.advance(block)
	if err != nil {
		r.syncAll()
	}
	if done {
		x.cur = nil
	}
	return done, moved, err
}
