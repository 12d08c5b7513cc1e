package device

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/gocoll/gocoll/gpu"
)

// Engine holds what every communicator working in one CUDA context
// shares: the reduction kernels (compiled once), the pool of pinned
// staging segments, the IPC handles of this process's allocations and
// the mappings of other processes' allocations. Executors acquire it and
// release it; the last release frees everything.
type Engine struct {
	rt  *gpu.Runtime
	drv gpu.Driver
	ctx gpu.Context
	dev int    // the context's device ordinal
	bus string // and its PCI bus id
	// retained: ctx is the device's primary context, retained by the
	// engine for its lifetime (cuDevicePrimaryCtxRetain), so that the
	// application's release of its own reference cannot destroy it under
	// the engine's streams, memory and module.
	retained bool
	opts     Options

	mu       sync.Mutex
	refs     int
	module   gpu.Module
	fns      map[string]gpu.Function
	slots    []uintptr         // free pinned segments, Options.Segment bytes each
	pinned   []uintptr         // every pinned segment
	handles  map[uint64]ipcOut // this process's allocations, by base address
	mappings map[ipcSource]*ipcIn
	lru      uint64
	badPeer  map[string]bool // device bus ids whose handles cannot be opened here
	sweeper  *time.Timer     // closes idle mappings (sweepIdle); nil when none is due
	sweepMu  sync.Mutex      // held by a sweep and by release's teardown

	// moduleErr: the module failed to load (an *errNoKernels), and
	// reductions run on the host.
	moduleErr error
}

type ipcOut struct {
	buf uint64 // the allocation's buffer id
	h   gpu.IPCHandle
	ok  bool // false: the allocation has no handle (pool or VMM memory)
}

// ipcSource names another process's allocation: that process's runtime
// ID and the allocation's base address there.
type ipcSource struct {
	rt   uint64
	base uint64
}

type ipcIn struct {
	ptr   uintptr
	buf   uint64 // the sender's buffer id
	h     gpu.IPCHandle
	used  uint64    // e.lru at the last use
	at    time.Time // the last use
	busy  int       // copies from it in flight
	stale bool      // out of e.mappings while busy: closed by the last copy's done
}

// The mapping policy. Another process's allocation is mapped once and
// reused while the sender's descriptors name the same allocation: the
// same base, buffer id and handle. CUDA often gives a freed allocation's
// address to the next one, with a new buffer id and handle, so a
// descriptor naming a known base with another buffer id means the mapped
// allocation was freed: its mapping is closed at once. (CUDA calls the
// owner's cuMemFree of memory another process still maps undefined
// behaviour; in practice the driver keeps the memory alive until the last
// mapping closes. The application frees without knowing of gocoll's
// mappings, so the window is kept short instead.) A freed allocation whose
// address is not reused is not seen to go, so mappings are also closed
// when unused for maxIdle (a timer, and every open, sweeps them) and,
// beyond maxMappings, the least recently used first: the memory of a
// freed buffer is held at most about maxIdle (plus an eighth) after its
// last transfer. A mapping in use by a copy is closed when the
// copy ends.
const maxMappings = 256

// maxIdle is how long an unused mapping stays open; reopening costs one
// cuIpcOpenMemHandle per maxIdle per buffer at most.
var maxIdle = 2 * time.Second

// clock is the time of the mapping policy (tests move it).
var clock = time.Now

// maxHandles bounds the sender's handle cache; when full it starts again
// empty (a handle holds no memory: it is only asked for again).
const maxHandles = 1024

// Options tune the device executor. Segment must be the same on every
// rank of a job: staged messages travel in segments of that size.
type Options struct {
	// Segment is the size of a staging segment in bytes (default 1 MiB).
	Segment int
	// Depth is the number of segments of one transfer in flight (default 4).
	Depth int
	// Block is the threads per block of a reduction kernel (default 256),
	// MaxGrid the most blocks of one launch (default 4096).
	Block, MaxGrid int
}

// DefaultSegment is Options.Segment's default.
const DefaultSegment = 1 << 20

func (o Options) withDefaults() Options {
	if o.Segment <= 0 {
		o.Segment = DefaultSegment
	}
	if o.Depth <= 0 {
		o.Depth = 4
	}
	if o.Block <= 0 {
		o.Block = 256
	}
	if o.MaxGrid <= 0 {
		o.MaxGrid = 4096
	}
	return o
}

type engineKey struct {
	rt  *gpu.Runtime
	ctx gpu.Context
	dev int
}

var engines = struct {
	sync.Mutex
	m map[engineKey]*Engine
}{m: map[engineKey]*Engine{}}

// acquire returns the engine of the context that holds mem, making it at
// first use. The caller's OS thread is locked.
//
// A new engine retains the device's primary context when that is its
// context (from the buffer's attributes, else the thread's current one,
// else the primary context itself), and releases it with the engine. A
// context the application created (cuCtxCreate) is not retained: the
// driver has no reference count for it, and it is the application's to
// keep alive until it is done with gocoll.
func acquire(rt *gpu.Runtime, mem gpu.Memory, opts Options) (*Engine, error) {
	drv := rt.Driver()
	ctx, retained := mem.Context, false
	if ctx == 0 {
		// Some memory (VMM, pools) reports no context: use the thread's,
		// else the device's primary context.
		cur, err := drv.CurrentContext()
		if err != nil {
			return nil, err
		}
		ctx = cur
	}
	key := engineKey{rt, ctx, mem.Device}
	engines.Lock()
	defer engines.Unlock()
	if e := engines.m[key]; e != nil {
		e.mu.Lock()
		e.refs++
		e.mu.Unlock()
		return e, nil
	}
	if ctx == 0 {
		c, err := drv.PrimaryContextRetain(mem.Device)
		if err != nil {
			return nil, err
		}
		ctx, retained = c, true
	} else {
		retained = retainIfPrimary(drv, ctx, mem.Device)
	}
	e := &Engine{rt: rt, drv: drv, ctx: ctx, dev: mem.Device, retained: retained, opts: opts.withDefaults(), refs: 1,
		fns: map[string]gpu.Function{}, handles: map[uint64]ipcOut{}, mappings: map[ipcSource]*ipcIn{},
		badPeer: map[string]bool{}}
	e.bus, _ = drv.DevicePCIBusID(mem.Device)
	engines.m[key] = e
	return e, nil
}

// retainIfPrimary retains device dev's primary context if it is ctx, and
// reports whether it did. An inactive primary context cannot be ctx (a
// buffer's context exists), and retaining it would create one, so it is
// not asked for; the retain of a primary context that is not ctx is
// released at once.
func retainIfPrimary(drv gpu.Driver, ctx gpu.Context, dev int) bool {
	if on, err := drv.PrimaryContextActive(dev); err != nil || !on {
		return false
	}
	c, err := drv.PrimaryContextRetain(dev)
	if err != nil {
		return false
	}
	if c != ctx {
		drv.PrimaryContextRelease(dev)
		return false
	}
	return true
}

// release drops a reference; the last one frees the engine's resources.
func (e *Engine) release() error {
	engines.Lock()
	e.mu.Lock()
	e.refs--
	last := e.refs == 0
	e.mu.Unlock()
	if last {
		for k, v := range engines.m {
			if v == e {
				delete(engines.m, k)
			}
		}
	}
	engines.Unlock()
	if !last {
		return nil
	}
	e.stopSweeps()
	defer e.sweepMu.Unlock()
	var errs []error
	if leave, err := e.enter(); err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, e.free())
		leave()
	}
	if e.retained { // last, once nothing of the engine's is left in the context
		errs = append(errs, e.drv.PrimaryContextRelease(e.dev))
	}
	return errors.Join(errs...)
}

// free frees the engine's mappings, pinned memory and module, in its
// context.
func (e *Engine) free() error {
	var errs []error
	for h, m := range e.mappings {
		errs = append(errs, e.drv.IpcCloseMemHandle(m.ptr))
		delete(e.mappings, h)
	}
	for _, p := range e.pinned {
		errs = append(errs, e.drv.MemFreeHost(p))
	}
	e.pinned, e.slots = nil, nil
	if e.module != 0 {
		errs = append(errs, e.drv.ModuleUnload(e.module))
		e.module = 0
	}
	return errors.Join(errs...)
}

// enter locks the goroutine to its OS thread and makes the engine's
// context current there; leave restores the thread's context and
// unlocks. Every goroutine that calls the driver enters first.
func (e *Engine) enter() (leave func(), err error) {
	runtime.LockOSThread()
	prev, err := e.drv.CurrentContext()
	if err == nil && prev != e.ctx {
		err = e.drv.SetCurrentContext(e.ctx)
	}
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	return func() {
		if prev != e.ctx {
			e.drv.SetCurrentContext(prev)
		}
		runtime.UnlockOSThread()
	}, nil
}

// errNoKernels wraps the driver's error when gocoll's PTX module cannot
// be loaded: reductions then run on the host.
type errNoKernels struct{ err error }

func (e *errNoKernels) Error() string {
	return "the CUDA driver cannot load gocoll's reduction kernels: " + e.err.Error()
}

func (e *errNoKernels) Unwrap() error { return e.err }

// warnOutput is where the warnings of an engine go; warned holds the
// runtimes (processes, outside tests) that printed theirs.
var (
	warnMu     sync.Mutex
	warnOutput io.Writer = os.Stderr
	warned               = map[*gpu.Runtime]bool{}
)

// warnNoKernels says once per runtime that reductions on device buffers
// run on the host, and why.
func warnNoKernels(rt *gpu.Runtime, err error) {
	warnMu.Lock()
	defer warnMu.Unlock()
	if warned[rt] {
		return
	}
	warned[rt] = true
	fmt.Fprintf(warnOutput, "gocoll: warning: %v; reductions on device buffers run on the host instead (slower, results the same)\n", &errNoKernels{err})
}

// function returns a reduction kernel, compiling the module at first use.
// When the driver cannot load the module (no PTX JIT, JIT disabled, a
// driver older than the PTX) it warns once and returns an *errNoKernels
// from then on, without asking the driver again: the caller reduces on
// the host.
func (e *Engine) function(name string) (gpu.Function, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if f, ok := e.fns[name]; ok {
		return f, nil
	}
	if e.moduleErr != nil {
		return 0, e.moduleErr
	}
	if e.module == 0 {
		m, err := e.drv.ModuleLoadData(gpu.PTX())
		if err != nil {
			warnNoKernels(e.rt, err)
			e.moduleErr = &errNoKernels{err}
			return 0, e.moduleErr
		}
		e.module = m
	}
	f, err := e.drv.ModuleGetFunction(e.module, name)
	if err != nil {
		return 0, err
	}
	e.fns[name] = f
	return f, nil
}

// getSlots returns n pinned segments, allocating what the pool lacks.
func (e *Engine) getSlots(n int) ([]uintptr, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]uintptr, 0, n)
	for len(out) < n {
		if k := len(e.slots); k > 0 {
			out = append(out, e.slots[k-1])
			e.slots = e.slots[:k-1]
			continue
		}
		p, err := e.drv.MemHostAlloc(e.opts.Segment)
		if err != nil {
			e.slots = append(e.slots, out...)
			return nil, fmt.Errorf("pinned staging memory: %w", err)
		}
		e.pinned = append(e.pinned, p)
		out = append(out, p)
	}
	return out, nil
}

func (e *Engine) putSlots(s []uintptr) {
	e.mu.Lock()
	e.slots = append(e.slots, s...)
	e.mu.Unlock()
}

// handle returns the IPC handle of the allocation mem, asked for once
// per allocation; false when the allocation cannot be shared (managed
// memory, memory pools). The cache is keyed by base address and holds the
// buffer id: a new allocation at a freed one's address (cudaMalloc often
// reuses it) has a new buffer id and gets its own handle. Without a buffer
// id allocations cannot be told apart, and the handle is asked for at
// every call.
func (e *Engine) handle(mem gpu.Memory) (gpu.IPCHandle, bool) {
	if mem.Kind != gpu.Device {
		return gpu.IPCHandle{}, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	key := uint64(mem.Base)
	if h, ok := e.handles[key]; ok && mem.BufferID != 0 && h.buf == mem.BufferID {
		return h.h, h.ok
	}
	h, err := e.drv.IpcGetMemHandle(mem.Base)
	if mem.BufferID == 0 {
		delete(e.handles, key)
		return h, err == nil
	}
	if len(e.handles) >= maxHandles {
		clear(e.handles)
	}
	e.handles[key] = ipcOut{mem.BufferID, h, err == nil}
	return h, err == nil
}

// forgetHandle drops the cached handle of an allocation being freed.
func (e *Engine) forgetHandle(mem gpu.Memory) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.handles, uint64(mem.Base))
}

// open maps the allocation a descriptor names (see the mapping policy
// above) and returns its address here; done must be called once the
// copy from it has ended.
func (e *Engine) open(d descriptor) (ptr uintptr, done func(), err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.badPeer[d.bus] {
		return 0, nil, fmt.Errorf("device %s cannot be reached from this process", d.bus)
	}
	now := clock()
	e.lru++
	src := ipcSource{d.rt, d.base}
	m, ok := e.mappings[src]
	if ok && (m.buf != d.buf || m.h != d.handle) {
		e.unmapLocked(src, m) // the sender freed it: a new allocation is at its base
		ok = false
	}
	if ok {
		m.busy++ // before the sweep, which leaves busy mappings alone
	}
	e.sweepLocked(now)
	if !ok {
		p, err := e.drv.IpcOpenMemHandle(d.handle)
		if err != nil {
			e.badPeer[d.bus] = true
			return 0, nil, err
		}
		m = &ipcIn{ptr: p, buf: d.buf, h: d.handle, busy: 1}
		e.mappings[src] = m
		if e.sweeper == nil {
			e.sweeper = time.AfterFunc(maxIdle, e.sweepIdle)
		}
	}
	m.used, m.at = e.lru, now
	return m.ptr, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if m.busy--; m.busy == 0 && m.stale {
			e.drv.IpcCloseMemHandle(m.ptr)
		}
	}, nil
}

// unmapLocked drops a mapping and closes it, or leaves the closing to
// its last copy; e.mu is held.
func (e *Engine) unmapLocked(src ipcSource, m *ipcIn) {
	delete(e.mappings, src)
	if m.busy > 0 {
		m.stale = true
		return
	}
	e.drv.IpcCloseMemHandle(m.ptr)
}

// sweepLocked closes the mappings unused for maxIdle, then the least
// recently used ones beyond maxMappings - 1 (room for one more); e.mu is
// held.
func (e *Engine) sweepLocked(now time.Time) {
	for src, m := range e.mappings {
		if m.busy == 0 && now.Sub(m.at) >= maxIdle {
			e.unmapLocked(src, m)
		}
	}
	for len(e.mappings) >= maxMappings {
		var oldest ipcSource
		var victim *ipcIn
		for src, m := range e.mappings {
			if m.busy == 0 && (victim == nil || m.used < victim.used) {
				oldest, victim = src, m
			}
		}
		if victim == nil {
			return // every one is in use
		}
		e.unmapLocked(oldest, victim)
	}
}

// stopSweeps waits for a sweep in progress and stops the timer; later
// sweeps find the engine released. The caller unlocks e.sweepMu once the
// mappings are closed.
func (e *Engine) stopSweeps() {
	e.sweepMu.Lock()
	e.mu.Lock()
	if e.sweeper != nil {
		e.sweeper.Stop()
		e.sweeper = nil
	}
	e.mu.Unlock()
}

// sweepIdle is the timer's sweep: it closes the mappings unused for
// maxIdle, from a thread of its own, and comes back while any are open.
func (e *Engine) sweepIdle() {
	e.sweepMu.Lock()
	defer e.sweepMu.Unlock()
	e.mu.Lock()
	e.sweeper = nil
	live := e.refs > 0
	e.mu.Unlock()
	if !live {
		return // released: release closes everything
	}
	leave, err := e.enter()
	e.mu.Lock()
	defer e.mu.Unlock()
	now := clock()
	if err == nil {
		defer leave()
		e.sweepLocked(now)
	}
	if len(e.mappings) > 0 && e.sweeper == nil {
		// Next when the first one left falls idle, or a little later.
		next := maxIdle
		for _, m := range e.mappings {
			if d := m.at.Add(maxIdle).Sub(now); m.busy == 0 && d < next {
				next = d
			}
		}
		e.sweeper = time.AfterFunc(max(next, maxIdle/8), e.sweepIdle)
	}
}
