/*
 * A stand-in libcuda.so.1, for tests on machines without a GPU: the
 * driver entry points gocoll loads (gpu/cuda.c), working on host memory,
 * synchronously. It lets the real loader (dlopen, dlsym, the cgo
 * wrappers), capi's fast-path guard and the device executor run in real
 * processes under gocollrun.
 *
 * "Device" memory is reserved address space the CPU cannot touch
 * (PROT_NONE); its bytes live in a separate mapping, and every copy and
 * kernel translates addresses. So a gocoll code path that reads device
 * memory with the CPU (the C fast path's memcpy, say) crashes at once.
 * Kernels are run by name (gocoll_<op>_<type>) with the semantics of
 * package ops. IPC is not supported (gocoll then stages). Streams and
 * events are trivial: every operation completes before it returns.
 *
 * Also exported, for the stand-in CUDA runtime (stubcudart.c):
 * stub_alloc, stub_free, stub_copy.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct { char reserved[64]; } CUipcMemHandle;

enum {
    OK = 0, INVALID_VALUE = 1, NOT_INITIALIZED = 3, INVALID_CONTEXT = 201, INVALID_HANDLE = 400,
    NOT_FOUND = 500, NOT_SUPPORTED = 801,
};

#define SPACE (1ull << 36)
#define MAXALLOC 65536
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char *space, *next;                /* device addresses: PROT_NONE */
static struct { char *va, *data; size_t n; } allocs[MAXALLOC];
static int nallocs, initialised;
static __thread void *current;
static char ctx_obj; /* the one context */

static char *backing(CUdeviceptr p, size_t n) {
    char *a = (char *)(uintptr_t)p;
    if (!space || a < space || a >= space + SPACE) return NULL;
    pthread_mutex_lock(&mu);
    char *r = NULL;
    for (int i = 0; i < nallocs; i++)
        if (allocs[i].va && a >= allocs[i].va && a + n <= allocs[i].va + allocs[i].n) r = allocs[i].data + (a - allocs[i].va);
    pthread_mutex_unlock(&mu);
    return r;
}

/* mem returns the bytes behind any address: device memory translated,
 * host memory as it is. */
static char *mem(CUdeviceptr p, size_t n) {
    char *a = (char *)(uintptr_t)p;
    if (space && a >= space && a < space + SPACE) return backing(p, n);
    return a;
}

void *stub_alloc(size_t n) {
    pthread_mutex_lock(&mu);
    if (!space) {
        space = mmap(NULL, SPACE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (space == MAP_FAILED) abort();
        next = space;
    }
    char *va = next;
    next += (n + 4095) & ~(size_t)4095;
    if (!n) next += 4096;
    allocs[nallocs].va = va, allocs[nallocs].n = n ? n : 1, allocs[nallocs].data = calloc(1, n ? n : 1);
    nallocs++;
    pthread_mutex_unlock(&mu);
    return va;
}

int stub_free(void *p) {
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nallocs; i++)
        if (allocs[i].va == p) {
            free(allocs[i].data);
            allocs[i].va = NULL;
            pthread_mutex_unlock(&mu);
            return OK;
        }
    pthread_mutex_unlock(&mu);
    return INVALID_VALUE;
}

int stub_copy(void *dst, const void *src, size_t n) {
    char *d = mem((CUdeviceptr)(uintptr_t)dst, n), *s = mem((CUdeviceptr)(uintptr_t)src, n);
    if (!d || !s) return INVALID_VALUE;
    memmove(d, s, n);
    return OK;
}

/* ---- the driver API ---- */

#define NEED_INIT if (!initialised) return NOT_INITIALIZED
#define NEED_CTX                                      \
    if (!initialised) return NOT_INITIALIZED;         \
    if (current != &ctx_obj) return INVALID_CONTEXT

CUresult cuGetErrorName(CUresult r, const char **s) {
    *s = r == OK ? "CUDA_SUCCESS" : r == NOT_INITIALIZED ? "CUDA_ERROR_NOT_INITIALIZED" : r == INVALID_CONTEXT ? "CUDA_ERROR_INVALID_CONTEXT" : "CUDA_ERROR_STUB";
    return OK;
}
CUresult cuGetErrorString(CUresult r, const char **s) {
    (void)r;
    *s = "error of the stand-in driver";
    return OK;
}
CUresult cuInit(unsigned f) {
    (void)f;
    initialised = 1;
    return OK;
}
CUresult cuDeviceGetCount(int *n) {
    NEED_INIT;
    *n = 1;
    return OK;
}
CUresult cuDeviceGet(int *d, int ordinal) {
    NEED_INIT;
    *d = ordinal;
    return ordinal == 0 ? OK : INVALID_VALUE;
}
CUresult cuDeviceGetPCIBusId(char *buf, int len, int dev) {
    NEED_INIT;
    snprintf(buf, (size_t)len, "0000:%02x:00.0", 0x10 + dev);
    return OK;
}
CUresult cuDeviceGetByPCIBusId(int *dev, const char *id) {
    NEED_INIT;
    *dev = 0;
    return strcmp(id, "0000:10:00.0") ? INVALID_VALUE : OK;
}
CUresult cuDeviceCanAccessPeer(int *can, int a, int b) {
    (void)a, (void)b;
    *can = 0;
    return OK;
}
CUresult cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active) {
    NEED_INIT;
    (void)dev;
    *flags = 0, *active = 1;
    return OK;
}
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) {
    NEED_INIT;
    (void)dev;
    *ctx = &ctx_obj;
    return OK;
}
CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
    (void)dev;
    return OK;
}
CUresult cuCtxGetCurrent(void **ctx) {
    NEED_INIT;
    *ctx = current;
    return OK;
}
CUresult cuCtxSetCurrent(void *ctx) {
    NEED_INIT;
    if (ctx && ctx != &ctx_obj) return INVALID_CONTEXT;
    current = ctx;
    return OK;
}

/* cuPointerGetAttributes: attributes 1 context, 2 memory type, 7 buffer
 * id, 8 managed, 9 device ordinal, 11 range start, 12 range size. */
CUresult cuPointerGetAttributes(unsigned n, int *attrs, void **data, CUdeviceptr p) {
    NEED_INIT;
    char *a = (char *)(uintptr_t)p;
    int found = -1;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nallocs; i++)
        if (allocs[i].va && a >= allocs[i].va && a < allocs[i].va + allocs[i].n) found = i;
    pthread_mutex_unlock(&mu);
    for (unsigned k = 0; k < n; k++) {
        switch (attrs[k]) {
        case 1: *(void **)data[k] = found >= 0 ? &ctx_obj : NULL; break;
        case 2: *(unsigned *)data[k] = found >= 0 ? 2 : 0; break;
        case 7: *(unsigned long long *)data[k] = found >= 0 ? (unsigned long long)found + 1 : 0; break;
        case 8: *(unsigned *)data[k] = 0; break;
        case 9: *(int *)data[k] = found >= 0 ? 0 : -1; break;
        case 11: *(CUdeviceptr *)data[k] = found >= 0 ? (CUdeviceptr)(uintptr_t)allocs[found].va : 0; break;
        case 12: *(size_t *)data[k] = found >= 0 ? allocs[found].n : 0; break;
        default: return INVALID_VALUE;
        }
    }
    return OK;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
    NEED_CTX;
    *p = (CUdeviceptr)(uintptr_t)stub_alloc(n);
    return OK;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
    NEED_CTX;
    return stub_free((void *)(uintptr_t)p);
}
CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags) {
    NEED_CTX;
    (void)flags;
    *p = malloc(n ? n : 1);
    return *p ? OK : 2;
}
CUresult cuMemFreeHost(void *p) {
    free(p);
    return OK;
}
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, void *stream) {
    NEED_CTX;
    (void)stream;
    return stub_copy((void *)(uintptr_t)dst, (void *)(uintptr_t)src, n);
}
CUresult cuStreamCreate(void **s, unsigned flags) {
    NEED_CTX;
    (void)flags;
    *s = malloc(1);
    return OK;
}
CUresult cuStreamDestroy_v2(void *s) {
    free(s);
    return OK;
}
CUresult cuStreamWaitEvent(void *s, void *e, unsigned f) {
    (void)s, (void)e, (void)f;
    return OK;
}
CUresult cuEventCreate(void **e, unsigned flags) {
    NEED_CTX;
    (void)flags;
    *e = malloc(1);
    return OK;
}
CUresult cuEventDestroy_v2(void *e) {
    free(e);
    return OK;
}
CUresult cuEventRecord(void *e, void *s) {
    NEED_CTX;
    (void)e, (void)s;
    return OK;
}
CUresult cuEventQuery(void *e) {
    (void)e;
    return OK;
}
CUresult cuEventSynchronize(void *e) {
    (void)e;
    return OK;
}

/* A module is its PTX; a function is the name of one of its entries. */
CUresult cuModuleLoadDataEx(void **m, const void *image, unsigned n, int *opts, void **vals) {
    NEED_CTX;
    (void)n, (void)opts, (void)vals;
    if (!strstr(image, ".entry")) return 218; /* CUDA_ERROR_INVALID_PTX */
    *m = strdup(image);
    return OK;
}
CUresult cuModuleGetFunction(void **f, void *m, const char *name) {
    char pat[128];
    snprintf(pat, sizeof pat, ".entry %s(", name);
    if (!strstr(m, pat)) return NOT_FOUND;
    *f = strdup(name);
    return OK;
}
CUresult cuModuleUnload(void *m) {
    free(m);
    return OK;
}

static float h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, frac = h & 0x3ff, b;
    if (exp == 0x1f) b = sign | 0x7f800000 | frac << 13;
    else if (exp == 0) {
        float f = (float)frac / (1 << 24);
        return sign ? -f : f;
    } else b = sign | (exp + 112) << 23 | frac << 13;
    float f;
    memcpy(&f, &b, 4);
    return f;
}
static uint16_t f2h(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    uint16_t sign = (b >> 16) & 0x8000;
    int exp = (b >> 23) & 0xff;
    uint32_t frac = b & 0x7fffff;
    if (exp == 0xff) return frac ? (uint16_t)(sign | 0x7e00 | (frac >> 13)) : (uint16_t)(sign | 0x7c00);
    int e = exp - 112;
    if (e >= 1) {
        uint32_t h = (uint32_t)e << 10 | frac >> 13, rest = frac & 0x1fff;
        if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
        return h >= 0x7c00 ? (uint16_t)(sign | 0x7c00) : (uint16_t)(sign | h);
    }
    if (exp == 0) return sign;
    uint32_t m = frac | 0x800000;
    unsigned shift = (unsigned)(14 - e);
    if (shift > 25) return sign;
    uint32_t q = m >> shift, rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (q & 1))) q++;
    return (uint16_t)(sign | q);
}
static float b2f(uint16_t h) {
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}
static uint16_t f2b(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    if ((b & 0x7fffffff) > 0x7f800000) return (uint16_t)((b >> 16) | 0x40);
    b += 0x7fff + ((b >> 16) & 1);
    return (uint16_t)(b >> 16);
}

/* fbin is op on two floats with package ops' MAX/MIN: NaN in, canonical
 * NaN out (NAN is 0x7fc00000); for equal operands max ANDs the bits, min
 * ORs them (signed zeros). */
static double fbin(int op, double a, double b, int wide) {
    if (op == 0) return a + b;
    if (op == 1) return a * b;
    if (isnan(a) || isnan(b)) return NAN;
    if (op == 2 ? a > b : a < b) return a;
    if (op == 2 ? b > a : b < a) return b;
    if (wide) {
        uint64_t x, y;
        memcpy(&x, &a, 8), memcpy(&y, &b, 8);
        x = op == 2 ? x & y : x | y;
        memcpy(&a, &x, 8);
        return a;
    }
    float fa = (float)a, fb = (float)b;
    uint32_t x, y;
    memcpy(&x, &fa, 4), memcpy(&y, &fb, 4);
    x = op == 2 ? x & y : x | y;
    memcpy(&fa, &x, 4);
    return fa;
}

#define INTK(T, U)                                                                       \
    for (unsigned long long i = 0; i < n; i++) {                                         \
        T x = ((T *)a)[i], y = ((T *)b)[i];                                              \
        ((T *)d)[i] = op == 0 ? (T)((U)x + (U)y) : op == 1 ? (T)((U)x * (U)y) : op == 2 ? (x > y ? x : y) : (x < y ? x : y); \
    }

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shm, void *stream, void **params, void **extra) {
    NEED_CTX;
    (void)gy, (void)gz, (void)by, (void)bz, (void)shm, (void)stream, (void)extra;
    if (!gx || !bx || bx > 1024) return INVALID_VALUE;
    char opname[8], type[8];
    if (sscanf(f, "gocoll_%7[a-z]_%7[a-z0-9]", opname, type) != 2) return INVALID_VALUE;
    int op = !strcmp(opname, "sum") ? 0 : !strcmp(opname, "prod") ? 1 : !strcmp(opname, "max") ? 2 : !strcmp(opname, "min") ? 3 : -1;
    CUdeviceptr dp = *(CUdeviceptr *)params[0], ap = *(CUdeviceptr *)params[1], bp = *(CUdeviceptr *)params[2];
    unsigned long long n = *(unsigned long long *)params[3];
    int size = !strcmp(type, "f16") || !strcmp(type, "bf16") ? 2 : (!strcmp(type, "f32") || !strcmp(type, "s32") || !strcmp(type, "u32")) ? 4 : 8;
    char *d = backing(dp, n * size), *a = backing(ap, n * size), *b = backing(bp, n * size);
    if (op < 0 || (n && (!d || !a || !b))) return INVALID_VALUE; /* operands must be device memory */
    if (!strcmp(type, "s32")) { INTK(int32_t, uint32_t) }
    else if (!strcmp(type, "u32")) { INTK(uint32_t, uint32_t) }
    else if (!strcmp(type, "s64")) { INTK(int64_t, uint64_t) }
    else if (!strcmp(type, "u64")) { INTK(uint64_t, uint64_t) }
    else if (!strcmp(type, "f32"))
        for (unsigned long long i = 0; i < n; i++) ((float *)d)[i] = (float)fbin(op, ((float *)a)[i], ((float *)b)[i], 0);
    else if (!strcmp(type, "f64"))
        for (unsigned long long i = 0; i < n; i++) ((double *)d)[i] = fbin(op, ((double *)a)[i], ((double *)b)[i], 1);
    else {
        int bf = !strcmp(type, "bf16");
        for (unsigned long long i = 0; i < n; i++) {
            uint16_t x = ((uint16_t *)a)[i], y = ((uint16_t *)b)[i];
            float fx = bf ? b2f(x) : h2f(x), fy = bf ? b2f(y) : h2f(y);
            uint16_t r;
            if (op >= 2 && !isnan(fx) && !isnan(fy) && fx == fy) r = op == 2 ? x & y : x | y;
            else {
                float v = (float)fbin(op, fx, fy, 0);
                r = bf ? f2b(v) : f2h(v);
            }
            ((uint16_t *)d)[i] = r;
        }
    }
    return OK;
}

CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p) {
    (void)h, (void)p;
    return NOT_SUPPORTED;
}
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *p, CUipcMemHandle h, unsigned flags) {
    (void)p, (void)h, (void)flags;
    return NOT_SUPPORTED;
}
CUresult cuIpcCloseMemHandle(CUdeviceptr p) {
    (void)p;
    return INVALID_HANDLE;
}
