/*
 * gc_is_device: whether a buffer is CUDA device (or managed) memory.
 *
 * With gocoll's CUDA runtime on (gc_cuda, set at start-up when
 * GOCOLL_CUDA is not off and the driver loads), the question is asked
 * exactly as gocoll's own classification and capi's fast path ask it
 * (gocoll_cuda_is_device, gpu/cuda.c, on the driver gocoll loaded): such
 * calls run in gocoll, on its device executor.
 *
 * With the runtime off, device buffers go to the host MPI (which may be
 * CUDA-aware), and the library still has to recognise them without
 * linking CUDA: if the process has loaded the driver (libcuda.so.1, by
 * the CUDA runtime or directly), cuPointerGetAttribute says what a
 * pointer is; otherwise no pointer can be device memory. A program may
 * load the driver after its first collective, so until the driver is
 * found the check asks the dynamic loader how many objects it has loaded
 * so far (dl_iterate_phdr's dlpi_adds, stopped at the first object: no
 * file system access) and looks for the driver again only when that
 * number has changed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include "internal.h"
#include "../gpu/cuda.h"

int gc_cuda;

/* From cuda.h: CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_MEMORYTYPE_*. */
enum { ATTR_MEMORY_TYPE = 2, MEM_DEVICE = 2, MEM_UNIFIED = 4 };
typedef int (*getattr_fn)(void *data, int attribute, uintptr_t ptr);
static getattr_fn getattr;
static unsigned long long seen = ~0ull; /* loads counted when we last looked */

static int adds(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    *(unsigned long long *)data = info->dlpi_adds;
    return 1; /* the count is the same in every entry: stop */
}

static getattr_fn driver(void) {
    getattr_fn fn = __atomic_load_n(&getattr, __ATOMIC_ACQUIRE);
    if (fn) return fn;
    unsigned long long n = 0;
    dl_iterate_phdr(adds, &n);
    if (n == __atomic_load_n(&seen, __ATOMIC_RELAXED)) return NULL;
    __atomic_store_n(&seen, n, __ATOMIC_RELAXED);
    void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!lib) return NULL;
    fn = (getattr_fn)dlsym(lib, "cuPointerGetAttribute");
    dlclose(lib); /* the program holds its own reference */
    if (fn) __atomic_store_n(&getattr, fn, __ATOMIC_RELEASE);
    return fn;
}

int gc_is_device(const void *p) {
    if (__atomic_load_n(&gc_cuda, __ATOMIC_RELAXED)) return gocoll_cuda_is_device(p);
    getattr_fn fn = driver();
    unsigned int type = 0;
    if (!fn || !p || fn(&type, ATTR_MEMORY_TYPE, (uintptr_t)p) != 0) return 0; /* host memory, or no context */
    return type == MEM_DEVICE || type == MEM_UNIFIED;
}
