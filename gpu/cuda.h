/*
 * The CUDA driver API as gocoll uses it, loaded at run time (cuda.c): no
 * CUDA header or library is needed to build gocoll, and the library loads
 * and runs on machines without a GPU or driver. Only the types and
 * constants below are taken from the driver's ABI (they are facts of
 * cuda.h); every entry point is looked up with dlsym.
 */
#ifndef GOCOLL_GPU_CUDA_H
#define GOCOLL_GPU_CUDA_H

#include <stddef.h>
#include <stdint.h>

typedef int gocoll_curesult;                 /* CUresult */
typedef unsigned long long gocoll_cuptr;     /* CUdeviceptr */
typedef struct { char reserved[64]; } gocoll_ipc_handle; /* CUipcMemHandle */

/* Loads libcuda.so.1 and every entry point gocoll needs. Returns 0, or -1
 * with a message in err naming what is missing. Safe to call again. */
int gocoll_cuda_load(char *err, int errlen);

/* Set (to 1) once the driver is loaded: C code that memcpy's buffers
 * (capi's fast path) must then ask gocoll_cuda_is_device first. */
extern int gocoll_cuda_loaded;

/* What cuPointerGetAttributes says of a buffer (gpu.PointerAttrs in Go). */
struct gocoll_cuda_attrs {
    unsigned type, managed;
    uintptr_t ctx;
    int dev;
    unsigned long long buffer_id;
    gocoll_cuptr start;
    size_t size;
};

/* gocoll_cuda_classify reports whether p is CUDA device or managed memory,
 * and then fills a with the allocation's attributes (one driver call): C
 * code that asked passes the answer on to Go, which does not ask again.
 * Without the driver, or before the process initialised CUDA, it returns
 * 0 at once. gocoll_cuda_is_device is the same question without the
 * attributes. */
int gocoll_cuda_classify(const void *p, struct gocoll_cuda_attrs *a);
int gocoll_cuda_is_device(const void *p);

/* Thin wrappers: each calls one driver entry point through the pointer
 * that gocoll_cuda_load found, and returns its CUresult. */
const char *gocoll_cu_error_name(gocoll_curesult r);
const char *gocoll_cu_error_string(gocoll_curesult r);
gocoll_curesult gocoll_cu_init(void);
gocoll_curesult gocoll_cu_device_count(int *n);
gocoll_curesult gocoll_cu_device_pci_bus_id(int dev, char *buf, int len);
gocoll_curesult gocoll_cu_device_by_pci_bus_id(const char *id, int *dev);
gocoll_curesult gocoll_cu_can_access_peer(int dev, int peer, int *can);
gocoll_curesult gocoll_cu_primary_ctx_active(int dev, int *active);
gocoll_curesult gocoll_cu_primary_ctx_retain(int dev, uintptr_t *ctx);
gocoll_curesult gocoll_cu_primary_ctx_release(int dev);
gocoll_curesult gocoll_cu_ctx_get_current(uintptr_t *ctx);
gocoll_curesult gocoll_cu_ctx_set_current(uintptr_t ctx);
gocoll_curesult gocoll_cu_pointer_attributes(gocoll_cuptr p, unsigned *type, unsigned *managed, uintptr_t *ctx,
                                         int *dev, unsigned long long *buffer_id, gocoll_cuptr *start, size_t *size);
gocoll_curesult gocoll_cu_mem_alloc(size_t n, gocoll_cuptr *p);
gocoll_curesult gocoll_cu_mem_free(gocoll_cuptr p);
gocoll_curesult gocoll_cu_mem_host_alloc(size_t n, uintptr_t *p);
gocoll_curesult gocoll_cu_mem_free_host(uintptr_t p);
gocoll_curesult gocoll_cu_memcpy_async(gocoll_cuptr dst, gocoll_cuptr src, size_t n, uintptr_t stream);
gocoll_curesult gocoll_cu_stream_create(uintptr_t *s);
gocoll_curesult gocoll_cu_stream_destroy(uintptr_t s);
gocoll_curesult gocoll_cu_stream_wait_event(uintptr_t s, uintptr_t e);
gocoll_curesult gocoll_cu_event_create(uintptr_t *e);
gocoll_curesult gocoll_cu_event_destroy(uintptr_t e);
gocoll_curesult gocoll_cu_event_record(uintptr_t e, uintptr_t s);
gocoll_curesult gocoll_cu_event_query(uintptr_t e);
gocoll_curesult gocoll_cu_stream_query(uintptr_t s);
gocoll_curesult gocoll_cu_event_synchronize(uintptr_t e);
gocoll_curesult gocoll_cu_module_load(const char *ptx, uintptr_t *mod, char *log, int loglen);
gocoll_curesult gocoll_cu_module_get_function(uintptr_t mod, const char *name, uintptr_t *f);
gocoll_curesult gocoll_cu_module_unload(uintptr_t mod);
/* The kernel's parameters are nargs 64-bit values, in order (at most
 * GOCOLL_MAX_KERNEL_ARGS, gpu.MaxKernelArgs). */
#define GOCOLL_MAX_KERNEL_ARGS 16
gocoll_curesult gocoll_cu_launch(uintptr_t f, unsigned grid, unsigned block, uintptr_t stream,
                             const unsigned long long *args, int nargs);
gocoll_curesult gocoll_cu_stream_write_value32(uintptr_t s, gocoll_cuptr addr, unsigned v);
gocoll_curesult gocoll_cu_stream_wait_value32(uintptr_t s, gocoll_cuptr addr, unsigned v);
/* cuStreamBatchMemOp of n waits (writes[i] 0: until (int32)(*addrs[i] -
 * values[i]) >= 0) and writes (writes[i] 1), at most GOCOLL_MAX_MEMOPS. */
#define GOCOLL_MAX_MEMOPS 256
gocoll_curesult gocoll_cu_stream_batch_memop(uintptr_t s, const gocoll_cuptr *addrs, const unsigned *values,
                                             const unsigned char *writes, int n);
gocoll_curesult gocoll_cu_memset_d32_async(gocoll_cuptr p, unsigned v, size_t n, uintptr_t s);
gocoll_curesult gocoll_cu_device_attribute(int dev, int attr, int *v);
gocoll_curesult gocoll_cu_ipc_get(gocoll_cuptr base, gocoll_ipc_handle *h);
gocoll_curesult gocoll_cu_ipc_open(const gocoll_ipc_handle *h, gocoll_cuptr *p);
gocoll_curesult gocoll_cu_ipc_close(gocoll_cuptr p);

#endif
