// Package fake is a CUDA driver made of host memory and goroutines, for
// running gocoll's device code paths end to end on machines without a GPU.
//
// A Machine is a node: its devices, their memory and the registry of IPC
// handles. Each Process on it is one process's driver (a gpu.Driver), with
// its own contexts, streams, events and modules; the ranks of a test job
// are Processes of one Machine, so that IPC handles made by one can be
// opened by another, as on a real node.
//
// It is strict where that finds bugs:
//   - device memory lives at addresses the CPU cannot touch (a PROT_NONE
//     reservation); the bytes are kept elsewhere and reached only through
//     the driver's calls, so code that reads or writes device memory
//     directly faults at once;
//   - streams run asynchronously, each on its own goroutine, optionally
//     with random delays (Options.Jitter), so a missing event or wait
//     shows up as a wrong result;
//   - calls that need a context fail with CUDA_ERROR_INVALID_CONTEXT
//     unless the calling OS thread has one current;
//   - every call is counted (Stats), so tests can see which path ran:
//     kernel launches by name, copies by direction, IPC opens and closes;
//     and every gpu.Driver call by method name, per process
//     (Process.Calls) and for the node (Stats.Calls);
//   - a kernel launched on an operand not aligned for its element type
//     fails with CUDA_ERROR_MISALIGNED_ADDRESS, and, as on a GPU, the
//     error is sticky: every later call in that context fails;
//   - a primary context lives while someone holds it: the application
//     (AppInit to AppRelease) or a retain (PrimaryContextRetain); calls in
//     it fail with CUDA_ERROR_CONTEXT_IS_DESTROYED once nobody does;
//   - freed address ranges are reused by their process, the last freed
//     first (as cudaMalloc after cudaFree often returns the same
//     address), each allocation with a new buffer id and new IPC
//     handles, so a cache that trusts an
//     address gets the wrong memory; freed memory is unreachable, except
//     through the IPC mappings other processes still hold, which keep it
//     alive until they close it, as the real driver does in practice (CUDA's
//     documentation calls such a free undefined behaviour; FreedMapped
//     counts those mappings).
//
// Default streams: StreamLegacy names a context's legacy default stream
// and StreamPerThread the calling thread's per-thread default stream in
// the context, each a stream of its own, so that AppWriteAsync can play
// application work queued there and tests can see whether gocoll waits
// for it. Not modelled: the implicit synchronisation of the legacy
// stream with blocking streams (the fake's streams are all non-blocking,
// as gocoll's are). The NULL stream (0) is refused, although the driver
// takes it as the legacy stream: gocoll never means it, and a zero handle
// is the sign of a stream never made.
//
// Kernels: ModuleLoadData checks the PTX as package fake's ParsePTX does
// and keeps its entries; a launch of gocoll_<op>_<type> runs package ops'
// kernel of the same op and type on the device bytes, and one of a peer
// kernel (gpu.PeerKernel) reads its arrays of addresses from device
// memory at its turn on the stream and reduces with
// ops.CanonicalReduce. A launch with another number of parameters than
// the entry declares is refused (the driver cannot tell).
//
// Stream memory operations: StreamWriteValue32 stores a word at its turn
// on the stream; StreamWaitValue32 holds its stream's goroutine (only
// that stream) until the word, read atomically, compares as the driver's
// GEQ does, in device memory of any process of the node (IPC mappings)
// or page-locked host memory. A wait still unsatisfied after
// Options.WaitTimeout fails with CUDA_ERROR_LAUNCH_TIMEOUT and loses the
// context, instead of hanging the test as a GPU would hang the
// application.
package fake

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/ops"
)

// Options describe a fake node.
type Options struct {
	// Devices is the number of GPUs (default 1).
	Devices int
	// NoPeerAccess makes every pair of distinct devices unable to reach
	// each other (cuDeviceCanAccessPeer false; opening an IPC handle of
	// another device fails).
	NoPeerAccess bool
	// Jitter, when set, delays each stream operation by a random time up
	// to it.
	Jitter time.Duration
	// ModuleLoadError, when not 0, is the CUresult every ModuleLoadData
	// fails with: a driver whose PTX JIT is missing, disabled
	// (gpu.ErrorJITCompilationDisabled) or too old for the module.
	ModuleLoadError int
	// WaitTimeout is how long a StreamWaitValue32 waits on its stream
	// before it fails (CUDA_ERROR_LAUNCH_TIMEOUT, sticky), where a GPU
	// would hang; 0 is DefaultWaitTimeout.
	WaitTimeout time.Duration
	// NoStreamMemOps plays a driver whose stream memory operations are
	// off (gpu.DeviceAttrStreamMemOps 0): StreamWriteValue32 and
	// StreamWaitValue32 fail with CUDA_ERROR_NOT_SUPPORTED.
	NoStreamMemOps bool
	// Multiprocessors is gpu.DeviceAttrMultiprocessorCount (default 132).
	Multiprocessors int
}

// Machine is a fake node.
type Machine struct {
	opts Options
	id   uint32

	mu      sync.RWMutex
	maps    []*mapping // sorted by va: device allocations and IPC mappings
	allocID uint64
	procs   int

	statsMu sync.Mutex
	stats   Stats

	refused map[uint64]bool // allocations whose IPC handles do not open (RefuseIPCOpen)
}

// RefuseIPCOpen makes every later cuIpcOpenMemHandle of the allocation
// based at base fail (CUDA_ERROR_PEER_ACCESS_UNSUPPORTED), as a handle
// of memory another process cannot map does, in whatever process opens
// it: for tests that one unmappable allocation stages only itself.
func (m *Machine) RefuseIPCOpen(base uintptr) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, mp := range m.maps {
		if mp.va == base && !mp.alias {
			if m.refused == nil {
				m.refused = map[uint64]bool{}
			}
			m.refused[mp.a.id] = true
			return
		}
	}
	panic(fmt.Sprintf("fake: RefuseIPCOpen: %#x is not the base of an allocation", base))
}

// mapping is a range of device addresses and the bytes behind it.
type mapping struct {
	va    uintptr
	size  int
	a     *allocation
	proc  *Process // the process that allocated or opened it
	alias bool     // an IPC mapping of another process's allocation
	refs  int      // IPC opens of the same handle by proc
	id    uint64   // buffer id
}

type allocation struct {
	id      uint64
	data    []byte
	dev     int // machine device index
	managed bool
	freed   bool // by its owner: reachable only through IPC mappings still open
	owner   *Process
	ctx     gpu.Context // a context the application created (CtxCreate); 0: the device's primary context
}

// span is a freed range of device addresses, page-aligned.
type span struct {
	va   uintptr
	size uintptr
}

// Stats counts what the fake did.
type Stats struct {
	Launches                     map[string]int // kernel launches by entry name
	Elements                     map[string]int // elements reduced, by entry name
	HtoD, DtoH, DtoD, HtoH       int            // cuMemcpyAsync calls by direction
	BytesHtoD, BytesDtoH         int64
	BytesDtoD                    int64
	IPCGets, IPCOpens, IPCCloses int
	PointerQueries               int
	ModuleLoads                  int
	// Calls counts the gpu.Driver calls of every process of the node by
	// method name; Process.Calls counts one process's.
	Calls Calls
}

// Calls counts gpu.Driver calls by method name ("Launch",
// "StreamWaitValue32", ...), failed calls included. The methods that play
// the application (AppInit, Malloc, Write, ...) are not driver calls.
type Calls map[string]int

// Total returns the number of calls of every method.
func (c Calls) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// Sub returns the calls in c that are not in before, a copy taken
// earlier: what was called in between.
func (c Calls) Sub(before Calls) Calls {
	d := Calls{}
	for k, v := range c {
		if v -= before[k]; v != 0 {
			d[k] = v
		}
	}
	return d
}

// The device address space of every fake machine: one reservation the
// CPU may not touch. Each process reuses the ranges it freed (Process.reserve)
// before taking new ones here.
var space struct {
	sync.Mutex
	base, next, end uintptr
}

const spaceSize = 1 << 36

func reserve(n int) uintptr {
	space.Lock()
	defer space.Unlock()
	if space.base == 0 {
		b, err := syscall.Mmap(-1, 0, spaceSize, syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
		if err != nil {
			panic(fmt.Sprintf("fake: cannot reserve device address space: %v", err))
		}
		space.base = uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		space.next, space.end = space.base, space.base+spaceSize
	}
	p := space.next
	space.next += pages(n)
	if space.next > space.end {
		panic("fake: device address space exhausted")
	}
	return p
}

// pages rounds an allocation of n bytes up to whole pages.
func pages(n int) uintptr { return (uintptr(max(n, 1)) + 4095) &^ 4095 }

// reserve returns the address of a new n-byte range of p: the most
// recently freed range of p that is large enough (its start), else a new
// one.
func (p *Process) reserve(n int) uintptr {
	need := pages(n)
	p.spanMu.Lock()
	defer p.spanMu.Unlock()
	for i := len(p.spans) - 1; i >= 0; i-- {
		sp := &p.spans[i]
		if sp.size < need {
			continue
		}
		va := sp.va
		if sp.va, sp.size = sp.va+need, sp.size-need; sp.size == 0 {
			p.spans = slices.Delete(p.spans, i, i+1)
		}
		return va
	}
	return reserve(n)
}

// unreserve gives back the range of a mapping of p that went away.
func (p *Process) unreserve(va uintptr, n int) {
	p.spanMu.Lock()
	p.spans = append(p.spans, span{va, pages(n)})
	p.spanMu.Unlock()
}

func inSpace(p uintptr) bool {
	space.Lock()
	defer space.Unlock()
	return space.base != 0 && p >= space.base && p < space.end
}

var machines atomic.Uint32

// NewMachine returns a fake node.
func NewMachine(opts Options) *Machine {
	if opts.Devices <= 0 {
		opts.Devices = 1
	}
	m := &Machine{opts: opts, id: machines.Add(1)}
	m.stats.Launches, m.stats.Elements, m.stats.Calls = map[string]int{}, map[string]int{}, Calls{}
	return m
}

// BusID returns the PCI bus id of machine device i.
func (m *Machine) BusID(i int) string { return fmt.Sprintf("0000:%02x:00.0", 0x10+i) }

// Stats returns a copy of the counters.
func (m *Machine) Stats() Stats {
	m.statsMu.Lock()
	defer m.statsMu.Unlock()
	s := Stats{
		Launches: map[string]int{}, Elements: map[string]int{},
		HtoD: m.stats.HtoD, DtoH: m.stats.DtoH, DtoD: m.stats.DtoD, HtoH: m.stats.HtoH,
		BytesHtoD: m.stats.BytesHtoD, BytesDtoH: m.stats.BytesDtoH, BytesDtoD: m.stats.BytesDtoD,
		IPCGets: m.stats.IPCGets, IPCOpens: m.stats.IPCOpens, IPCCloses: m.stats.IPCCloses,
		PointerQueries: m.stats.PointerQueries, ModuleLoads: m.stats.ModuleLoads,
		Calls: maps.Clone(m.stats.Calls),
	}
	for k, v := range m.stats.Launches {
		s.Launches[k] = v
	}
	for k, v := range m.stats.Elements {
		s.Elements[k] = v
	}
	return s
}

func (m *Machine) count(f func(s *Stats)) {
	m.statsMu.Lock()
	f(&m.stats)
	m.statsMu.Unlock()
}

// OpenMappings returns the number of IPC mappings still open on the node.
func (m *Machine) OpenMappings() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := 0
	for _, mp := range m.maps {
		if mp.alias {
			n++
		}
	}
	return n
}

// FreedMapped returns the number of IPC mappings still open of
// allocations their owner freed: device memory kept alive for a freed
// buffer.
func (m *Machine) FreedMapped() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := 0
	for _, mp := range m.maps {
		if mp.alias && mp.a.freed {
			n++
		}
	}
	return n
}

// find returns the mapping that holds [p, p+n), or nil.
func (m *Machine) find(p uintptr, n int) *mapping {
	m.mu.RLock()
	defer m.mu.RUnlock()
	i, _ := slices.BinarySearchFunc(m.maps, p, func(mp *mapping, p uintptr) int {
		switch {
		case mp.va+uintptr(mp.size) <= p:
			return -1
		case mp.va > p:
			return 1
		}
		return 0
	})
	if i < len(m.maps) {
		mp := m.maps[i]
		if mp.va <= p && p+uintptr(n) <= mp.va+uintptr(mp.size) {
			return mp
		}
	}
	return nil
}

func (m *Machine) insert(mp *mapping) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, _ := slices.BinarySearchFunc(m.maps, mp.va, func(o *mapping, v uintptr) int {
		if o.va < v {
			return -1
		}
		if o.va > v {
			return 1
		}
		return 0
	})
	m.maps = slices.Insert(m.maps, i, mp)
}

func (m *Machine) remove(mp *mapping) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.maps = slices.DeleteFunc(m.maps, func(o *mapping) bool { return o == mp })
}

// Process is one process's driver on a fake node. It implements
// gpu.Driver; the methods that are not part of it play the application
// (AppInit, Malloc, Write, Read).
type Process struct {
	m       *Machine
	pid     int
	visible []int // process device ordinal -> machine device index

	// The ranges this process freed, the last at the end: a process
	// reuses its own addresses, as each real one has an address space of
	// its own (the fake's processes share one, and so never each other's
	// freed ranges).
	spanMu sync.Mutex
	spans  []span

	mu          sync.Mutex
	initialized bool
	primary     map[int]int // machine device -> retain count (active when > 0 or app-initialised)
	appActive   map[int]bool
	current     map[int]gpu.Context // OS thread id -> current context
	streams     map[gpu.Stream]*stream
	events      map[gpu.Event]*event
	modules     map[gpu.Module]map[string]gpu.Function
	functions   map[gpu.Function]Entry
	pinned      map[uintptr][]byte
	next        uintptr
	asyncErr    error

	callMu sync.Mutex
	calls  Calls

	userCtx  map[gpu.Context]int       // contexts made by CtxCreate -> process ordinal
	sticky   map[gpu.Context]error     // contexts a kernel fault made unusable
	defaults map[defaultStream]*stream // default streams, made at first use
}

// defaultStream names a default stream: the legacy one of a context
// (tid 0) or a thread's per-thread one.
type defaultStream struct {
	ctx gpu.Context
	tid int
}

// NewProcess returns a process on the node that sees the given machine
// devices, in that order (all of them when none are given), as
// CUDA_VISIBLE_DEVICES would.
func (m *Machine) NewProcess(visible ...int) *Process {
	if len(visible) == 0 {
		for i := range m.opts.Devices {
			visible = append(visible, i)
		}
	}
	m.mu.Lock()
	m.procs++
	pid := m.procs
	m.mu.Unlock()
	return &Process{
		m: m, pid: pid, visible: visible,
		primary: map[int]int{}, appActive: map[int]bool{}, current: map[int]gpu.Context{},
		streams: map[gpu.Stream]*stream{}, events: map[gpu.Event]*event{},
		modules: map[gpu.Module]map[string]gpu.Function{}, functions: map[gpu.Function]Entry{},
		pinned: map[uintptr][]byte{}, next: 1,
		userCtx: map[gpu.Context]int{}, sticky: map[gpu.Context]error{}, defaults: map[defaultStream]*stream{},
		calls: Calls{},
	}
}

var _ gpu.Driver = (*Process)(nil)

// Machine returns the node the process runs on.
func (p *Process) Machine() *Machine { return p.m }

// Calls returns a copy of the count of p's gpu.Driver calls by method
// name: a test takes one before and one after what it checks and
// compares them (Calls.Sub, Calls.Total). Machine.Stats().Calls adds up
// every process of the node.
func (p *Process) Calls() Calls {
	p.callMu.Lock()
	defer p.callMu.Unlock()
	return maps.Clone(p.calls)
}

// called counts a call of Driver method name.
func (p *Process) called(name string) {
	p.callMu.Lock()
	p.calls[name]++
	p.callMu.Unlock()
	p.m.count(func(s *Stats) { s.Calls[name]++ })
}

func fail(call string, code int, format string, a ...any) error {
	return gpu.NewError(call, code, fmt.Sprintf(format, a...))
}

// codeOf is the CUresult of a driver error, or def for another error.
func codeOf(err error, def int) int {
	var e *gpu.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return def
}

// poison makes context ctx unusable with err, as a fault in a kernel or
// a stream operation does on a GPU (sticky errors), and records it as the
// process's asynchronous error.
func (p *Process) poison(ctx gpu.Context, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sticky[ctx] == nil {
		p.sticky[ctx] = err
	}
	if p.asyncErr == nil {
		p.asyncErr = err
	}
}

// ctxOf returns the primary context of process ordinal dev.
func (p *Process) ctxOf(dev int) gpu.Context {
	return gpu.Context(uintptr(p.m.id)<<32 | uintptr(p.pid)<<8 | uintptr(dev+1))
}

// devOf returns the process ordinal of one of its contexts, or -1. The
// caller holds p.mu.
func (p *Process) devOf(c gpu.Context) int {
	for d := range p.visible {
		if p.ctxOf(d) == c {
			return d
		}
	}
	if d, ok := p.userCtx[c]; ok {
		return d
	}
	return -1
}

// alive reports whether context c of ordinal d exists: a created one
// always, a primary one while the application or a retain holds it. The
// caller holds p.mu.
func (p *Process) alive(c gpu.Context, d int) bool {
	if _, ok := p.userCtx[c]; ok {
		return true
	}
	md := p.visible[d]
	return p.primary[md] > 0 || p.appActive[md]
}

// ordinal returns the process ordinal of a machine device, or -1.
func (p *Process) ordinal(machineDev int) int {
	return slices.Index(p.visible, machineDev)
}

// need checks that CUDA is initialised and the calling thread has one of
// the process's contexts current, alive and not poisoned by a kernel
// fault, and returns its device ordinal.
func (p *Process) need(call string) (int, error) {
	d, _, err := p.needCtx(call)
	return d, err
}

// needCtx is need, also returning the context.
func (p *Process) needCtx(call string) (int, gpu.Context, error) {
	tid := syscall.Gettid()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.initialized {
		return -1, 0, fail(call, gpu.ErrorNotInitialized, "cuInit was not called")
	}
	c := p.current[tid]
	d := p.devOf(c)
	if d < 0 {
		return -1, 0, fail(call, gpu.ErrorInvalidContext, "no current context on thread %d", tid)
	}
	if !p.alive(c, d) {
		return -1, 0, fail(call, gpu.ErrorContextIsDestroyed, "context %#x: its primary context was released by all", c)
	}
	if err := p.sticky[c]; err != nil {
		return -1, 0, fail(call, codeOf(err, gpu.ErrorMisalignedAddress), "sticky error of context %#x: %v", c, err)
	}
	return d, c, nil
}

// AppInit plays an application that initialises CUDA on device ordinal
// dev and uses it through the runtime API: the driver is initialised and
// dev's primary context is active (but current on no thread of ours).
func (p *Process) AppInit(dev int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.initialized = true
	p.appActive[p.visible[dev]] = true
}

// AppRelease plays the application letting go of device ordinal dev's
// primary context (its cuDevicePrimaryCtxRelease, after AppInit): the
// context is destroyed unless a retain still holds it.
func (p *Process) AppRelease(dev int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.appActive[p.visible[dev]] = false
}

// PrimaryRetains returns the retain count of device ordinal dev's primary
// context (the application's AppInit not included).
func (p *Process) PrimaryRetains(dev int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.primary[p.visible[dev]]
}

// CtxCreate plays cuCtxCreate on device ordinal dev: a context of the
// application's own, not the primary one (current on no thread).
func (p *Process) CtxCreate(dev int) gpu.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.initialized = true
	p.next++
	c := gpu.Context(uintptr(p.m.id)<<40 | uintptr(p.pid)<<24 | 1<<20 | p.next)
	p.userCtx[c] = dev
	return c
}

// MallocIn plays cuMemAlloc in context ctx, one of CtxCreate's.
func (p *Process) MallocIn(ctx gpu.Context, n int) uintptr {
	p.mu.Lock()
	dev, ok := p.userCtx[ctx]
	p.mu.Unlock()
	if !ok {
		panic(fmt.Sprintf("fake: %#x is not a context of CtxCreate", ctx))
	}
	ptr := p.alloc(dev, n, false)
	p.m.find(ptr, 1).a.ctx = ctx
	return ptr
}

// Poisoned returns the sticky error of context ctx, or nil while it is
// usable.
func (p *Process) Poisoned(ctx gpu.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sticky[ctx]
}

// AppWriteAsync plays application work that writes data at device
// address ptr from default stream s (gpu.StreamLegacy, or the calling
// thread's gpu.StreamPerThread) of device ordinal dev's primary context,
// landing after delay: a kernel, or cudaMemcpy from pageable memory that
// returned before its copy landed.
func (p *Process) AppWriteAsync(dev int, s gpu.Stream, ptr uintptr, data []byte, delay time.Duration) {
	st, err := p.defaultStream("AppWriteAsync", p.ctxOf(dev), s)
	if err != nil {
		panic(err)
	}
	data = slices.Clone(data)
	st.enqueue(func() error {
		time.Sleep(delay)
		b, err := p.m.bytes(ptr, len(data))
		if err != nil {
			return err
		}
		copy(b, data)
		return nil
	})
}

// Malloc plays cudaMalloc on device ordinal dev (no context needed).
func (p *Process) Malloc(dev, n int) uintptr { return p.alloc(dev, n, false) }

// MallocManaged plays cudaMallocManaged on device ordinal dev.
func (p *Process) MallocManaged(dev, n int) uintptr { return p.alloc(dev, n, true) }

func (p *Process) alloc(dev, n int, managed bool) uintptr {
	m := p.m
	m.mu.Lock()
	m.allocID++
	// At least 16 bytes of backing (never Go's tiny allocator): the
	// bytes are as aligned as the device addresses, which stream memory
	// operations touch with atomics.
	a := &allocation{id: m.allocID, data: make([]byte, max(n, 1), max(n, 16)), dev: p.visible[dev], managed: managed, owner: p}
	m.mu.Unlock()
	mp := &mapping{va: p.reserve(n), size: max(n, 1), a: a, proc: p, id: a.id}
	m.insert(mp)
	return mp.va
}

// Free plays cudaFree.
func (p *Process) Free(ptr uintptr) error { return p.free("cudaFree", ptr) }

func (p *Process) free(call string, ptr uintptr) error {
	mp := p.m.find(ptr, 1)
	if mp == nil || mp.alias || mp.va != ptr || mp.proc != p {
		return fail(call, gpu.ErrorInvalidValue, "%#x is not an allocation of this process", ptr)
	}
	p.m.mu.Lock()
	mp.a.freed = true
	if !p.m.mappedLocked(mp.a) {
		mp.a.data = nil // nobody holds it: gone
	}
	p.m.mu.Unlock()
	p.m.remove(mp)
	p.unreserve(mp.va, mp.size)
	return nil
}

// mappedLocked reports whether some IPC mapping of a is open; m.mu is held.
func (m *Machine) mappedLocked(a *allocation) bool {
	return slices.ContainsFunc(m.maps, func(o *mapping) bool { return o.alias && o.a == a })
}

// Write plays cudaMemcpy from host to device, synchronously.
func (p *Process) Write(ptr uintptr, data []byte) {
	b, err := p.m.bytes(ptr, len(data))
	if err != nil {
		panic(err)
	}
	copy(b, data)
}

// Read plays cudaMemcpy from device to host, synchronously.
func (p *Process) Read(ptr uintptr, n int) []byte {
	b, err := p.m.bytes(ptr, n)
	if err != nil {
		panic(err)
	}
	return slices.Clone(b)
}

// bytes returns the backing bytes of device range [ptr, ptr+n).
func (m *Machine) bytes(ptr uintptr, n int) ([]byte, error) {
	mp := m.find(ptr, n)
	if mp == nil {
		return nil, fmt.Errorf("fake: [%#x, +%d) is not device memory", ptr, n)
	}
	if mp.a.freed && !mp.alias {
		return nil, fmt.Errorf("fake: [%#x, +%d) was freed", ptr, n)
	}
	off := int(ptr - mp.va)
	return mp.a.data[off : off+n], nil
}

// host returns host memory [ptr, ptr+n) as bytes.
func host(ptr uintptr, n int) []byte {
	return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&ptr))), n)
}

// mem returns the bytes behind an address the driver was given: device
// memory through its backing store, anything else as host memory.
func (m *Machine) mem(ptr uintptr, n int) ([]byte, bool, error) {
	if n == 0 {
		return nil, false, nil
	}
	if inSpace(ptr) {
		b, err := m.bytes(ptr, n)
		return b, true, err
	}
	if ptr == 0 {
		return nil, false, fmt.Errorf("fake: NULL pointer")
	}
	return host(ptr, n), false, nil
}

// ---- gpu.Driver ----

func (p *Process) Init() error {
	p.called("Init")
	p.mu.Lock()
	p.initialized = true
	p.mu.Unlock()
	return nil
}

func (p *Process) initCheck(call string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.initialized {
		return fail(call, gpu.ErrorNotInitialized, "cuInit was not called")
	}
	return nil
}

func (p *Process) DeviceCount() (int, error) {
	p.called("DeviceCount")
	if err := p.initCheck("cuDeviceGetCount"); err != nil {
		return 0, err
	}
	return len(p.visible), nil
}

func (p *Process) DevicePCIBusID(dev int) (string, error) {
	p.called("DevicePCIBusID")
	if err := p.initCheck("cuDeviceGetPCIBusId"); err != nil {
		return "", err
	}
	if dev < 0 || dev >= len(p.visible) {
		return "", fail("cuDeviceGetPCIBusId", 101, "no device %d", dev)
	}
	return p.m.BusID(p.visible[dev]), nil
}

func (p *Process) DeviceByPCIBusID(id string) (int, error) {
	p.called("DeviceByPCIBusID")
	if err := p.initCheck("cuDeviceGetByPCIBusId"); err != nil {
		return 0, err
	}
	for d, md := range p.visible {
		if p.m.BusID(md) == id {
			return d, nil
		}
	}
	return 0, fail("cuDeviceGetByPCIBusId", 101, "no visible device %s", id)
}

func (p *Process) CanAccessPeer(dev, peer int) (bool, error) {
	p.called("CanAccessPeer")
	if err := p.initCheck("cuDeviceCanAccessPeer"); err != nil {
		return false, err
	}
	return dev != peer && !p.m.opts.NoPeerAccess, nil
}

func (p *Process) PrimaryContextActive(dev int) (bool, error) {
	p.called("PrimaryContextActive")
	if err := p.initCheck("cuDevicePrimaryCtxGetState"); err != nil {
		return false, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	md := p.visible[dev]
	return p.primary[md] > 0 || p.appActive[md], nil
}

func (p *Process) PrimaryContextRetain(dev int) (gpu.Context, error) {
	p.called("PrimaryContextRetain")
	if err := p.initCheck("cuDevicePrimaryCtxRetain"); err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.primary[p.visible[dev]]++
	return p.ctxOf(dev), nil
}

func (p *Process) PrimaryContextRelease(dev int) error {
	p.called("PrimaryContextRelease")
	p.mu.Lock()
	defer p.mu.Unlock()
	md := p.visible[dev]
	if p.primary[md] == 0 {
		return fail("cuDevicePrimaryCtxRelease", gpu.ErrorInvalidContext, "not retained")
	}
	p.primary[md]--
	return nil
}

func (p *Process) CurrentContext() (gpu.Context, error) {
	p.called("CurrentContext")
	if err := p.initCheck("cuCtxGetCurrent"); err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.current[syscall.Gettid()], nil
}

func (p *Process) SetCurrentContext(c gpu.Context) error {
	p.called("SetCurrentContext")
	if err := p.initCheck("cuCtxSetCurrent"); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c != 0 && p.devOf(c) < 0 {
		return fail("cuCtxSetCurrent", gpu.ErrorInvalidContext, "%#x is not a context of this process", c)
	}
	p.current[syscall.Gettid()] = c
	return nil
}

func (p *Process) PointerAttributes(ptr uintptr) (gpu.PointerAttrs, error) {
	p.called("PointerAttributes")
	if err := p.initCheck("cuPointerGetAttributes"); err != nil {
		return gpu.PointerAttrs{}, err
	}
	p.m.count(func(s *Stats) { s.PointerQueries++ })
	if mp := p.m.find(ptr, 1); mp != nil && !mp.a.freed && (mp.proc == p) {
		d := p.ordinal(mp.a.dev)
		ctx := p.ctxOf(d)
		if mp.a.ctx != 0 {
			ctx = mp.a.ctx
		}
		return gpu.PointerAttrs{Type: gpu.MemoryDevice, Managed: mp.a.managed, Context: ctx, Device: d,
			BufferID: mp.id, Start: mp.va, Size: mp.size}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for base, b := range p.pinned {
		if ptr >= base && ptr < base+uintptr(len(b)) {
			return gpu.PointerAttrs{Type: gpu.MemoryHost, Start: base, Size: len(b), Device: -1}, nil
		}
	}
	return gpu.PointerAttrs{Device: -1}, nil
}

func (p *Process) MemAlloc(size int) (uintptr, error) {
	p.called("MemAlloc")
	d, c, err := p.needCtx("cuMemAlloc")
	if err != nil {
		return 0, err
	}
	ptr := p.alloc(d, size, false)
	if c != p.ctxOf(d) {
		p.m.find(ptr, 1).a.ctx = c
	}
	return ptr, nil
}

func (p *Process) MemFree(ptr uintptr) error {
	p.called("MemFree")
	if _, err := p.need("cuMemFree"); err != nil {
		return err
	}
	return p.free("cuMemFree", ptr)
}

func (p *Process) MemHostAlloc(size int) (uintptr, error) {
	p.called("MemHostAlloc")
	if _, err := p.need("cuMemHostAlloc"); err != nil {
		return 0, err
	}
	b := make([]byte, max(size, 1), max(size, 16)) // aligned, as alloc's
	ptr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	p.mu.Lock()
	p.pinned[ptr] = b
	p.mu.Unlock()
	return ptr, nil
}

func (p *Process) MemFreeHost(ptr uintptr) error {
	p.called("MemFreeHost")
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.pinned[ptr]; !ok {
		return fail("cuMemFreeHost", gpu.ErrorInvalidValue, "%#x is not pinned memory", ptr)
	}
	delete(p.pinned, ptr)
	return nil
}

func (p *Process) MemcpyAsync(dst, src uintptr, n int, s gpu.Stream) error {
	p.called("MemcpyAsync")
	const call = "cuMemcpyAsync"
	if _, err := p.need(call); err != nil {
		return err
	}
	st, err := p.stream(call, s)
	if err != nil {
		return err
	}
	_, dd, err := p.m.mem(dst, n)
	if err != nil {
		return fail(call, gpu.ErrorInvalidValue, "dst: %v", err)
	}
	_, sd, err := p.m.mem(src, n)
	if err != nil {
		return fail(call, gpu.ErrorInvalidValue, "src: %v", err)
	}
	p.m.count(func(s *Stats) {
		switch {
		case dd && sd:
			s.DtoD++
			s.BytesDtoD += int64(n)
		case dd:
			s.HtoD++
			s.BytesHtoD += int64(n)
		case sd:
			s.DtoH++
			s.BytesDtoH += int64(n)
		default:
			s.HtoH++
		}
	})
	st.enqueue(func() error {
		d, _, err := p.m.mem(dst, n)
		if err != nil {
			return err
		}
		sb, _, err := p.m.mem(src, n)
		if err != nil {
			return err
		}
		copy(d, sb)
		return nil
	})
	return nil
}

// ---- streams and events ----

type stream struct {
	p       *Process
	ops     chan func() error
	pending atomic.Int64 // ops queued and not done (StreamQuery)
	closed  bool
}

func (st *stream) enqueue(op func() error) {
	st.pending.Add(1)
	st.ops <- op
}

func (st *stream) run() {
	for op := range st.ops {
		if j := st.p.m.opts.Jitter; j > 0 {
			time.Sleep(time.Duration(rand.Int64N(int64(j))))
		}
		if err := op(); err != nil {
			st.p.mu.Lock()
			if st.p.asyncErr == nil {
				st.p.asyncErr = err
			}
			st.p.mu.Unlock()
		}
		st.pending.Add(-1)
	}
}

func (p *Process) StreamQuery(s gpu.Stream) (bool, error) {
	p.called("StreamQuery")
	st, err := p.stream("cuStreamQuery", s)
	if err != nil {
		return false, err
	}
	if st.pending.Load() != 0 {
		return false, nil
	}
	return true, p.asyncError()
}

type event struct {
	mu  sync.Mutex
	rec chan struct{} // closed when the last recorded work completes; nil if never recorded
}

func (p *Process) handle() uintptr {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	return uintptr(p.m.id)<<40 | uintptr(p.pid)<<24 | p.next
}

func (p *Process) stream(call string, s gpu.Stream) (*stream, error) {
	if s == gpu.StreamLegacy || s == gpu.StreamPerThread {
		p.mu.Lock()
		c := p.current[syscall.Gettid()]
		p.mu.Unlock()
		return p.defaultStream(call, c, s)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.streams[s]
	if st == nil || st.closed {
		return nil, fail(call, gpu.ErrorInvalidHandle, "no stream %#x", s)
	}
	return st, nil
}

// defaultStream returns default stream s of context c, as the calling
// thread names it, making it at first use.
func (p *Process) defaultStream(call string, c gpu.Context, s gpu.Stream) (*stream, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.devOf(c) < 0 {
		return nil, fail(call, gpu.ErrorInvalidContext, "no current context for default stream %#x", s)
	}
	k := defaultStream{ctx: c}
	if s == gpu.StreamPerThread {
		k.tid = syscall.Gettid()
	}
	st := p.defaults[k]
	if st == nil {
		st = &stream{p: p, ops: make(chan func() error, 1024)}
		go st.run()
		p.defaults[k] = st
	}
	return st, nil
}

func (p *Process) event(call string, e gpu.Event) (*event, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ev := p.events[e]
	if ev == nil {
		return nil, fail(call, gpu.ErrorInvalidHandle, "no event %#x", e)
	}
	return ev, nil
}

func (p *Process) StreamCreate() (gpu.Stream, error) {
	p.called("StreamCreate")
	if _, err := p.need("cuStreamCreate"); err != nil {
		return 0, err
	}
	s := gpu.Stream(p.handle())
	st := &stream{p: p, ops: make(chan func() error, 1024)}
	go st.run()
	p.mu.Lock()
	p.streams[s] = st
	p.mu.Unlock()
	return s, nil
}

func (p *Process) StreamDestroy(s gpu.Stream) error {
	p.called("StreamDestroy")
	st, err := p.stream("cuStreamDestroy", s)
	if err != nil {
		return err
	}
	p.mu.Lock()
	st.closed = true
	delete(p.streams, s)
	p.mu.Unlock()
	close(st.ops) // queued work still runs, as with the driver
	return nil
}

func (p *Process) StreamWaitEvent(s gpu.Stream, e gpu.Event) error {
	p.called("StreamWaitEvent")
	st, err := p.stream("cuStreamWaitEvent", s)
	if err != nil {
		return err
	}
	ev, err := p.event("cuStreamWaitEvent", e)
	if err != nil {
		return err
	}
	ev.mu.Lock()
	rec := ev.rec
	ev.mu.Unlock()
	if rec != nil {
		st.enqueue(func() error { <-rec; return nil })
	}
	return nil
}

func (p *Process) EventCreate() (gpu.Event, error) {
	p.called("EventCreate")
	if _, err := p.need("cuEventCreate"); err != nil {
		return 0, err
	}
	e := gpu.Event(p.handle())
	p.mu.Lock()
	p.events[e] = &event{}
	p.mu.Unlock()
	return e, nil
}

func (p *Process) EventDestroy(e gpu.Event) error {
	p.called("EventDestroy")
	if _, err := p.event("cuEventDestroy", e); err != nil {
		return err
	}
	p.mu.Lock()
	delete(p.events, e)
	p.mu.Unlock()
	return nil
}

func (p *Process) EventRecord(e gpu.Event, s gpu.Stream) error {
	p.called("EventRecord")
	if _, err := p.need("cuEventRecord"); err != nil {
		return err
	}
	ev, err := p.event("cuEventRecord", e)
	if err != nil {
		return err
	}
	st, err := p.stream("cuEventRecord", s)
	if err != nil {
		return err
	}
	rec := make(chan struct{})
	ev.mu.Lock()
	ev.rec = rec
	ev.mu.Unlock()
	st.enqueue(func() error { close(rec); return nil })
	return nil
}

func (p *Process) asyncError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.sticky[p.current[syscall.Gettid()]]; err != nil {
		return fail("(asynchronous)", codeOf(err, gpu.ErrorMisalignedAddress), "sticky: %v", err)
	}
	if p.asyncErr != nil {
		return fail("(asynchronous)", codeOf(p.asyncErr, gpu.ErrorIllegalAddress), "%v", p.asyncErr)
	}
	return nil
}

func (p *Process) EventQuery(e gpu.Event) (bool, error) {
	p.called("EventQuery")
	ev, err := p.event("cuEventQuery", e)
	if err != nil {
		return false, err
	}
	ev.mu.Lock()
	rec := ev.rec
	ev.mu.Unlock()
	if rec == nil {
		return true, p.asyncError()
	}
	select {
	case <-rec:
		return true, p.asyncError()
	default:
		return false, nil
	}
}

func (p *Process) EventSynchronize(e gpu.Event) error {
	p.called("EventSynchronize")
	ev, err := p.event("cuEventSynchronize", e)
	if err != nil {
		return err
	}
	ev.mu.Lock()
	rec := ev.rec
	ev.mu.Unlock()
	if rec != nil {
		<-rec
	}
	return p.asyncError()
}

// ---- modules and kernels ----

func (p *Process) ModuleLoadData(ptx string) (gpu.Module, error) {
	p.called("ModuleLoadData")
	if _, err := p.need("cuModuleLoadDataEx"); err != nil {
		return 0, err
	}
	if code := p.m.opts.ModuleLoadError; code != 0 {
		return 0, fail("cuModuleLoadDataEx", code, "the fake's driver cannot load PTX (Options.ModuleLoadError)")
	}
	entries, err := ParsePTX(ptx)
	if err != nil {
		return 0, fail("cuModuleLoadDataEx", gpu.ErrorInvalidPTX, "JIT log: %v", err)
	}
	p.m.count(func(s *Stats) { s.ModuleLoads++ })
	mod := gpu.Module(p.handle())
	fns := map[string]gpu.Function{}
	for _, e := range entries {
		f := gpu.Function(p.handle())
		fns[e.Name] = f
		p.mu.Lock()
		p.functions[f] = e
		p.mu.Unlock()
	}
	p.mu.Lock()
	p.modules[mod] = fns
	p.mu.Unlock()
	return mod, nil
}

func (p *Process) ModuleGetFunction(mod gpu.Module, name string) (gpu.Function, error) {
	p.called("ModuleGetFunction")
	p.mu.Lock()
	defer p.mu.Unlock()
	fns, ok := p.modules[mod]
	if !ok {
		return 0, fail("cuModuleGetFunction", gpu.ErrorInvalidHandle, "no module %#x", mod)
	}
	f, ok := fns[name]
	if !ok {
		return 0, fail("cuModuleGetFunction", gpu.ErrorNotFound, "no entry %s", name)
	}
	return f, nil
}

func (p *Process) ModuleUnload(mod gpu.Module) error {
	p.called("ModuleUnload")
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.modules[mod]; !ok {
		return fail("cuModuleUnload", gpu.ErrorInvalidHandle, "no module %#x", mod)
	}
	delete(p.modules, mod)
	return nil
}

// hostType is the ops datatype whose kernel a GPU element type runs.
var hostType = map[gpu.Elem]ops.Type{
	gpu.F16: ops.Float16, gpu.BF16: ops.BFloat16, gpu.F32: ops.Float, gpu.F64: ops.Double,
	gpu.S32: ops.Int32, gpu.S64: ops.Int64, gpu.U32: ops.Uint32, gpu.U64: ops.Uint64,
}

func (p *Process) Launch(f gpu.Function, grid, block int, s gpu.Stream, args ...uint64) error {
	p.called("Launch")
	const call = "cuLaunchKernel"
	_, ctx, err := p.needCtx(call)
	if err != nil {
		return err
	}
	p.mu.Lock()
	e, ok := p.functions[f]
	p.mu.Unlock()
	if !ok {
		return fail(call, gpu.ErrorInvalidHandle, "no function %#x", f)
	}
	if grid < 1 || block < 1 || block > 1024 || grid > 1<<31-1 {
		return fail(call, gpu.ErrorInvalidValue, "grid %d, block %d", grid, block)
	}
	// The driver cannot count the parameters (it reads as many as the
	// kernel declares); the fake refuses a launch whose count is not the
	// kernel's.
	if len(args) != len(e.Params) {
		return fail(call, gpu.ErrorInvalidValue, "%s takes %d parameters, launched with %d", e.Name, len(e.Params), len(args))
	}
	st, err := p.stream(call, s)
	if err != nil {
		return err
	}
	if op, elem, vec, ok := gpu.ParsePeerKernel(e.Name); ok {
		return p.launchPeer(ctx, st, e.Name, op, elem, vec, args)
	}
	op, elem, ok := gpu.ParseKernelName(e.Name)
	if !ok {
		return fail(call, gpu.ErrorInvalidValue, "fake cannot run %s", e.Name)
	}
	k, err := ops.Lookup(op, hostType[elem])
	if err != nil {
		return fail(call, gpu.ErrorInvalidValue, "%v", err)
	}
	dst, a, b, n := uintptr(args[0]), uintptr(args[1]), uintptr(args[2]), int(args[3])
	size := n * elem.Size()
	for _, ptr := range []uintptr{dst, a, b} {
		if ptr%uintptr(elem.Size()) != 0 {
			// A GPU faults on the access and the context is lost.
			err := fail(call, gpu.ErrorMisalignedAddress, "%s: operand %#x is not aligned to %d bytes", e.Name, ptr, elem.Size())
			p.mu.Lock()
			p.sticky[ctx] = err
			p.mu.Unlock()
			return err
		}
	}
	for _, ptr := range []uintptr{dst, a, b} {
		if _, dev, err := p.m.mem(ptr, size); err != nil || (!dev && size > 0) {
			return fail(call, gpu.ErrorInvalidValue, "kernel operand %#x is not device memory", ptr)
		}
	}
	p.m.count(func(s *Stats) {
		s.Launches[e.Name]++
		s.Elements[e.Name] += n
	})
	st.enqueue(func() error {
		if size == 0 {
			return nil
		}
		d, _, err := p.m.mem(dst, size)
		if err != nil {
			return err
		}
		x, _, err := p.m.mem(a, size)
		if err != nil {
			return err
		}
		y, _, err := p.m.mem(b, size)
		if err != nil {
			return err
		}
		k(d, x, y)
		return nil
	})
	return nil
}

// launchPeer queues a peer kernel (gpu.PeerKernel): at its turn on the
// stream it reads the arrays of addresses from device memory, as the GPU
// does, reduces the sources in the canonical association with package
// ops and writes every destination. What would fault on a GPU (an
// address not aligned for the access, vectors included, or not device
// memory) poisons the context then, as the GPU's fault would.
func (p *Process) launchPeer(ctx gpu.Context, st *stream, name string, op ops.Op, elem gpu.Elem, vec bool, args []uint64) error {
	const call = "cuLaunchKernel"
	dsts, ndst, srcs, np, n := uintptr(args[0]), int(args[1]), uintptr(args[2]), int(args[3]), int(args[4])
	if np < 1 || np > gpu.PeerMaxSources {
		// The kernel would do nothing: a caller's bug, refused.
		return fail(call, gpu.ErrorInvalidValue, "%s with p = %d (1 to %d)", name, np, gpu.PeerMaxSources)
	}
	p.m.count(func(s *Stats) {
		s.Launches[name]++
		s.Elements[name] += n
	})
	align := uintptr(elem.Size())
	if vec {
		align = gpu.PeerVectorBytes
	}
	st.enqueue(func() error {
		if n == 0 {
			return nil
		}
		fault := func(code int, format string, a ...any) error {
			err := fail(call, code, name+": "+format, a...)
			p.poison(ctx, err)
			return err
		}
		addrs := func(what string, at uintptr, k int) ([]uintptr, error) {
			if at%8 != 0 {
				return nil, fault(gpu.ErrorMisalignedAddress, "the array %s at %#x is not 8-byte aligned", what, at)
			}
			b, dev, err := p.m.mem(at, 8*k)
			if err != nil || !dev {
				return nil, fault(gpu.ErrorIllegalAddress, "the array %s at %#x is not device memory", what, at)
			}
			out := make([]uintptr, k)
			for i := range out {
				out[i] = uintptr(binary.LittleEndian.Uint64(b[8*i:]))
			}
			return out, nil
		}
		dp, err := addrs("dsts", dsts, ndst)
		if err != nil {
			return err
		}
		sp, err := addrs("srcs", srcs, np)
		if err != nil {
			return err
		}
		size := n * elem.Size()
		parts := make([][]byte, np)
		for q, a := range sp {
			if a%align != 0 {
				return fault(gpu.ErrorMisalignedAddress, "source %d at %#x is not %d-byte aligned", q, a, align)
			}
			b, dev, err := p.m.mem(a, size)
			if err != nil || !dev {
				return fault(gpu.ErrorIllegalAddress, "source %d [%#x, +%d) is not device memory", q, a, size)
			}
			parts[q] = b
		}
		outs := make([][]byte, ndst)
		for d, a := range dp {
			if a%align != 0 {
				return fault(gpu.ErrorMisalignedAddress, "destination %d at %#x is not %d-byte aligned", d, a, align)
			}
			b, dev, err := p.m.mem(a, size)
			if err != nil || !dev {
				return fault(gpu.ErrorIllegalAddress, "destination %d [%#x, +%d) is not device memory", d, a, size)
			}
			outs[d] = b
		}
		v := make([]byte, size)
		if err := ops.CanonicalReduce(op, hostType[elem], v, parts); err != nil {
			return err
		}
		for _, b := range outs {
			copy(b, v)
		}
		return nil
	})
	return nil
}

// ---- stream memory operations ----

// word returns the 32-bit word at addr that a stream memory operation
// reaches: device memory (an IPC mapping included) or page-locked host
// memory of p, 4-byte aligned, not managed memory.
func (p *Process) word(addr uintptr) (*uint32, error) {
	if addr%4 != 0 {
		return nil, fmt.Errorf("%#x is not 4-byte aligned", addr)
	}
	if inSpace(addr) {
		mp := p.m.find(addr, 4)
		if mp == nil || (mp.a.freed && !mp.alias) || mp.a.data == nil {
			return nil, fmt.Errorf("[%#x, +4) is not device memory", addr)
		}
		if mp.a.managed {
			return nil, fmt.Errorf("%#x is managed memory, which stream memory operations refuse", addr)
		}
		b := mp.a.data[addr-mp.va:]
		return (*uint32)(unsafe.Pointer(&b[0])), nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for base, b := range p.pinned {
		if addr >= base && addr+4 <= base+uintptr(len(b)) {
			return (*uint32)(unsafe.Pointer(&b[addr-base])), nil
		}
	}
	return nil, fmt.Errorf("%#x is neither device memory nor page-locked host memory", addr)
}

// memOp checks what every stream memory operation needs.
func (p *Process) memOp(call string, s gpu.Stream, addr uintptr) (*stream, gpu.Context, error) {
	_, ctx, err := p.needCtx(call)
	if err != nil {
		return nil, 0, err
	}
	if p.m.opts.NoStreamMemOps {
		return nil, 0, fail(call, gpu.ErrorNotSupported, "stream memory operations are off (Options.NoStreamMemOps)")
	}
	st, err := p.stream(call, s)
	if err != nil {
		return nil, 0, err
	}
	if _, err := p.word(addr); err != nil {
		return nil, 0, fail(call, gpu.ErrorInvalidValue, "%v", err)
	}
	return st, ctx, nil
}

func (p *Process) StreamWriteValue32(s gpu.Stream, addr uintptr, v uint32) error {
	p.called("StreamWriteValue32")
	return p.memOps("cuStreamWriteValue32", s, []gpu.MemOp{{Addr: addr, Value: v, Write: true}})
}

// DefaultWaitTimeout is how long a stream waits for a StreamWaitValue32
// that is never satisfied, unless Options.WaitTimeout says otherwise.
const DefaultWaitTimeout = 30 * time.Second

func (p *Process) StreamWaitValue32(s gpu.Stream, addr uintptr, v uint32) error {
	p.called("StreamWaitValue32")
	return p.memOps("cuStreamWaitValue32", s, []gpu.MemOp{{Addr: addr, Value: v}})
}

func (p *Process) StreamBatchMemOp(s gpu.Stream, ops []gpu.MemOp) error {
	p.called("StreamBatchMemOp")
	const call = "cuStreamBatchMemOp"
	if len(ops) > gpu.MaxMemOps {
		return fail(call, gpu.ErrorInvalidValue, "%d operations, at most %d", len(ops), gpu.MaxMemOps)
	}
	return p.memOps(call, s, ops)
}

// memOps queues the waits and writes of ops on s, in order.
func (p *Process) memOps(call string, s gpu.Stream, ops []gpu.MemOp) error {
	if len(ops) == 0 {
		_, err := p.stream(call, s)
		return err
	}
	var st *stream
	var ctx gpu.Context
	for _, o := range ops {
		var err error
		if st, ctx, err = p.memOp(call, s, o.Addr); err != nil {
			return err
		}
	}
	ops = slices.Clone(ops)
	timeout := p.m.opts.WaitTimeout
	if timeout <= 0 {
		timeout = DefaultWaitTimeout
	}
	st.enqueue(func() error {
		for _, o := range ops {
			if err := p.memOpRun(call, ctx, o, timeout); err != nil {
				return err
			}
		}
		return nil
	})
	return nil
}

// memOpRun runs one write or wait when its stream reaches it.
func (p *Process) memOpRun(call string, ctx gpu.Context, o gpu.MemOp, timeout time.Duration) error {
	start, pause := time.Now(), time.Microsecond
	for {
		w, err := p.word(o.Addr) // the mapping may have gone since
		if err != nil {
			err = fail(call, gpu.ErrorIllegalAddress, "%v", err)
			p.poison(ctx, err)
			return err
		}
		if o.Write {
			atomic.StoreUint32(w, o.Value) // after the stream's earlier work, which it orders before it
			return nil
		}
		// CU_STREAM_WAIT_VALUE_GEQ, as the driver compares: safe across
		// the wrap-around of a sequence number.
		got := atomic.LoadUint32(w)
		if int32(got-o.Value) >= 0 {
			return nil
		}
		if time.Since(start) > timeout {
			// A GPU would wait for ever; the fake gives up, and the
			// context is lost as after a watchdog's timeout.
			err := fail(call, gpu.ErrorLaunchTimeout, "waited %v for [%#x] >= %d (it holds %d)", timeout, o.Addr, o.Value, got)
			p.poison(ctx, err)
			return err
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Millisecond)
	}
}

func (p *Process) MemsetD32Async(ptr uintptr, v uint32, n int, s gpu.Stream) error {
	p.called("MemsetD32Async")
	const call = "cuMemsetD32Async"
	if _, err := p.need(call); err != nil {
		return err
	}
	st, err := p.stream(call, s)
	if err != nil {
		return err
	}
	if n < 0 || ptr%4 != 0 {
		return fail(call, gpu.ErrorInvalidValue, "%d words at %#x (4-byte aligned)", n, ptr)
	}
	if n == 0 {
		return nil
	}
	if _, _, err := p.m.mem(ptr, 4*n); err != nil {
		return fail(call, gpu.ErrorInvalidValue, "%v", err)
	}
	st.enqueue(func() error {
		b, _, err := p.m.mem(ptr, 4*n)
		if err != nil {
			return err
		}
		// Word by word, atomically: flags set this way may be polled by
		// another stream's StreamWaitValue32 at the same time.
		for i := 0; i < n; i++ {
			atomic.StoreUint32((*uint32)(unsafe.Pointer(&b[4*i])), v)
		}
		return nil
	})
	return nil
}

// The fake device's attributes: an H200's.
const (
	defaultMultiprocessors = 132
	computeMajor           = 9
	computeMinor           = 0
)

func (p *Process) DeviceAttribute(dev int, attr gpu.DeviceAttr) (int, error) {
	p.called("DeviceAttribute")
	const call = "cuDeviceGetAttribute"
	if err := p.initCheck(call); err != nil {
		return 0, err
	}
	if dev < 0 || dev >= len(p.visible) {
		return 0, fail(call, 101, "no device %d", dev) // CUDA_ERROR_INVALID_DEVICE
	}
	switch attr {
	case gpu.DeviceAttrMultiprocessorCount:
		if n := p.m.opts.Multiprocessors; n > 0 {
			return n, nil
		}
		return defaultMultiprocessors, nil
	case gpu.DeviceAttrComputeCapabilityMajor:
		return computeMajor, nil
	case gpu.DeviceAttrComputeCapabilityMinor:
		return computeMinor, nil
	case gpu.DeviceAttrStreamMemOps:
		if p.m.opts.NoStreamMemOps {
			return 0, nil
		}
		return 1, nil
	}
	return 0, fail(call, gpu.ErrorInvalidValue, "the fake has no attribute %d", attr)
}

// ---- IPC ----

const handleMagic = 0x67636f6c // "gcol"

func (p *Process) IpcGetMemHandle(base uintptr) (gpu.IPCHandle, error) {
	p.called("IpcGetMemHandle")
	const call = "cuIpcGetMemHandle"
	var h gpu.IPCHandle
	if _, err := p.need(call); err != nil {
		return h, err
	}
	mp := p.m.find(base, 1)
	if mp == nil || mp.va != base || mp.alias || mp.proc != p || mp.a.freed {
		return h, fail(call, gpu.ErrorInvalidValue, "%#x is not the base of an allocation of this process", base)
	}
	if mp.a.managed {
		return h, fail(call, gpu.ErrorInvalidValue, "managed memory has no IPC handle")
	}
	binary.LittleEndian.PutUint32(h[0:], handleMagic)
	binary.LittleEndian.PutUint32(h[4:], p.m.id)
	binary.LittleEndian.PutUint64(h[8:], mp.a.id)
	binary.LittleEndian.PutUint32(h[16:], uint32(p.pid))
	p.m.count(func(s *Stats) { s.IPCGets++ })
	return h, nil
}

func (p *Process) IpcOpenMemHandle(h gpu.IPCHandle) (uintptr, error) {
	p.called("IpcOpenMemHandle")
	const call = "cuIpcOpenMemHandle"
	d, err := p.need(call)
	if err != nil {
		return 0, err
	}
	if binary.LittleEndian.Uint32(h[0:]) != handleMagic || binary.LittleEndian.Uint32(h[4:]) != p.m.id {
		return 0, fail(call, gpu.ErrorInvalidValue, "not a handle of this node")
	}
	id, pid := binary.LittleEndian.Uint64(h[8:]), int(binary.LittleEndian.Uint32(h[16:]))
	if pid == p.pid {
		return 0, fail(call, gpu.ErrorInvalidContext, "a process cannot open its own IPC handle")
	}
	m := p.m
	m.mu.Lock()
	defer m.mu.Unlock()
	var orig *mapping
	for _, mp := range m.maps {
		if mp.a.id == id && !mp.alias {
			orig = mp
		}
		if mp.a.id == id && mp.alias && mp.proc == p {
			mp.refs++ // opened before: the same mapping
			m.count(func(s *Stats) { s.IPCOpens++ })
			return mp.va, nil
		}
	}
	if orig == nil || orig.a.freed {
		return 0, fail(call, gpu.ErrorInvalidValue, "the allocation behind the handle was freed")
	}
	if orig.a.dev != p.visible[d] && m.opts.NoPeerAccess {
		return 0, fail(call, gpu.ErrorPeerUnsupported, "device %d cannot reach device %d", p.visible[d], orig.a.dev)
	}
	if m.refused[id] {
		return 0, fail(call, gpu.ErrorPeerUnsupported, "the allocation cannot be mapped here (RefuseIPCOpen)")
	}
	m.allocID++
	mp := &mapping{va: p.reserve(orig.size), size: orig.size, a: orig.a, proc: p, alias: true, refs: 1, id: m.allocID}
	i, _ := slices.BinarySearchFunc(m.maps, mp.va, func(o *mapping, v uintptr) int {
		if o.va < v {
			return -1
		}
		if o.va > v {
			return 1
		}
		return 0
	})
	m.maps = slices.Insert(m.maps, i, mp)
	m.count(func(s *Stats) { s.IPCOpens++ })
	return mp.va, nil
}

func (p *Process) IpcCloseMemHandle(ptr uintptr) error {
	p.called("IpcCloseMemHandle")
	const call = "cuIpcCloseMemHandle"
	if _, err := p.need(call); err != nil {
		return err
	}
	m := p.m
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, mp := range m.maps {
		if mp.va == ptr && mp.alias && mp.proc == p {
			m.count(func(s *Stats) { s.IPCCloses++ })
			if mp.refs--; mp.refs == 0 {
				m.maps = slices.Delete(m.maps, i, i+1)
				if mp.a.freed && !m.mappedLocked(mp.a) {
					mp.a.data = nil // the last mapping of a freed allocation: gone
				}
				p.unreserve(mp.va, mp.size)
			}
			return nil
		}
	}
	return fail(call, gpu.ErrorInvalidValue, "%#x is not an open IPC mapping of this process", ptr)
}
