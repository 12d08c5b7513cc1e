/*
 * A stand-in libcudart, for `run.sh --self-test` only: the few runtime
 * calls gpucoll.c makes when it finds a libcudart, done as the real
 * runtime does them, on the driver (the stand-in libcuda.so.1, loaded
 * with dlopen): the device's primary context, made current on first use;
 * cudaMalloc is cuMemAlloc in it; copies are synchronous.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

typedef int cudaError_t;
typedef unsigned long long CUdeviceptr;

static int (*cuInit)(unsigned), (*cuDevicePrimaryCtxRetain)(void **, int), (*cuCtxSetCurrent)(void *),
    (*cuCtxGetCurrent)(void **), (*cuCtxSynchronize)(void), (*cuMemAlloc)(CUdeviceptr *, size_t),
    (*cuMemFree)(CUdeviceptr), (*cuMemcpy)(CUdeviceptr, CUdeviceptr, size_t), (*cuDeviceGetCount)(int *);
static int state; /* 0 not tried, 1 ready, 2 no driver */
static int device;

enum { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorInvalidDevice = 101, cudaErrorInsufficientDriver = 35 };

/* ready loads the driver and makes the device's primary context current
 * on this thread, as the runtime does before its first real call. */
static cudaError_t ready(void) {
    if (state == 0) {
        state = 2;
        void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
        if (!lib) return cudaErrorInsufficientDriver;
#define SYM(v, name) *(void **)&v = dlsym(lib, name)
        SYM(cuInit, "cuInit"), SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
        SYM(cuCtxSetCurrent, "cuCtxSetCurrent"), SYM(cuCtxGetCurrent, "cuCtxGetCurrent");
        SYM(cuCtxSynchronize, "cuCtxSynchronize"), SYM(cuMemAlloc, "cuMemAlloc_v2"), SYM(cuMemFree, "cuMemFree_v2");
        SYM(cuMemcpy, "cuMemcpy"), SYM(cuDeviceGetCount, "cuDeviceGetCount");
#undef SYM
        if (!cuInit || !cuDevicePrimaryCtxRetain || !cuCtxSetCurrent || !cuCtxGetCurrent || !cuCtxSynchronize ||
            !cuMemAlloc || !cuMemFree || !cuMemcpy || !cuDeviceGetCount || cuInit(0) != 0)
            return cudaErrorInsufficientDriver;
        state = 1;
    }
    if (state != 1) return cudaErrorInsufficientDriver;
    void *cur = NULL;
    if (cuCtxGetCurrent(&cur) != 0) return cudaErrorInvalidValue;
    if (!cur) {
        void *ctx;
        if (cuDevicePrimaryCtxRetain(&ctx, device) != 0 || cuCtxSetCurrent(ctx) != 0) return cudaErrorInvalidDevice;
    }
    return cudaSuccess;
}

/* err maps a driver error to a runtime one (the runtime's codes differ;
 * these tests only tell success from failure, and 716 from the rest). */
static cudaError_t err(int r) { return r == 0 ? cudaSuccess : r == 716 ? 716 : cudaErrorInvalidValue; }

cudaError_t cudaRuntimeGetVersion(int *v) {
    *v = 12000;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int *n) {
    cudaError_t e = ready();
    if (e) return e;
    return err(cuDeviceGetCount(n));
}
cudaError_t cudaSetDevice(int d) {
    if (d != 0) return cudaErrorInvalidDevice;
    device = d;
    return ready();
}
cudaError_t cudaMalloc(void **p, size_t n) {
    cudaError_t e = ready();
    if (e) return e;
    CUdeviceptr d = 0;
    int r = cuMemAlloc(&d, n);
    *p = (void *)(size_t)d;
    return err(r);
}
cudaError_t cudaFree(void *p) {
    cudaError_t e = ready();
    if (e) return e;
    return p ? err(cuMemFree((CUdeviceptr)(size_t)p)) : cudaSuccess;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, int kind) {
    (void)kind; /* the stand-in driver tells device from host addresses */
    cudaError_t e = ready();
    if (e) return e;
    return err(cuMemcpy((CUdeviceptr)(size_t)dst, (CUdeviceptr)(size_t)src, n));
}
cudaError_t cudaDeviceSynchronize(void) {
    cudaError_t e = ready();
    if (e) return e;
    return err(cuCtxSynchronize());
}
const char *cudaGetErrorString(cudaError_t e) {
    return e == 0 ? "no error" : e == 716 ? "misaligned address" : "error of the stand-in runtime";
}
