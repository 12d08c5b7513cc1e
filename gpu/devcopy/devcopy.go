// Package devcopy copies to, from and within CUDA device memory for the
// calls that move device bytes outside the device executor's schedules:
// point-to-point messages, staged through pinned host memory (package
// p2p), and the placement of a displaced MPI_Allgatherv's blocks
// (package coll).
//
// Every operation runs in the CUDA context of the buffer it is for, made
// current on the calling goroutine's OS thread (locked) for that
// operation only, and the thread's own context is restored after: the
// device executor's workspaces work the same way, and the application's
// thread is left as it was.
//
// Ordering is the contract of gocoll's device calls (docs/cuda.md): a
// Copy's stream waits for the work the application queued before Begin
// on the context's legacy default stream and on the calling thread's
// per-thread default stream, and Finish returns once its copies have
// completed, so that the bytes are final for the CPU and for any stream.
package devcopy

import (
	"errors"
	"runtime"
	"unsafe"

	"github.com/gocoll/gocoll/gpu"
)

// Context is the CUDA context of one buffer, which each operation enters.
type Context struct {
	drv gpu.Driver
	ctx gpu.Context // 0: the calling thread's current context
}

// Of returns the context of mem, memory that rt classified: the
// allocation's context, or, where the driver gave none (some pool and VMM
// memory), the calling thread's current one.
func Of(rt *gpu.Runtime, mem gpu.Memory) Context {
	return Context{drv: rt.Driver(), ctx: mem.Context}
}

// do runs f with the context current on the locked OS thread, and
// restores the thread's context after.
func (c Context) do(f func(drv gpu.Driver) error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if c.ctx != 0 {
		prev, err := c.drv.CurrentContext()
		if err != nil {
			return err
		}
		if prev != c.ctx {
			if err := c.drv.SetCurrentContext(c.ctx); err != nil {
				return err
			}
			defer c.drv.SetCurrentContext(prev)
		}
	}
	return f(c.drv)
}

// Host is pinned host memory (cuMemHostAlloc): staging space the GPU
// copies to and from directly.
type Host struct {
	c   Context
	ptr uintptr
	n   int
}

// HostAlloc returns n bytes of pinned host memory.
func (c Context) HostAlloc(n int) (Host, error) {
	var p uintptr
	err := c.do(func(drv gpu.Driver) (err error) {
		p, err = drv.MemHostAlloc(max(n, 1))
		return err
	})
	return Host{c: c, ptr: p, n: n}, err
}

// Addr is the memory's address, for copies.
func (h Host) Addr() uintptr { return h.ptr }

// Bytes is the memory as a slice, for the CPU (it is host memory).
func (h Host) Bytes() []byte {
	if h.n == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&h.ptr))), h.n)
}

// Free frees the memory; a zero Host has none.
func (h Host) Free() error {
	if h.ptr == 0 {
		return nil
	}
	return h.c.do(func(drv gpu.Driver) error { return drv.MemFreeHost(h.ptr) })
}

// Alloc returns n bytes of device memory in the context (cuMemAlloc).
func (c Context) Alloc(n int) (uintptr, error) {
	var p uintptr
	err := c.do(func(drv gpu.Driver) (err error) {
		p, err = drv.MemAlloc(max(n, 1))
		return err
	})
	return p, err
}

// Free frees device memory that Alloc returned.
func (c Context) Free(p uintptr) error {
	return c.do(func(drv gpu.Driver) error { return drv.MemFree(p) })
}

// Copy is a sequence of copies on a stream of its own in one context,
// ordered after the application's work on the default streams at Begin.
type Copy struct {
	c      Context
	stream gpu.Stream
	events []gpu.Event // the waits on the default streams, then done
	err    error       // the first failed Queue
}

// Begin starts a sequence of copies in the context: its stream waits for
// the work queued so far on the context's legacy default stream and on
// the calling thread's per-thread default stream. End it with Finish.
func (c Context) Begin() (*Copy, error) {
	x := &Copy{c: c}
	err := c.do(func(drv gpu.Driver) error {
		s, err := drv.StreamCreate()
		if err != nil {
			return err
		}
		x.stream = s
		for _, def := range []gpu.Stream{gpu.StreamLegacy, gpu.StreamPerThread} {
			ev, err := drv.EventCreate()
			if err != nil {
				return err
			}
			x.events = append(x.events, ev)
			if err := drv.EventRecord(ev, def); err != nil {
				return err
			}
			if err := drv.StreamWaitEvent(s, ev); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, errors.Join(err, x.release())
	}
	return x, nil
}

// Queue queues a copy of n bytes from src to dst, each host or device
// memory (unified addressing tells which). A failure is also Finish's.
func (x *Copy) Queue(dst, src uintptr, n int) error {
	if n == 0 || x.err != nil {
		return x.err
	}
	x.err = x.c.do(func(drv gpu.Driver) error { return drv.MemcpyAsync(dst, src, n, x.stream) })
	return x.err
}

// Finish waits for the queued copies and frees the stream and events; it
// returns the first error of the sequence.
func (x *Copy) Finish() error {
	err := x.c.do(func(drv gpu.Driver) error {
		ev, err := drv.EventCreate()
		if err != nil {
			return err
		}
		x.events = append(x.events, ev)
		if err := drv.EventRecord(ev, x.stream); err != nil {
			return err
		}
		return drv.EventSynchronize(ev)
	})
	return errors.Join(x.err, err, x.release())
}

// release destroys the stream and events.
func (x *Copy) release() error {
	return x.c.do(func(drv gpu.Driver) error {
		var errs []error
		for _, ev := range x.events {
			errs = append(errs, drv.EventDestroy(ev))
		}
		if x.stream != 0 {
			errs = append(errs, drv.StreamDestroy(x.stream))
		}
		x.events, x.stream = nil, 0
		return errors.Join(errs...)
	})
}
