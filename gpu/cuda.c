//go:build cgo

/*
 * Loads the CUDA driver (libcuda.so.1) with dlopen and calls it through
 * function pointers, so that nothing CUDA is needed at build time and a
 * machine without the driver only sees dlopen fail once. Each wrapper is
 * one call; the Go side (cuda.go) turns results into errors.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "cuda.h"

/* Constants of the driver ABI (cuda.h). */
enum {
    CU_POINTER_ATTRIBUTE_CONTEXT = 1,
    CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
    CU_POINTER_ATTRIBUTE_BUFFER_ID = 7,
    CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
    CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
    CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,
    CU_MEMORYTYPE_DEVICE = 2,
    CU_MEMORYTYPE_UNIFIED = 4,
    CU_MEMHOSTALLOC_PORTABLE = 1,
    CU_STREAM_NON_BLOCKING = 1,
    CU_EVENT_DISABLE_TIMING = 2,
    CU_STREAM_WRITE_VALUE_DEFAULT = 0,
    CU_STREAM_WAIT_VALUE_GEQ = 0,
    CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1,
    CU_JIT_ERROR_LOG_BUFFER = 5,
    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
    CUDA_ERROR_NOT_INITIALIZED = 3,
};

typedef void *P; /* CUcontext, CUstream, CUevent, CUmodule, CUfunction */

static struct {
    gocoll_curesult (*GetErrorName)(gocoll_curesult, const char **);
    gocoll_curesult (*GetErrorString)(gocoll_curesult, const char **);
    gocoll_curesult (*Init)(unsigned);
    gocoll_curesult (*DeviceGetCount)(int *);
    gocoll_curesult (*DeviceGet)(int *, int);
    gocoll_curesult (*DeviceGetPCIBusId)(char *, int, int);
    gocoll_curesult (*DeviceGetByPCIBusId)(int *, const char *);
    gocoll_curesult (*DeviceCanAccessPeer)(int *, int, int);
    gocoll_curesult (*DevicePrimaryCtxGetState)(int, unsigned *, int *);
    gocoll_curesult (*DevicePrimaryCtxRetain)(P *, int);
    gocoll_curesult (*DevicePrimaryCtxRelease)(int);
    gocoll_curesult (*CtxGetCurrent)(P *);
    gocoll_curesult (*CtxSetCurrent)(P);
    gocoll_curesult (*PointerGetAttributes)(unsigned, int *, void **, gocoll_cuptr);
    gocoll_curesult (*MemAlloc)(gocoll_cuptr *, size_t);
    gocoll_curesult (*MemFree)(gocoll_cuptr);
    gocoll_curesult (*MemHostAlloc)(void **, size_t, unsigned);
    gocoll_curesult (*MemFreeHost)(void *);
    gocoll_curesult (*MemcpyAsync)(gocoll_cuptr, gocoll_cuptr, size_t, P);
    gocoll_curesult (*StreamCreate)(P *, unsigned);
    gocoll_curesult (*StreamDestroy)(P);
    gocoll_curesult (*StreamWaitEvent)(P, P, unsigned);
    gocoll_curesult (*EventCreate)(P *, unsigned);
    gocoll_curesult (*EventDestroy)(P);
    gocoll_curesult (*EventRecord)(P, P);
    gocoll_curesult (*EventQuery)(P);
    gocoll_curesult (*StreamQuery)(P);
    gocoll_curesult (*EventSynchronize)(P);
    gocoll_curesult (*ModuleLoadDataEx)(P *, const void *, unsigned, int *, void **);
    gocoll_curesult (*ModuleGetFunction)(P *, P, const char *);
    gocoll_curesult (*ModuleUnload)(P);
    gocoll_curesult (*LaunchKernel)(P, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, P, void **,
                                void **);
    gocoll_curesult (*IpcGetMemHandle)(gocoll_ipc_handle *, gocoll_cuptr);
    gocoll_curesult (*IpcOpenMemHandle)(gocoll_cuptr *, gocoll_ipc_handle, unsigned);
    gocoll_curesult (*IpcCloseMemHandle)(gocoll_cuptr);
    gocoll_curesult (*StreamWriteValue32)(P, gocoll_cuptr, unsigned, unsigned);
    gocoll_curesult (*StreamWaitValue32)(P, gocoll_cuptr, unsigned, unsigned);
    gocoll_curesult (*StreamBatchMemOp)(P, unsigned, void *, unsigned);
    gocoll_curesult (*MemsetD32Async)(gocoll_cuptr, unsigned, size_t, P);
    gocoll_curesult (*DeviceGetAttribute)(int *, int, int);
} cu;

/* The symbols, each with the names to try in order: the versioned name
 * that cuda.h maps the plain one to, then the plain one. */
static const struct sym {
    void **fn;
    const char *names[2];
} syms[] = {
    {(void **)&cu.GetErrorName, {"cuGetErrorName"}},
    {(void **)&cu.GetErrorString, {"cuGetErrorString"}},
    {(void **)&cu.Init, {"cuInit"}},
    {(void **)&cu.DeviceGetCount, {"cuDeviceGetCount"}},
    {(void **)&cu.DeviceGet, {"cuDeviceGet"}},
    {(void **)&cu.DeviceGetPCIBusId, {"cuDeviceGetPCIBusId"}},
    {(void **)&cu.DeviceGetByPCIBusId, {"cuDeviceGetByPCIBusId"}},
    {(void **)&cu.DeviceCanAccessPeer, {"cuDeviceCanAccessPeer"}},
    {(void **)&cu.DevicePrimaryCtxGetState, {"cuDevicePrimaryCtxGetState"}},
    {(void **)&cu.DevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"}},
    {(void **)&cu.DevicePrimaryCtxRelease, {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"}},
    {(void **)&cu.CtxGetCurrent, {"cuCtxGetCurrent"}},
    {(void **)&cu.CtxSetCurrent, {"cuCtxSetCurrent"}},
    {(void **)&cu.PointerGetAttributes, {"cuPointerGetAttributes"}},
    {(void **)&cu.MemAlloc, {"cuMemAlloc_v2", "cuMemAlloc"}},
    {(void **)&cu.MemFree, {"cuMemFree_v2", "cuMemFree"}},
    {(void **)&cu.MemHostAlloc, {"cuMemHostAlloc"}},
    {(void **)&cu.MemFreeHost, {"cuMemFreeHost"}},
    {(void **)&cu.MemcpyAsync, {"cuMemcpyAsync"}},
    {(void **)&cu.StreamCreate, {"cuStreamCreate"}},
    {(void **)&cu.StreamDestroy, {"cuStreamDestroy_v2", "cuStreamDestroy"}},
    {(void **)&cu.StreamWaitEvent, {"cuStreamWaitEvent"}},
    {(void **)&cu.EventCreate, {"cuEventCreate"}},
    {(void **)&cu.EventDestroy, {"cuEventDestroy_v2", "cuEventDestroy"}},
    {(void **)&cu.EventRecord, {"cuEventRecord"}},
    {(void **)&cu.EventQuery, {"cuEventQuery"}},
    {(void **)&cu.StreamQuery, {"cuStreamQuery"}},
    {(void **)&cu.EventSynchronize, {"cuEventSynchronize"}},
    {(void **)&cu.ModuleLoadDataEx, {"cuModuleLoadDataEx"}},
    {(void **)&cu.ModuleGetFunction, {"cuModuleGetFunction"}},
    {(void **)&cu.ModuleUnload, {"cuModuleUnload"}},
    {(void **)&cu.LaunchKernel, {"cuLaunchKernel"}},
    {(void **)&cu.IpcGetMemHandle, {"cuIpcGetMemHandle"}},
    {(void **)&cu.IpcOpenMemHandle, {"cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle"}},
    {(void **)&cu.IpcCloseMemHandle, {"cuIpcCloseMemHandle"}},
    /* The V2 stream memory operations (CUDA 11.7) work on every
     * platform; the V1 ones only where the nvidia module enables them
     * (gpu.DeviceAttrStreamMemOps says which). */
    {(void **)&cu.StreamWriteValue32, {"cuStreamWriteValue32_v2", "cuStreamWriteValue32"}},
    {(void **)&cu.StreamWaitValue32, {"cuStreamWaitValue32_v2", "cuStreamWaitValue32"}},
    {(void **)&cu.StreamBatchMemOp, {"cuStreamBatchMemOp_v2", "cuStreamBatchMemOp"}},
    {(void **)&cu.MemsetD32Async, {"cuMemsetD32Async"}},
    {(void **)&cu.DeviceGetAttribute, {"cuDeviceGetAttribute"}},
};

int gocoll_cuda_loaded;
static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;

int gocoll_cuda_load(char *err, int errlen) {
    int rc = 0;
    pthread_mutex_lock(&load_mu);
    if (gocoll_cuda_loaded) goto out;
    /* The application's own copy, if it loaded CUDA already; else ours.
     * Never closed: the driver stays for the life of the process. */
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(err, errlen, "%s", e ? e : "dlopen(libcuda.so.1) failed");
        rc = -1;
        goto out;
    }
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *f = NULL;
        for (int k = 0; k < 2 && syms[i].names[k] && !f; k++) f = dlsym(lib, syms[i].names[k]);
        if (!f) {
            snprintf(err, errlen, "libcuda.so.1 has no %s (driver too old?)", syms[i].names[0]);
            rc = -1;
            goto out;
        }
        *syms[i].fn = f;
    }
    __atomic_store_n(&gocoll_cuda_loaded, 1, __ATOMIC_RELEASE);
out:
    pthread_mutex_unlock(&load_mu);
    return rc;
}

static int initialised; /* the process has called cuInit (someone has) */

int gocoll_cuda_classify(const void *p, struct gocoll_cuda_attrs *a) {
    if (!p || !__atomic_load_n(&gocoll_cuda_loaded, __ATOMIC_ACQUIRE)) return 0;
    if (!__atomic_load_n(&initialised, __ATOMIC_RELAXED)) {
        P ctx = NULL;
        /* Before cuInit nothing can be device memory; asking costs one
         * call that reads the driver's state. */
        if (cu.CtxGetCurrent(&ctx) == CUDA_ERROR_NOT_INITIALIZED) return 0;
        __atomic_store_n(&initialised, 1, __ATOMIC_RELAXED);
    }
    if (gocoll_cu_pointer_attributes((gocoll_cuptr)(uintptr_t)p, &a->type, &a->managed, &a->ctx, &a->dev, &a->buffer_id,
                                     &a->start, &a->size) != 0)
        return 0;
    return a->type == CU_MEMORYTYPE_DEVICE || a->type == CU_MEMORYTYPE_UNIFIED || a->managed != 0;
}

int gocoll_cuda_is_device(const void *p) {
    struct gocoll_cuda_attrs a;
    return gocoll_cuda_classify(p, &a);
}

const char *gocoll_cu_error_name(gocoll_curesult r) {
    const char *s = NULL;
    if (cu.GetErrorName && cu.GetErrorName(r, &s) != 0) s = NULL;
    return s;
}

const char *gocoll_cu_error_string(gocoll_curesult r) {
    const char *s = NULL;
    if (cu.GetErrorString && cu.GetErrorString(r, &s) != 0) s = NULL;
    return s;
}

gocoll_curesult gocoll_cu_init(void) { return cu.Init(0); }
gocoll_curesult gocoll_cu_device_count(int *n) { return cu.DeviceGetCount(n); }

gocoll_curesult gocoll_cu_device_pci_bus_id(int ordinal, char *buf, int len) {
    int dev = 0;
    gocoll_curesult r = cu.DeviceGet(&dev, ordinal);
    return r ? r : cu.DeviceGetPCIBusId(buf, len, dev);
}

gocoll_curesult gocoll_cu_device_by_pci_bus_id(const char *id, int *ordinal) {
    /* CUdevice values are ordinals on every driver so far. */
    return cu.DeviceGetByPCIBusId(ordinal, id);
}

gocoll_curesult gocoll_cu_can_access_peer(int ordinal, int peer, int *can) {
    int d = 0, q = 0;
    gocoll_curesult r = cu.DeviceGet(&d, ordinal);
    if (!r) r = cu.DeviceGet(&q, peer);
    return r ? r : cu.DeviceCanAccessPeer(can, d, q);
}

gocoll_curesult gocoll_cu_primary_ctx_active(int ordinal, int *active) {
    int dev = 0;
    unsigned flags = 0;
    gocoll_curesult r = cu.DeviceGet(&dev, ordinal);
    return r ? r : cu.DevicePrimaryCtxGetState(dev, &flags, active);
}

gocoll_curesult gocoll_cu_primary_ctx_retain(int ordinal, uintptr_t *ctx) {
    int dev = 0;
    P c = NULL;
    gocoll_curesult r = cu.DeviceGet(&dev, ordinal);
    if (!r) r = cu.DevicePrimaryCtxRetain(&c, dev);
    *ctx = (uintptr_t)c;
    return r;
}

gocoll_curesult gocoll_cu_primary_ctx_release(int ordinal) {
    int dev = 0;
    gocoll_curesult r = cu.DeviceGet(&dev, ordinal);
    return r ? r : cu.DevicePrimaryCtxRelease(dev);
}

gocoll_curesult gocoll_cu_ctx_get_current(uintptr_t *ctx) {
    P c = NULL;
    gocoll_curesult r = cu.CtxGetCurrent(&c);
    *ctx = (uintptr_t)c;
    return r;
}

gocoll_curesult gocoll_cu_ctx_set_current(uintptr_t ctx) { return cu.CtxSetCurrent((P)ctx); }

gocoll_curesult gocoll_cu_pointer_attributes(gocoll_cuptr p, unsigned *type, unsigned *managed, uintptr_t *ctx, int *dev,
                                         unsigned long long *buffer_id, gocoll_cuptr *start, size_t *size) {
    /* Every value lands in a zeroed 8-byte slot, whatever its C type. */
    unsigned long long v[7] = {0};
    int attrs[7] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                    CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                    CU_POINTER_ATTRIBUTE_BUFFER_ID, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                    CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    void *data[7] = {&v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]};
    gocoll_curesult r = cu.PointerGetAttributes(7, attrs, data, p);
    *type = (unsigned)(v[0] & 0xffffffffu), *managed = (unsigned)(v[1] & 0xffffffffu);
    *ctx = (uintptr_t)v[2], *dev = (int)(v[3] & 0xffffffffu), *buffer_id = v[4];
    *start = (gocoll_cuptr)v[5], *size = (size_t)v[6];
    return r;
}

gocoll_curesult gocoll_cu_mem_alloc(size_t n, gocoll_cuptr *p) { return cu.MemAlloc(p, n); }
gocoll_curesult gocoll_cu_mem_free(gocoll_cuptr p) { return cu.MemFree(p); }

gocoll_curesult gocoll_cu_mem_host_alloc(size_t n, uintptr_t *p) {
    void *q = NULL;
    gocoll_curesult r = cu.MemHostAlloc(&q, n, CU_MEMHOSTALLOC_PORTABLE);
    *p = (uintptr_t)q;
    return r;
}

gocoll_curesult gocoll_cu_mem_free_host(uintptr_t p) { return cu.MemFreeHost((void *)p); }

gocoll_curesult gocoll_cu_memcpy_async(gocoll_cuptr dst, gocoll_cuptr src, size_t n, uintptr_t stream) {
    return cu.MemcpyAsync(dst, src, n, (P)stream);
}

gocoll_curesult gocoll_cu_stream_create(uintptr_t *s) {
    P q = NULL;
    gocoll_curesult r = cu.StreamCreate(&q, CU_STREAM_NON_BLOCKING);
    *s = (uintptr_t)q;
    return r;
}

gocoll_curesult gocoll_cu_stream_destroy(uintptr_t s) { return cu.StreamDestroy((P)s); }
gocoll_curesult gocoll_cu_stream_wait_event(uintptr_t s, uintptr_t e) { return cu.StreamWaitEvent((P)s, (P)e, 0); }

gocoll_curesult gocoll_cu_event_create(uintptr_t *e) {
    P q = NULL;
    /* Not CU_EVENT_BLOCKING_SYNC: its waits sleep until an interrupt,
     * tens of microseconds after the work (see gpu.Driver.EventCreate). */
    gocoll_curesult r = cu.EventCreate(&q, CU_EVENT_DISABLE_TIMING);
    *e = (uintptr_t)q;
    return r;
}

gocoll_curesult gocoll_cu_event_destroy(uintptr_t e) { return cu.EventDestroy((P)e); }
gocoll_curesult gocoll_cu_event_record(uintptr_t e, uintptr_t s) { return cu.EventRecord((P)e, (P)s); }
gocoll_curesult gocoll_cu_event_query(uintptr_t e) { return cu.EventQuery((P)e); }
gocoll_curesult gocoll_cu_stream_query(uintptr_t s) { return cu.StreamQuery((P)s); }
gocoll_curesult gocoll_cu_event_synchronize(uintptr_t e) { return cu.EventSynchronize((P)e); }

gocoll_curesult gocoll_cu_module_load(const char *ptx, uintptr_t *mod, char *log, int loglen) {
    P m = NULL;
    int opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[2] = {log, (void *)(uintptr_t)loglen};
    if (loglen > 0) log[0] = 0;
    gocoll_curesult r = cu.ModuleLoadDataEx(&m, ptx, 2, opts, vals);
    *mod = (uintptr_t)m;
    return r;
}

gocoll_curesult gocoll_cu_module_get_function(uintptr_t mod, const char *name, uintptr_t *f) {
    P q = NULL;
    gocoll_curesult r = cu.ModuleGetFunction(&q, (P)mod, name);
    *f = (uintptr_t)q;
    return r;
}

gocoll_curesult gocoll_cu_module_unload(uintptr_t mod) { return cu.ModuleUnload((P)mod); }

gocoll_curesult gocoll_cu_launch(uintptr_t f, unsigned grid, unsigned block, uintptr_t stream,
                             const unsigned long long *args, int nargs) {
    /* The kernel's parameters, in the order of its .param list (see
     * kernels.go), each a .u64: the driver copies them at launch. */
    void *params[GOCOLL_MAX_KERNEL_ARGS];
    if (nargs < 0 || nargs > GOCOLL_MAX_KERNEL_ARGS) return 1; /* CUDA_ERROR_INVALID_VALUE */
    for (int i = 0; i < nargs; i++) params[i] = (void *)&args[i];
    return cu.LaunchKernel((P)f, grid, 1, 1, block, 1, 1, 0, (P)stream, nargs ? params : NULL, NULL);
}

gocoll_curesult gocoll_cu_stream_write_value32(uintptr_t s, gocoll_cuptr addr, unsigned v) {
    return cu.StreamWriteValue32((P)s, addr, v, CU_STREAM_WRITE_VALUE_DEFAULT);
}

gocoll_curesult gocoll_cu_stream_wait_value32(uintptr_t s, gocoll_cuptr addr, unsigned v) {
    return cu.StreamWaitValue32((P)s, addr, v, CU_STREAM_WAIT_VALUE_GEQ);
}

/* One entry of cuStreamBatchMemOp's array (CUstreamBatchMemOpParams, a
 * union of 48 bytes): the wait and write forms share this layout. */
struct batch_op {
    unsigned operation; /* CU_STREAM_MEM_OP_WAIT_VALUE_32 = 1, _WRITE_VALUE_32 = 2 */
    gocoll_cuptr address;
    unsigned long long value; /* value (32 bits) or value64 */
    unsigned flags;           /* CU_STREAM_WAIT_VALUE_GEQ, CU_STREAM_WRITE_VALUE_DEFAULT: 0 */
    gocoll_cuptr alias;
    unsigned long long pad;
};
_Static_assert(sizeof(struct batch_op) == 48, "CUstreamBatchMemOpParams is 48 bytes");

gocoll_curesult gocoll_cu_stream_batch_memop(uintptr_t s, const gocoll_cuptr *addrs, const unsigned *values,
                                             const unsigned char *writes, int n) {
    struct batch_op ops[GOCOLL_MAX_MEMOPS];
    if (n < 0 || n > GOCOLL_MAX_MEMOPS) return 1; /* CUDA_ERROR_INVALID_VALUE */
    memset(ops, 0, sizeof ops);
    for (int i = 0; i < n; i++)
        ops[i].operation = writes[i] ? 2 : 1, ops[i].address = addrs[i], ops[i].value = values[i];
    return cu.StreamBatchMemOp((P)s, (unsigned)n, ops, 0);
}

gocoll_curesult gocoll_cu_memset_d32_async(gocoll_cuptr p, unsigned v, size_t n, uintptr_t s) {
    return cu.MemsetD32Async(p, v, n, (P)s);
}

gocoll_curesult gocoll_cu_device_attribute(int ordinal, int attr, int *v) {
    int dev = 0;
    gocoll_curesult r = cu.DeviceGet(&dev, ordinal);
    return r ? r : cu.DeviceGetAttribute(v, attr, dev);
}

gocoll_curesult gocoll_cu_ipc_get(gocoll_cuptr base, gocoll_ipc_handle *h) { return cu.IpcGetMemHandle(h, base); }

gocoll_curesult gocoll_cu_ipc_open(const gocoll_ipc_handle *h, gocoll_cuptr *p) {
    return cu.IpcOpenMemHandle(p, *h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
}

gocoll_curesult gocoll_cu_ipc_close(gocoll_cuptr p) { return cu.IpcCloseMemHandle(p); }
