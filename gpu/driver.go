package gpu

import (
	"errors"
	"fmt"
)

//go:generate go run go.uber.org/mock/mockgen@v0.6.0 -destination gputest/mockgpu/mock_driver.go -package mockgpu -copyright_file gputest/mockgpu/header.txt github.com/gocoll/gocoll/gpu Driver

// Driver is the part of the CUDA driver API gocoll uses, one method per
// driver entry point (cu<Name>, loaded at run time by Load), with Go
// types. Nothing else in gocoll calls CUDA, so this interface is the whole
// of what a test double (package mockgpu, package fake) must provide.
//
// Contexts: like the driver, every call that allocates, copies, launches
// or creates a stream, an event or a module acts in the calling OS
// thread's current context. Callers lock their goroutine to its thread
// (runtime.LockOSThread) and make the buffer's context current first.
//
// Errors are *Error values carrying the driver's CUresult.
type Driver interface {
	// Init is cuInit(0). gocoll calls it only with GOCOLL_CUDA=on: in
	// auto mode it waits for the application to initialise CUDA.
	Init() error
	// DeviceCount is cuDeviceGetCount.
	DeviceCount() (int, error)
	// DevicePCIBusID is cuDeviceGetPCIBusId of device ordinal dev, such as
	// "0000:3b:00.0".
	DevicePCIBusID(dev int) (string, error)
	// DeviceByPCIBusID is cuDeviceGetByPCIBusId: the ordinal of the device
	// with that bus id in this process (it may not see every device).
	DeviceByPCIBusID(busID string) (int, error)
	// CanAccessPeer is cuDeviceCanAccessPeer(dev, peer).
	CanAccessPeer(dev, peer int) (bool, error)
	// PrimaryContextActive is cuDevicePrimaryCtxGetState's active flag.
	PrimaryContextActive(dev int) (bool, error)
	// PrimaryContextRetain is cuDevicePrimaryCtxRetain.
	PrimaryContextRetain(dev int) (Context, error)
	// PrimaryContextRelease is cuDevicePrimaryCtxRelease.
	PrimaryContextRelease(dev int) error
	// CurrentContext is cuCtxGetCurrent: 0 when the thread has none. Before
	// anything in the process initialised CUDA it fails with
	// ErrNotInitialized.
	CurrentContext() (Context, error)
	// SetCurrentContext is cuCtxSetCurrent.
	SetCurrentContext(ctx Context) error

	// PointerAttributes is cuPointerGetAttributes for the memory type,
	// managed flag, context, device ordinal, buffer id and allocation
	// range of ptr. Memory CUDA does not know gives Type 0 and no error.
	PointerAttributes(ptr uintptr) (PointerAttrs, error)

	// MemAlloc is cuMemAlloc: device memory of the current context.
	MemAlloc(size int) (uintptr, error)
	// MemFree is cuMemFree.
	MemFree(ptr uintptr) error
	// MemHostAlloc is cuMemHostAlloc with CU_MEMHOSTALLOC_PORTABLE: page-
	// locked host memory the GPU copies to and from asynchronously.
	MemHostAlloc(size int) (uintptr, error)
	// MemFreeHost is cuMemFreeHost.
	MemFreeHost(ptr uintptr) error
	// MemcpyAsync is cuMemcpyAsync: n bytes from src to dst on stream s,
	// either side host or device (unified addressing tells which).
	MemcpyAsync(dst, src uintptr, n int, s Stream) error

	// StreamCreate is cuStreamCreate with CU_STREAM_NON_BLOCKING, so that
	// gocoll's work never waits for the application's legacy stream.
	StreamCreate() (Stream, error)
	// StreamDestroy is cuStreamDestroy.
	StreamDestroy(s Stream) error
	// StreamQuery is cuStreamQuery: whether everything queued on s has
	// completed (CUDA_ERROR_NOT_READY is false, not an error). A call
	// that owns its stream waits for its end with it, without recording
	// an event.
	StreamQuery(s Stream) (bool, error)
	// StreamWaitEvent is cuStreamWaitEvent(s, e, 0): work queued on s after
	// it waits until e's last recorded work has completed.
	StreamWaitEvent(s Stream, e Event) error
	// EventCreate is cuEventCreate with CU_EVENT_DISABLE_TIMING only,
	// not CU_EVENT_BLOCKING_SYNC: a thread waiting for a blocking-sync
	// event sleeps until the GPU interrupts it, tens of microseconds
	// after the work completed, which is the whole time of a small
	// collective. cuEventSynchronize then follows the context's
	// scheduling policy (spin, or yield when threads outnumber cores);
	// callers that must not hold a core poll EventQuery and sleep.
	EventCreate() (Event, error)
	// EventDestroy is cuEventDestroy.
	EventDestroy(e Event) error
	// EventRecord is cuEventRecord(e, s).
	EventRecord(e Event, s Stream) error
	// EventQuery is cuEventQuery: true once the recorded work completed,
	// false while it is pending (CUDA_ERROR_NOT_READY).
	EventQuery(e Event) (bool, error)
	// EventSynchronize is cuEventSynchronize.
	EventSynchronize(e Event) error

	// ModuleLoadData is cuModuleLoadDataEx with the JIT error log: the
	// driver compiles PTX text for the current context's GPU.
	ModuleLoadData(ptx string) (Module, error)
	// ModuleGetFunction is cuModuleGetFunction.
	ModuleGetFunction(m Module, name string) (Function, error)
	// ModuleUnload is cuModuleUnload.
	ModuleUnload(m Module) error
	// Launch is cuLaunchKernel of a gocoll kernel (kernels.go,
	// kernels_peer.go) on a grid x 1 x 1 of blocks of block x 1 x 1
	// threads, no dynamic shared memory, with args as its parameters in
	// order. Every parameter of gocoll's kernels is a .u64 (addresses and
	// counts alike); the driver cannot check their number, so passing the
	// wrong count is undefined (the fake refuses it). At most
	// MaxKernelArgs.
	Launch(f Function, grid, block int, s Stream, args ...uint64) error

	// StreamWriteValue32 is cuStreamWriteValue32 (the _v2 entry point
	// where the driver has it) with flags 0: once the work queued on s
	// before it has completed, the 4 bytes at addr (device memory, or
	// page-locked host memory, 4-byte aligned; not managed memory) become
	// v, after a memory barrier, so that a stream waiting for v also sees
	// what that work wrote.
	StreamWriteValue32(s Stream, addr uintptr, v uint32) error
	// StreamWaitValue32 is cuStreamWaitValue32 (_v2 first) with
	// CU_STREAM_WAIT_VALUE_GEQ: work queued on s after it waits until
	// (int32)(*addr - v) >= 0, the driver's comparison, which stays right
	// across the wrap-around of a sequence number. The wait holds s on the
	// GPU, never the calling thread; a wait that is never satisfied hangs
	// the stream (and anything that waits for it) for good.
	StreamWaitValue32(s Stream, addr uintptr, v uint32) error
	// StreamBatchMemOp is cuStreamBatchMemOp (_v2 first): the waits and
	// writes of ops, in order, as one driver call: StreamWaitValue32 and
	// StreamWriteValue32 each of them would be. A one-shot collective's
	// synchronisation (write my flag, wait for every peer's) is one call
	// whatever the number of peers.
	StreamBatchMemOp(s Stream, ops []MemOp) error
	// MemsetD32Async is cuMemsetD32Async: n 32-bit words at ptr (4-byte
	// aligned) set to v on stream s.
	MemsetD32Async(ptr uintptr, v uint32, n int, s Stream) error
	// DeviceAttribute is cuDeviceGetAttribute of device ordinal dev.
	DeviceAttribute(dev int, attr DeviceAttr) (int, error)

	// IpcGetMemHandle is cuIpcGetMemHandle of an allocation's base.
	IpcGetMemHandle(base uintptr) (IPCHandle, error)
	// IpcOpenMemHandle is cuIpcOpenMemHandle with
	// CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS: another process's allocation,
	// mapped into the current context.
	IpcOpenMemHandle(h IPCHandle) (uintptr, error)
	// IpcCloseMemHandle is cuIpcCloseMemHandle of an address that
	// IpcOpenMemHandle returned.
	IpcCloseMemHandle(ptr uintptr) error
}

// The driver's opaque handles, as the pointers (or ints) they are in C.
type (
	Context  uintptr // CUcontext
	Stream   uintptr // CUstream
	Event    uintptr // CUevent
	Module   uintptr // CUmodule
	Function uintptr // CUfunction
)

// The driver's special stream handles, which name the application's
// default streams in the calling thread's current context (cuda.h:
// CU_STREAM_LEGACY and CU_STREAM_PER_THREAD). gocoll queues no work on
// them: it records an event on each at the start of a device call and
// makes its own streams wait for it, so the call sees what the
// application queued there before it (see package executor/device).
const (
	// StreamLegacy is CU_STREAM_LEGACY ((CUstream)0x1): the context's
	// legacy default stream, where cudaMemcpy, cudaMemset and kernels
	// launched without a stream go in a program built with the default
	// --default-stream legacy. Its work waits for, and is waited for by,
	// the context's blocking streams; streams made with
	// CU_STREAM_NON_BLOCKING, such as gocoll's, never wait for it unless
	// told to (cuStreamWaitEvent). cudaMemcpy from pageable host memory
	// may return before the copy has landed on the device.
	StreamLegacy Stream = 0x1
	// StreamPerThread is CU_STREAM_PER_THREAD ((CUstream)0x2): the
	// calling OS thread's per-thread default stream in the current
	// context, the default stream of code built with --default-stream
	// per-thread (or CUDA_API_PER_THREAD_DEFAULT_STREAM). Which stream it
	// names depends on the thread that makes the call.
	StreamPerThread Stream = 0x2
)

// MaxKernelArgs is the most parameters Launch passes.
const MaxKernelArgs = 16

// MaxMemOps is the most operations StreamBatchMemOp takes in one call
// (cuda.h's GOCOLL_MAX_MEMOPS).
const MaxMemOps = 256

// MemOp is one operation of StreamBatchMemOp: with Write, the 32-bit
// word at Addr becomes Value (StreamWriteValue32); without, the stream
// waits until (int32)(*Addr - Value) >= 0 (StreamWaitValue32).
type MemOp struct {
	Addr  uintptr
	Value uint32
	Write bool
}

// DeviceAttr is a CUdevice_attribute.
type DeviceAttr int

const (
	// DeviceAttrMultiprocessorCount is
	// CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: the SMs, which size a
	// grid that covers the GPU once.
	DeviceAttrMultiprocessorCount DeviceAttr = 16
	// DeviceAttrComputeCapabilityMajor and ...Minor are
	// CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR and _MINOR (gocoll's
	// PTX needs 7.0).
	DeviceAttrComputeCapabilityMajor DeviceAttr = 75
	DeviceAttrComputeCapabilityMinor DeviceAttr = 76
	// DeviceAttrStreamMemOps is CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS
	// (_V1 in CUDA 12 and later): whether cuStreamWaitValue32 and
	// cuStreamWriteValue32 work. Drivers before CUDA 11.7 have only the
	// V1 entry points, off unless the nvidia module was loaded with
	// NVreg_EnableStreamMemOPs=1, and say so here; from 11.7 the _v2
	// entry points (which gocoll loads when the driver has them) work on
	// every platform and drivers of CUDA 12 and later report 1. Ask
	// before relying on StreamWaitValue32.
	DeviceAttrStreamMemOps DeviceAttr = 92
)

// IPCHandle is a CUipcMemHandle: 64 opaque bytes that name an allocation
// across processes of one node.
type IPCHandle [64]byte

// MemoryType is CUmemorytype, what cuPointerGetAttributes reports.
type MemoryType uint32

const (
	MemoryUnregistered MemoryType = 0 // memory CUDA does not know: plain host memory
	MemoryHost         MemoryType = 1 // page-locked host memory (cuMemHostAlloc, cudaHostRegister)
	MemoryDevice       MemoryType = 2
	MemoryArray        MemoryType = 3
	MemoryUnified      MemoryType = 4
)

// PointerAttrs are the attributes of one address.
type PointerAttrs struct {
	Type     MemoryType
	Managed  bool    // cudaMallocManaged memory (reported with Type Device)
	Context  Context // the allocation's context; 0 for some kinds of memory
	Device   int     // the device ordinal
	BufferID uint64  // unique per allocation for the life of the process
	Start    uintptr // the allocation that holds the address
	Size     int
}

// Error is a failed driver call.
type Error struct {
	Call string // the driver function, such as "cuMemcpyAsync"
	Code int    // CUresult
	Name string // the driver's name for the code, when it has one
	Msg  string // the driver's description, or more detail (the JIT log)
}

func (e *Error) Error() string {
	name := e.Name
	if name == "" {
		name = fmt.Sprintf("CUresult %d", e.Code)
	}
	if e.Msg != "" {
		return fmt.Sprintf("%s: %s (%s)", e.Call, name, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Call, name)
}

// Is lets errors.Is match an *Error against the sentinel errors below by
// CUresult.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Call == "" && t.Code == e.Code
}

// CUresult values gocoll looks at.
const (
	Success              = 0
	ErrorInvalidValue    = 1
	ErrorOutOfMemory     = 2
	ErrorNotInitialized  = 3
	ErrorNoDevice        = 100
	ErrorInvalidContext  = 201
	ErrorInvalidPTX      = 218
	ErrorInvalidHandle   = 400
	ErrorNotFound        = 500
	ErrorNotReady        = 600
	ErrorPeerUnsupported = 217
	// ErrorIllegalAddress: a kernel or a stream memory operation touched
	// an address that is not mapped. Sticky, as ErrorMisalignedAddress.
	ErrorIllegalAddress = 700
	// ErrorLaunchTimeout: work ran too long. The fake and the stand-in
	// driver report a stream wait (StreamWaitValue32) that was never
	// satisfied so, sticky, instead of hanging as a GPU would.
	ErrorLaunchTimeout = 702
	// ErrorNotSupported: the device cannot do it (stream memory
	// operations on a driver where DeviceAttrStreamMemOps is 0).
	ErrorNotSupported = 801
)

// More CUresult values gocoll looks at.
const (
	// The driver has no PTX JIT compiler, its PTX ISA is older than the
	// module's, or JIT compilation is disabled: cuModuleLoadDataEx of
	// gocoll's PTX fails with one of these (or ErrorInvalidPTX).
	ErrorJITCompilerNotFound    = 221
	ErrorUnsupportedPTXVersion  = 222
	ErrorJITCompilationDisabled = 223
	// ErrorContextIsDestroyed: the current context was destroyed (a
	// primary context whose last reference was released).
	ErrorContextIsDestroyed = 709
	// ErrorMisalignedAddress: a kernel loaded or stored at an address not
	// aligned for the access. It is sticky: the context is unusable from
	// then on, every later call in it fails, and only a new process can
	// use the GPU again.
	ErrorMisalignedAddress = 716
)

func init() {
	errorNames[ErrorJITCompilerNotFound] = "CUDA_ERROR_JIT_COMPILER_NOT_FOUND"
	errorNames[ErrorUnsupportedPTXVersion] = "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"
	errorNames[ErrorJITCompilationDisabled] = "CUDA_ERROR_JIT_COMPILATION_DISABLED"
	errorNames[ErrorContextIsDestroyed] = "CUDA_ERROR_CONTEXT_IS_DESTROYED"
	errorNames[ErrorMisalignedAddress] = "CUDA_ERROR_MISALIGNED_ADDRESS"
}

// Sentinels for errors.Is.
var (
	ErrNotInitialized = &Error{Code: ErrorNotInitialized, Name: "CUDA_ERROR_NOT_INITIALIZED"}
	ErrNoDevice       = &Error{Code: ErrorNoDevice, Name: "CUDA_ERROR_NO_DEVICE"}
)

// errorNames are the CUresult names the fake driver and error messages
// use when the driver cannot name a code itself.
var errorNames = map[int]string{
	ErrorInvalidValue:    "CUDA_ERROR_INVALID_VALUE",
	ErrorOutOfMemory:     "CUDA_ERROR_OUT_OF_MEMORY",
	ErrorNotInitialized:  "CUDA_ERROR_NOT_INITIALIZED",
	ErrorNoDevice:        "CUDA_ERROR_NO_DEVICE",
	ErrorInvalidContext:  "CUDA_ERROR_INVALID_CONTEXT",
	ErrorInvalidPTX:      "CUDA_ERROR_INVALID_PTX",
	ErrorInvalidHandle:   "CUDA_ERROR_INVALID_HANDLE",
	ErrorNotFound:        "CUDA_ERROR_NOT_FOUND",
	ErrorNotReady:        "CUDA_ERROR_NOT_READY",
	ErrorPeerUnsupported: "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
	ErrorIllegalAddress:  "CUDA_ERROR_ILLEGAL_ADDRESS",
	ErrorLaunchTimeout:   "CUDA_ERROR_LAUNCH_TIMEOUT",
	ErrorNotSupported:    "CUDA_ERROR_NOT_SUPPORTED",
}

// NewError returns the error of a failed call with the standard name of
// code: for drivers that are not the real one (the fake).
func NewError(call string, code int, msg string) *Error {
	return &Error{Call: call, Code: code, Name: errorNames[code], Msg: msg}
}

// IsCode reports whether err is a driver error with the given CUresult.
func IsCode(err error, code int) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}
