//go:build cgo

package gpu

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "cuda.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// cudaDriver is the real driver, called through cuda.c's wrappers.
type cudaDriver struct{}

// Load opens libcuda.so.1 and finds every entry point Driver needs. It
// fails, saying what is missing, on a machine without the driver; it
// initialises nothing (see Driver.Init).
func Load() (Driver, error) {
	var buf [512]C.char
	if C.gocoll_cuda_load(&buf[0], C.int(len(buf))) != 0 {
		return nil, errors.New(C.GoString(&buf[0]))
	}
	return cudaDriver{}, nil
}

// check turns a CUresult into an error.
func check(call string, r C.gocoll_curesult) error {
	if r == 0 {
		return nil
	}
	e := &Error{Call: call, Code: int(r)}
	if s := C.gocoll_cu_error_name(r); s != nil {
		e.Name = C.GoString(s)
	} else {
		e.Name = errorNames[int(r)]
	}
	if s := C.gocoll_cu_error_string(r); s != nil {
		e.Msg = C.GoString(s)
	}
	return e
}

func (cudaDriver) Init() error { return check("cuInit", C.gocoll_cu_init()) }

func (cudaDriver) DeviceCount() (int, error) {
	var n C.int
	err := check("cuDeviceGetCount", C.gocoll_cu_device_count(&n))
	return int(n), err
}

func (cudaDriver) DevicePCIBusID(dev int) (string, error) {
	var buf [64]C.char
	if err := check("cuDeviceGetPCIBusId", C.gocoll_cu_device_pci_bus_id(C.int(dev), &buf[0], C.int(len(buf)))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

func (cudaDriver) DeviceByPCIBusID(id string) (int, error) {
	cs := C.CString(id)
	defer C.free(unsafe.Pointer(cs))
	var dev C.int
	err := check("cuDeviceGetByPCIBusId", C.gocoll_cu_device_by_pci_bus_id(cs, &dev))
	return int(dev), err
}

func (cudaDriver) CanAccessPeer(dev, peer int) (bool, error) {
	var can C.int
	err := check("cuDeviceCanAccessPeer", C.gocoll_cu_can_access_peer(C.int(dev), C.int(peer), &can))
	return can != 0, err
}

func (cudaDriver) PrimaryContextActive(dev int) (bool, error) {
	var active C.int
	err := check("cuDevicePrimaryCtxGetState", C.gocoll_cu_primary_ctx_active(C.int(dev), &active))
	return active != 0, err
}

func (cudaDriver) PrimaryContextRetain(dev int) (Context, error) {
	var c C.uintptr_t
	err := check("cuDevicePrimaryCtxRetain", C.gocoll_cu_primary_ctx_retain(C.int(dev), &c))
	return Context(c), err
}

func (cudaDriver) PrimaryContextRelease(dev int) error {
	return check("cuDevicePrimaryCtxRelease", C.gocoll_cu_primary_ctx_release(C.int(dev)))
}

func (cudaDriver) CurrentContext() (Context, error) {
	var c C.uintptr_t
	err := check("cuCtxGetCurrent", C.gocoll_cu_ctx_get_current(&c))
	return Context(c), err
}

func (cudaDriver) SetCurrentContext(ctx Context) error {
	return check("cuCtxSetCurrent", C.gocoll_cu_ctx_set_current(C.uintptr_t(ctx)))
}

// AttrsOf reads what C code (capi's fast path, the preload's C half)
// learned of a buffer with gocoll_cuda_classify: a pointer to its struct
// gocoll_cuda_attrs, which each cgo package sees as a type of its own.
func AttrsOf(p unsafe.Pointer) PointerAttrs {
	a := (*C.struct_gocoll_cuda_attrs)(p)
	return PointerAttrs{Type: MemoryType(a._type), Managed: a.managed != 0, Context: Context(a.ctx), Device: int(a.dev),
		BufferID: uint64(a.buffer_id), Start: uintptr(a.start), Size: int(a.size)}
}

func (cudaDriver) PointerAttributes(ptr uintptr) (PointerAttrs, error) {
	var (
		typ, managed C.unsigned
		ctx          C.uintptr_t
		dev          C.int
		id           C.ulonglong
		start        C.gocoll_cuptr
		size         C.size_t
	)
	err := check("cuPointerGetAttributes", C.gocoll_cu_pointer_attributes(C.gocoll_cuptr(ptr), &typ, &managed, &ctx, &dev, &id, &start, &size))
	return PointerAttrs{Type: MemoryType(typ), Managed: managed != 0, Context: Context(ctx), Device: int(dev),
		BufferID: uint64(id), Start: uintptr(start), Size: int(size)}, err
}

func (cudaDriver) MemAlloc(size int) (uintptr, error) {
	var p C.gocoll_cuptr
	err := check("cuMemAlloc", C.gocoll_cu_mem_alloc(C.size_t(size), &p))
	return uintptr(p), err
}

func (cudaDriver) MemFree(ptr uintptr) error {
	return check("cuMemFree", C.gocoll_cu_mem_free(C.gocoll_cuptr(ptr)))
}

func (cudaDriver) MemHostAlloc(size int) (uintptr, error) {
	var p C.uintptr_t
	err := check("cuMemHostAlloc", C.gocoll_cu_mem_host_alloc(C.size_t(size), &p))
	return uintptr(p), err
}

func (cudaDriver) MemFreeHost(ptr uintptr) error {
	return check("cuMemFreeHost", C.gocoll_cu_mem_free_host(C.uintptr_t(ptr)))
}

func (cudaDriver) MemcpyAsync(dst, src uintptr, n int, s Stream) error {
	return check("cuMemcpyAsync", C.gocoll_cu_memcpy_async(C.gocoll_cuptr(dst), C.gocoll_cuptr(src), C.size_t(n), C.uintptr_t(s)))
}

func (cudaDriver) StreamCreate() (Stream, error) {
	var s C.uintptr_t
	err := check("cuStreamCreate", C.gocoll_cu_stream_create(&s))
	return Stream(s), err
}

func (cudaDriver) StreamDestroy(s Stream) error {
	return check("cuStreamDestroy", C.gocoll_cu_stream_destroy(C.uintptr_t(s)))
}

func (cudaDriver) StreamWaitEvent(s Stream, e Event) error {
	return check("cuStreamWaitEvent", C.gocoll_cu_stream_wait_event(C.uintptr_t(s), C.uintptr_t(e)))
}

func (cudaDriver) EventCreate() (Event, error) {
	var e C.uintptr_t
	err := check("cuEventCreate", C.gocoll_cu_event_create(&e))
	return Event(e), err
}

func (cudaDriver) EventDestroy(e Event) error {
	return check("cuEventDestroy", C.gocoll_cu_event_destroy(C.uintptr_t(e)))
}

func (cudaDriver) EventRecord(e Event, s Stream) error {
	return check("cuEventRecord", C.gocoll_cu_event_record(C.uintptr_t(e), C.uintptr_t(s)))
}

func (cudaDriver) EventQuery(e Event) (bool, error) {
	r := C.gocoll_cu_event_query(C.uintptr_t(e))
	if r == ErrorNotReady {
		return false, nil
	}
	return r == 0, check("cuEventQuery", r)
}

func (cudaDriver) StreamQuery(s Stream) (bool, error) {
	r := C.gocoll_cu_stream_query(C.uintptr_t(s))
	if r == ErrorNotReady {
		return false, nil
	}
	return r == 0, check("cuStreamQuery", r)
}

func (cudaDriver) EventSynchronize(e Event) error {
	return check("cuEventSynchronize", C.gocoll_cu_event_synchronize(C.uintptr_t(e)))
}

func (cudaDriver) ModuleLoadData(ptx string) (Module, error) {
	cs := C.CString(ptx)
	defer C.free(unsafe.Pointer(cs))
	var log [4096]C.char
	var m C.uintptr_t
	if err := check("cuModuleLoadDataEx", C.gocoll_cu_module_load(cs, &m, &log[0], C.int(len(log)))); err != nil {
		if s := C.GoString(&log[0]); s != "" {
			err.(*Error).Msg = "JIT log: " + s
		}
		return 0, err
	}
	return Module(m), nil
}

func (cudaDriver) ModuleGetFunction(m Module, name string) (Function, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var f C.uintptr_t
	err := check("cuModuleGetFunction", C.gocoll_cu_module_get_function(C.uintptr_t(m), cs, &f))
	return Function(f), err
}

func (cudaDriver) ModuleUnload(m Module) error {
	return check("cuModuleUnload", C.gocoll_cu_module_unload(C.uintptr_t(m)))
}

func (cudaDriver) Launch(f Function, grid, block int, s Stream, args ...uint64) error {
	if len(args) > MaxKernelArgs {
		return NewError("cuLaunchKernel", ErrorInvalidValue, fmt.Sprintf("%d kernel parameters, at most %d", len(args), MaxKernelArgs))
	}
	var p *C.ulonglong
	if len(args) > 0 {
		p = (*C.ulonglong)(unsafe.Pointer(&args[0])) // no Go pointers in it; the driver copies the values
	}
	return check("cuLaunchKernel", C.gocoll_cu_launch(C.uintptr_t(f), C.unsigned(grid), C.unsigned(block), C.uintptr_t(s),
		p, C.int(len(args))))
}

func (cudaDriver) StreamWriteValue32(s Stream, addr uintptr, v uint32) error {
	return check("cuStreamWriteValue32", C.gocoll_cu_stream_write_value32(C.uintptr_t(s), C.gocoll_cuptr(addr), C.unsigned(v)))
}

func (cudaDriver) StreamBatchMemOp(s Stream, ops []MemOp) error {
	if len(ops) > MaxMemOps {
		return NewError("cuStreamBatchMemOp", ErrorInvalidValue, fmt.Sprintf("%d operations, at most %d", len(ops), MaxMemOps))
	}
	var (
		addrs  [MaxMemOps]C.gocoll_cuptr
		values [MaxMemOps]C.unsigned
		writes [MaxMemOps]C.uchar
	)
	for i, o := range ops {
		addrs[i], values[i] = C.gocoll_cuptr(o.Addr), C.unsigned(o.Value)
		if o.Write {
			writes[i] = 1
		}
	}
	return check("cuStreamBatchMemOp", C.gocoll_cu_stream_batch_memop(C.uintptr_t(s), &addrs[0], &values[0], &writes[0], C.int(len(ops))))
}

func (cudaDriver) StreamWaitValue32(s Stream, addr uintptr, v uint32) error {
	return check("cuStreamWaitValue32", C.gocoll_cu_stream_wait_value32(C.uintptr_t(s), C.gocoll_cuptr(addr), C.unsigned(v)))
}

func (cudaDriver) MemsetD32Async(ptr uintptr, v uint32, n int, s Stream) error {
	return check("cuMemsetD32Async", C.gocoll_cu_memset_d32_async(C.gocoll_cuptr(ptr), C.unsigned(v), C.size_t(n), C.uintptr_t(s)))
}

func (cudaDriver) DeviceAttribute(dev int, attr DeviceAttr) (int, error) {
	var v C.int
	err := check("cuDeviceGetAttribute", C.gocoll_cu_device_attribute(C.int(dev), C.int(attr), &v))
	return int(v), err
}

func (cudaDriver) IpcGetMemHandle(base uintptr) (IPCHandle, error) {
	var h C.gocoll_ipc_handle
	err := check("cuIpcGetMemHandle", C.gocoll_cu_ipc_get(C.gocoll_cuptr(base), &h))
	return *(*IPCHandle)(unsafe.Pointer(&h)), err
}

func (cudaDriver) IpcOpenMemHandle(h IPCHandle) (uintptr, error) {
	var ch C.gocoll_ipc_handle
	*(*IPCHandle)(unsafe.Pointer(&ch)) = h
	var p C.gocoll_cuptr
	err := check("cuIpcOpenMemHandle", C.gocoll_cu_ipc_open(&ch, &p))
	return uintptr(p), err
}

func (cudaDriver) IpcCloseMemHandle(ptr uintptr) error {
	return check("cuIpcCloseMemHandle", C.gocoll_cu_ipc_close(C.gocoll_cuptr(ptr)))
}
