/*
 * A stand-in for libcudart.so, for `tests/gpu/run.sh --self-test` only. It
 * allocates "device" memory from the stand-in driver (stubcuda.c, loaded
 * as libcuda.so.1), which the CPU cannot touch, and initialises the driver
 * as the real runtime does; with GPUCOLL_STUB_HOSTMEM=1, or without the
 * stand-in driver, "device" memory is plain host memory.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef int cudaError_t;

static void *(*alloc_fn)(size_t);
static int (*free_fn)(void *), (*copy_fn)(void *, const void *, size_t);
static int looked;

static void look(void) {
    if (looked) return;
    looked = 1;
    const char *h = getenv("GPUCOLL_STUB_HOSTMEM");
    if (h && !strcmp(h, "1")) return;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) return;
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(lib, "cuInit");
    alloc_fn = (void *(*)(size_t))dlsym(lib, "stub_alloc");
    free_fn = (int (*)(void *))dlsym(lib, "stub_free");
    copy_fn = (int (*)(void *, const void *, size_t))dlsym(lib, "stub_copy");
    if (!init || !alloc_fn || !free_fn || !copy_fn) {
        alloc_fn = NULL;
        return;
    }
    init(0);
}

cudaError_t cudaGetDeviceCount(int *n) {
    look();
    *n = 1;
    return 0;
}
cudaError_t cudaSetDevice(int d) { return d == 0 ? 0 : 101; }
cudaError_t cudaMalloc(void **p, size_t n) {
    look();
    *p = alloc_fn ? alloc_fn(n) : malloc(n ? n : 1);
    return *p ? 0 : 2;
}
cudaError_t cudaFree(void *p) {
    if (alloc_fn) return free_fn(p);
    free(p);
    return 0;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, int kind) {
    (void)kind;
    if (alloc_fn) return copy_fn(dst, src, n);
    memcpy(dst, src, n);
    return 0;
}
cudaError_t cudaDeviceSynchronize(void) { return 0; }
const char *cudaGetErrorString(cudaError_t e) { return e ? "stand-in error" : "no error"; }
