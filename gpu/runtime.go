package gpu

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
)

// Mode says whether gocoll uses CUDA: GOCOLL_CUDA's value, which package
// envvar parses (envvar.Settings.CUDA) and the caller converts (gpu reads
// no settings).
type Mode uint8

const (
	Auto Mode = iota // use the driver where the machine has one
	Off              // never load the driver: every buffer is host memory
	On               // require the driver and a device
)

func (m Mode) String() string { return [...]string{"auto", "off", "on"}[m] }

// Kind is where a buffer lives.
type Kind uint8

const (
	Host    Kind = iota // host memory, pinned or not
	Device              // device memory (cuMemAlloc, cudaMalloc)
	Managed             // managed memory (cudaMallocManaged): treated as device memory
)

func (k Kind) String() string { return [...]string{"host", "device", "managed"}[k] }

// Memory is what classification learns about a buffer: its kind and, for
// device memory, the allocation that holds it.
type Memory struct {
	Kind     Kind
	Context  Context // the allocation's context (0 if the driver did not say)
	Device   int     // device ordinal in this process
	Base     uintptr // the allocation
	Size     int
	BufferID uint64
}

// OnDevice reports whether the memory must be reached through CUDA.
func (m Memory) OnDevice() bool { return m.Kind != Host }

// Runtime is one process's view of CUDA: the driver and whether the
// application has a context yet.
// A nil *Runtime is valid and classifies everything as host memory
// without a call: that is the runtime of GOCOLL_CUDA=off and of machines
// without a driver.
type Runtime struct {
	drv  Driver
	mode Mode
	id   uint64 // unique per runtime, so per process outside tests

	// ctxSeen: some context existed at some call; from then on pointers
	// are asked about. Before that no buffer can be device memory.
	ctxSeen atomic.Bool
	devices atomic.Int32 // device count, -1 until known

	queries atomic.Int64 // cuPointerGetAttributes calls, for tests and debugging
}

// NewRuntime returns the runtime of drv. With On it initialises the driver
// and fails unless there is at least one device; with Auto it calls
// nothing (the application initialises CUDA, or there is no device
// memory to see).
func NewRuntime(drv Driver, mode Mode) (*Runtime, error) {
	r := &Runtime{drv: drv, mode: mode, id: newID()}
	r.devices.Store(-1)
	if mode == On {
		if err := drv.Init(); err != nil {
			return nil, fmt.Errorf("GOCOLL_CUDA=on: %w", err)
		}
		n, err := drv.DeviceCount()
		if err == nil && n == 0 {
			err = ErrNoDevice
		}
		if err != nil {
			return nil, fmt.Errorf("GOCOLL_CUDA=on: no CUDA device: %w", err)
		}
		r.devices.Store(int32(n))
	}
	return r, nil
}

// The process's runtime over the real driver: libcuda is process-wide,
// so it is loaded and wrapped once.
var proc struct {
	sync.Mutex
	installed *Runtime
	done      map[Mode]bool
	rt        map[Mode]*Runtime
	err       map[Mode]error
}

// Open returns the process's runtime as GOCOLL_CUDA's mode says: nil
// with Off, nil without a driver in Auto, an error naming what is
// missing with On. After Install, the installed runtime (unless Off).
func Open(mode Mode) (*Runtime, error) {
	if mode == Off {
		return nil, nil
	}
	proc.Lock()
	defer proc.Unlock()
	if proc.installed != nil {
		return proc.installed, nil
	}
	if proc.done[mode] {
		return proc.rt[mode], proc.err[mode]
	}
	rt, err := open(mode)
	if proc.done == nil {
		proc.done, proc.rt, proc.err = map[Mode]bool{}, map[Mode]*Runtime{}, map[Mode]error{}
	}
	proc.done[mode], proc.rt[mode], proc.err[mode] = true, rt, err
	return rt, err
}

// Install makes rt the process's runtime, which Open returns from then
// on: for programs that bring their own Driver, such as tests running on
// package fake's. Install(nil) goes back to the real driver.
func Install(rt *Runtime) {
	proc.Lock()
	proc.installed = rt
	proc.Unlock()
}

func open(mode Mode) (*Runtime, error) {
	drv, err := Load()
	if err != nil {
		if mode == On {
			return nil, fmt.Errorf("GOCOLL_CUDA=on but the CUDA driver cannot be loaded: %v", err)
		}
		return nil, nil
	}
	return NewRuntime(drv, mode)
}

// newID returns a number no other runtime, in this process or another,
// is likely to have.
func newID() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) | 1
}

// ID identifies the runtime: ranks whose runtimes have the same ID share
// a process, so device addresses are valid across them.
func (r *Runtime) ID() uint64 { return r.id }

// Driver returns the runtime's driver.
func (r *Runtime) Driver() Driver { return r.drv }

// Mode returns the GOCOLL_CUDA mode the runtime was made with.
func (r *Runtime) Mode() Mode { return r.mode }

// Active reports whether device memory can exist: a CUDA context exists
// in the process. Until one is seen it asks the driver (one
// cuCtxGetCurrent, which fails at once while CUDA is not initialised,
// then the state of each device's primary context); after, it is a load.
func (r *Runtime) Active() bool {
	if r == nil {
		return false
	}
	if r.ctxSeen.Load() {
		return true
	}
	ctx, err := r.drv.CurrentContext()
	if err != nil {
		return false // CUDA_ERROR_NOT_INITIALIZED: nobody initialised CUDA yet
	}
	if ctx == 0 {
		n := r.Devices()
		for d := 0; d < n && ctx == 0; d++ {
			if on, err := r.drv.PrimaryContextActive(d); err == nil && on {
				ctx = 1
			}
		}
	}
	if ctx == 0 {
		return false
	}
	r.ctxSeen.Store(true)
	return true
}

// Devices returns the number of devices this process sees (0 while CUDA
// is not initialised).
func (r *Runtime) Devices() int {
	if r == nil {
		return 0
	}
	if n := r.devices.Load(); n >= 0 {
		return int(n)
	}
	n, err := r.drv.DeviceCount()
	if err != nil {
		return 0
	}
	r.devices.Store(int32(n))
	return n
}

// Classify says where the memory at ptr lives. Without a runtime, or
// before the process has a CUDA context, it is host memory and nothing is
// called. Otherwise every call asks the driver once
// (cuPointerGetAttributes), and a driver error makes the buffer host
// memory, as it does for the driver's own copies.
//
// Nothing is cached by address: after cudaFree, cudaMalloc often returns
// the same address for a new allocation (a new buffer id, a new IPC
// handle), so a cached range can name memory that is gone. Revalidating
// a cached entry would cost the same one query that answers afresh (the
// buffer id comes with the range, context and device), so the query is
// the answer. Callers that cache by allocation (IPC handles, mappings)
// compare Memory.BufferID.
func (r *Runtime) Classify(ptr uintptr) Memory {
	if ptr == 0 || !r.Active() {
		return Memory{Kind: Host}
	}
	r.queries.Add(1)
	a, err := r.drv.PointerAttributes(ptr)
	if err != nil {
		return Memory{Kind: Host}
	}
	return a.Memory(ptr)
}

// Memory is where the buffer at ptr lives by the attributes the driver
// gave for it: what Classify answers, and what C code that asked the
// driver itself (gocoll_cuda_classify) passes on.
func (a PointerAttrs) Memory(ptr uintptr) Memory {
	m := Memory{Kind: Host, Context: a.Context, Device: a.Device, Base: a.Start, Size: a.Size, BufferID: a.BufferID}
	switch {
	case a.Managed:
		m.Kind = Managed
	case a.Type == MemoryDevice || a.Type == MemoryUnified:
		m.Kind = Device
	default:
		return Memory{Kind: Host}
	}
	if m.Base == 0 || m.Size <= 0 || ptr < m.Base || ptr >= m.Base+uintptr(m.Size) {
		m.Base, m.Size = ptr, 1 // the driver gave no range: the address alone
	}
	return m
}

// Queries returns how many times Classify asked the driver.
func (r *Runtime) Queries() int64 {
	if r == nil {
		return 0
	}
	return r.queries.Load()
}
