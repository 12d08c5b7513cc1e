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

// workspace holds what every communicator working in one CUDA context
// shares: the reduction kernels (compiled once), the pool of pinned
// staging segments, the IPC handles of this process's allocations and
// the mappings of other processes' allocations. Executors acquire it and
// release it; the last release frees everything.
type workspace struct {
	rt  *gpu.Runtime
	drv gpu.Driver
	ctx gpu.Context
	dev int    // the context's device ordinal
	bus string // and its PCI bus id
	// retained: ctx is the device's primary context, retained by the
	// workspace for its lifetime (cuDevicePrimaryCtxRetain), so that the
	// application's release of its own reference cannot destroy it under
	// the workspace's streams, memory and module.
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
	// failed: allocations of other processes this one could not map,
	// and when: staged until retryOpen has passed, then tried again. One
	// allocation that cannot be mapped never stages another, nor a GPU's
	// for good.
	failed  map[failedKey]time.Time
	sweeper *time.Timer // closes idle mappings (sweepIdle); nil when none is due
	sweepMu sync.Mutex  // held by a sweep and by release's teardown

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

// retryOpen is how long an allocation that could not be mapped stays
// staged before the next transfer from it tries again.
var retryOpen = time.Second

// failedKey names an allocation that could not be mapped: a new
// allocation at its address (a new buffer id) is another.
type failedKey struct {
	src ipcSource
	buf uint64
}

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
	// Log, if set, receives what the executor says under
	// GOCOLL_DEBUG=info (an allocation that cannot be mapped, ...).
	Log io.Writer
	// Crowded says the node has no core to spare for each of its ranks
	// (as many ranks as CPUs, or more): a host wait for the GPU then
	// polls only briefly before it backs off, so that the rank whose
	// work it waits for (or, on the fake driver, the GPU itself) can run.
	Crowded bool
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

type workspaceKey struct {
	rt  *gpu.Runtime
	ctx gpu.Context
	dev int
}

var workspaces = struct {
	sync.Mutex
	m map[workspaceKey]*workspace
}{m: map[workspaceKey]*workspace{}}

// acquire returns the workspace of the context that holds mem, making it at
// first use. The caller's OS thread is locked.
//
// A new workspace retains the device's primary context when that is its
// context (from the buffer's attributes, else the thread's current one,
// else the primary context itself), and releases it with the workspace. A
// context the application created (cuCtxCreate) is not retained: the
// driver has no reference count for it, and it is the application's to
// keep alive until it is done with gocoll.
func acquire(rt *gpu.Runtime, mem gpu.Memory, opts Options) (*workspace, error) {
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
	key := workspaceKey{rt, ctx, mem.Device}
	workspaces.Lock()
	defer workspaces.Unlock()
	if w := workspaces.m[key]; w != nil {
		w.mu.Lock()
		w.refs++
		w.mu.Unlock()
		return w, nil
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
	w := &workspace{rt: rt, drv: drv, ctx: ctx, dev: mem.Device, retained: retained, opts: opts.withDefaults(), refs: 1,
		fns: map[string]gpu.Function{}, handles: map[uint64]ipcOut{}, mappings: map[ipcSource]*ipcIn{},
		failed: map[failedKey]time.Time{}}
	w.bus, _ = drv.DevicePCIBusID(mem.Device)
	workspaces.m[key] = w
	return w, nil
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

// release drops a reference; the last one frees the workspace's resources.
func (w *workspace) release() error {
	workspaces.Lock()
	w.mu.Lock()
	w.refs--
	last := w.refs == 0
	w.mu.Unlock()
	if last {
		for k, v := range workspaces.m {
			if v == w {
				delete(workspaces.m, k)
			}
		}
	}
	workspaces.Unlock()
	if !last {
		return nil
	}
	w.stopSweeps()
	defer w.sweepMu.Unlock()
	var errs []error
	if leave, err := w.enter(); err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, w.free())
		leave()
	}
	if w.retained { // last, once nothing of the workspace's is left in the context
		errs = append(errs, w.drv.PrimaryContextRelease(w.dev))
	}
	return errors.Join(errs...)
}

// free frees the workspace's mappings, pinned memory and module, in its
// context.
func (w *workspace) free() error {
	var errs []error
	for h, m := range w.mappings {
		errs = append(errs, w.drv.IpcCloseMemHandle(m.ptr))
		delete(w.mappings, h)
	}
	for _, p := range w.pinned {
		errs = append(errs, w.drv.MemFreeHost(p))
	}
	w.pinned, w.slots = nil, nil
	if w.module != 0 {
		errs = append(errs, w.drv.ModuleUnload(w.module))
		w.module = 0
	}
	return errors.Join(errs...)
}

// enter locks the goroutine to its OS thread and makes the workspace's
// context current there; leave restores the thread's context and
// unlocks. Every goroutine that calls the driver enters first.
func (w *workspace) enter() (leave func(), err error) {
	runtime.LockOSThread()
	prev, err := w.drv.CurrentContext()
	if err == nil && prev != w.ctx {
		err = w.drv.SetCurrentContext(w.ctx)
	}
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	return func() {
		if prev != w.ctx {
			w.drv.SetCurrentContext(prev)
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

// logf says something under GOCOLL_DEBUG=info.
func (w *workspace) logf(format string, a ...any) {
	if w.opts.Log != nil {
		fmt.Fprintf(w.opts.Log, "gocoll: "+format+"\n", a...)
	}
}

// warnOutput is where the warnings of a workspace go; warned holds the
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
func (w *workspace) function(name string) (gpu.Function, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if f, ok := w.fns[name]; ok {
		return f, nil
	}
	if w.moduleErr != nil {
		return 0, w.moduleErr
	}
	if w.module == 0 {
		m, err := w.drv.ModuleLoadData(gpu.PTX())
		if err != nil {
			warnNoKernels(w.rt, err)
			w.moduleErr = &errNoKernels{err}
			return 0, w.moduleErr
		}
		w.module = m
	}
	f, err := w.drv.ModuleGetFunction(w.module, name)
	if err != nil {
		return 0, err
	}
	w.fns[name] = f
	return f, nil
}

// getSlots returns n pinned segments, allocating what the pool lacks.
func (w *workspace) getSlots(n int) ([]uintptr, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]uintptr, 0, n)
	for len(out) < n {
		if k := len(w.slots); k > 0 {
			out = append(out, w.slots[k-1])
			w.slots = w.slots[:k-1]
			continue
		}
		p, err := w.drv.MemHostAlloc(w.opts.Segment)
		if err != nil {
			w.slots = append(w.slots, out...)
			return nil, fmt.Errorf("pinned staging memory: %w", err)
		}
		w.pinned = append(w.pinned, p)
		out = append(out, p)
	}
	return out, nil
}

func (w *workspace) putSlots(s []uintptr) {
	w.mu.Lock()
	w.slots = append(w.slots, s...)
	w.mu.Unlock()
}

// handle returns the IPC handle of the allocation mem, asked for once
// per allocation; false when the allocation cannot be shared (managed
// memory, memory pools). The cache is keyed by base address and holds the
// buffer id: a new allocation at a freed one's address (cudaMalloc often
// reuses it) has a new buffer id and gets its own handle. Without a buffer
// id allocations cannot be told apart, and the handle is asked for at
// every call.
func (w *workspace) handle(mem gpu.Memory) (gpu.IPCHandle, bool) {
	if mem.Kind != gpu.Device {
		return gpu.IPCHandle{}, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	key := uint64(mem.Base)
	if h, ok := w.handles[key]; ok && mem.BufferID != 0 && h.buf == mem.BufferID {
		return h.h, h.ok
	}
	h, err := w.drv.IpcGetMemHandle(mem.Base)
	if mem.BufferID == 0 {
		delete(w.handles, key)
		return h, err == nil
	}
	if len(w.handles) >= maxHandles {
		clear(w.handles)
	}
	w.handles[key] = ipcOut{mem.BufferID, h, err == nil}
	return h, err == nil
}

// forgetHandle drops the cached handle of an allocation being freed.
func (w *workspace) forgetHandle(mem gpu.Memory) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.handles, uint64(mem.Base))
}

// open maps the allocation a descriptor names (see the mapping policy
// above) and returns its address here; done must be called once the
// copy from it has ended.
func (w *workspace) open(d descriptor) (ptr uintptr, done func(), err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := clock()
	fk := failedKey{ipcSource{d.rt, d.base}, d.buf}
	if at, ok := w.failed[fk]; ok {
		if now.Sub(at) < retryOpen {
			return 0, nil, fmt.Errorf("an allocation of device %s could not be mapped here %v ago (retried after %v)", d.bus, now.Sub(at).Round(time.Millisecond), retryOpen)
		}
		delete(w.failed, fk)
	}
	w.lru++
	src := ipcSource{d.rt, d.base}
	m, ok := w.mappings[src]
	if ok && (m.buf != d.buf || m.h != d.handle) {
		w.unmapLocked(src, m) // the sender freed it: a new allocation is at its base
		ok = false
	}
	if ok {
		m.busy++ // before the sweep, which leaves busy mappings alone
	}
	w.sweepLocked(now)
	if !ok {
		p, err := w.drv.IpcOpenMemHandle(d.handle)
		if err != nil {
			if len(w.failed) >= maxMappings {
				clear(w.failed)
			}
			w.failed[fk] = now
			w.logf("an allocation of device %s (%d bytes at %#x in process %x) cannot be mapped here: %v; transfers from it are staged, retried after %v",
				d.bus, d.len, d.base, d.rt, err, retryOpen)
			return 0, nil, err
		}
		m = &ipcIn{ptr: p, buf: d.buf, h: d.handle, busy: 1}
		w.mappings[src] = m
		if w.sweeper == nil {
			w.sweeper = time.AfterFunc(maxIdle, w.sweepIdle)
		}
	}
	m.used, m.at = w.lru, now
	return m.ptr, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if m.busy--; m.busy == 0 && m.stale {
			w.drv.IpcCloseMemHandle(m.ptr)
		}
	}, nil
}

// unmapLocked drops a mapping and closes it, or leaves the closing to
// its last copy; e.mu is held.
func (w *workspace) unmapLocked(src ipcSource, m *ipcIn) {
	delete(w.mappings, src)
	if m.busy > 0 {
		m.stale = true
		return
	}
	w.drv.IpcCloseMemHandle(m.ptr)
}

// sweepLocked closes the mappings unused for maxIdle, then the least
// recently used ones beyond maxMappings - 1 (room for one more); e.mu is
// held.
func (w *workspace) sweepLocked(now time.Time) {
	for src, m := range w.mappings {
		if m.busy == 0 && now.Sub(m.at) >= maxIdle {
			w.unmapLocked(src, m)
		}
	}
	for len(w.mappings) >= maxMappings {
		var oldest ipcSource
		var victim *ipcIn
		for src, m := range w.mappings {
			if m.busy == 0 && (victim == nil || m.used < victim.used) {
				oldest, victim = src, m
			}
		}
		if victim == nil {
			return // every one is in use
		}
		w.unmapLocked(oldest, victim)
	}
}

// stopSweeps waits for a sweep in progress and stops the timer; later
// sweeps find the workspace released. The caller unlocks w.sweepMu once the
// mappings are closed.
func (w *workspace) stopSweeps() {
	w.sweepMu.Lock()
	w.mu.Lock()
	if w.sweeper != nil {
		w.sweeper.Stop()
		w.sweeper = nil
	}
	w.mu.Unlock()
}

// sweepIdle is the timer's sweep: it closes the mappings unused for
// maxIdle, from a thread of its own, and comes back while any are open.
func (w *workspace) sweepIdle() {
	w.sweepMu.Lock()
	defer w.sweepMu.Unlock()
	w.mu.Lock()
	w.sweeper = nil
	live := w.refs > 0
	w.mu.Unlock()
	if !live {
		return // released: release closes everything
	}
	leave, err := w.enter()
	w.mu.Lock()
	defer w.mu.Unlock()
	now := clock()
	if err == nil {
		defer leave()
		w.sweepLocked(now)
	}
	if len(w.mappings) > 0 && w.sweeper == nil {
		// Next when the first one left falls idle, or a little later.
		next := maxIdle
		for _, m := range w.mappings {
			if d := m.at.Add(maxIdle).Sub(now); m.busy == 0 && d < next {
				next = d
			}
		}
		w.sweeper = time.AfterFunc(max(next, maxIdle/8), w.sweepIdle)
	}
}
