/*
 * A stand-in libcuda.so.1, for tests on machines without a GPU: the
 * driver entry points gocoll loads (gpu/cuda.c) and those the device
 * check (gpucoll.c) and the stand-in runtime (stubcudart.c) call, working
 * on host memory. It lets the real loader (dlopen, dlsym, the cgo
 * wrappers), capi's fast-path guard and the device executor run in real
 * processes, and it does what the real driver does that gocoll must cope
 * with:
 *
 * - "Device" memory is reserved address space the CPU cannot touch
 *   (PROT_NONE); its bytes live in a separate shared mapping (a memfd),
 *   and every copy and kernel translates addresses. So a gocoll code path
 *   that reads device memory with the CPU crashes at once.
 * - Freed address ranges are reused, the last freed first (a new
 *   allocation of the same or a smaller size gets the same address), as
 *   the real allocator often does; every allocation has a new buffer id
 *   (CU_POINTER_ATTRIBUTE_BUFFER_ID) and a new IPC handle.
 * - Cross-process IPC: a handle names the owner's memfd (pid, fd, inode);
 *   cuIpcOpenMemHandle maps it in another process at a new address of its
 *   own reserved space, cuIpcCloseMemHandle unmaps it. A mapping keeps
 *   the memory alive after the owner's cuMemFree (it then holds the old
 *   bytes, as real freed memory may); a handle of freed memory no longer
 *   opens.
 * - Streams: gocoll's (non-blocking) streams run each operation before it
 *   returns. Work on the legacy default stream (NULL or
 *   CU_STREAM_LEGACY), on a thread's per-thread default stream
 *   (CU_STREAM_PER_THREAD) and on blocking streams is deferred until
 *   something orders after it: a synchronous copy, cuMemFree,
 *   cuCtxSynchronize, cuStreamSynchronize of that stream, or an event
 *   recorded on it (the work runs at the record). A copy from pageable
 *   memory takes its bytes when it is issued. So code that reads device
 *   memory without waiting for the default streams reads the old bytes.
 * - A kernel whose operands are not aligned for its element type sets
 *   CUDA_ERROR_MISALIGNED_ADDRESS (716), sticky as on a GPU: the launch
 *   returns success, every later call on the context fails with it.
 *
 * Kernels are run by name (gocoll_<op>_<type>) with the semantics of
 * package ops. gpucoll_stub_report (which gpucoll.c calls when it finds
 * it) prints, with GPUCOLL_STUB_REPORT=1, what the process did
 * ("stubcuda: pid N: ..."), for the self-test to count.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct { char reserved[64]; } CUipcMemHandle;

enum {
    OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3, INVALID_CONTEXT = 201,
    INVALID_HANDLE = 400, NOT_FOUND = 500, MISALIGNED = 716, NOT_SUPPORTED = 801,
};

#define SPACE (1ull << 36)
#define PAGE 4096ull
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char *space, *next; /* device addresses: PROT_NONE */
static int initialised;
static CUresult sticky; /* a context-killing error, once one happened */
static __thread void *current;
static char ctx_obj; /* the one context */

/* An allocation of this process (fd >= 0, its memfd) or a mapping of
 * another process's (imported, opened refs times). */
struct alloc {
    char *va, *data;
    size_t n, reserved;
    unsigned long long id;
    int fd, imported, refs;
    pid_t owner;
    unsigned long long owner_id;
};
static struct alloc *allocs;
static int nallocs, capallocs;
static unsigned long long next_id = 1;

/* Freed ranges, the last freed on top. */
static struct { char *va; size_t reserved; } *freed;
static int nfreed, capfreed;

static struct {
    long allocs, reused, handles, opened, closed, deferred, misaligned;
} stats;

void gpucoll_stub_report(void) {
    if (!getenv("GPUCOLL_STUB_REPORT") || strcmp(getenv("GPUCOLL_STUB_REPORT"), "1")) return;
    fprintf(stderr,
            "stubcuda: pid %d: allocations %ld (at a reused address %ld), IPC handles made %ld, opened %ld, closed %ld, "
            "copies deferred on default streams %ld, misaligned launches %ld, sticky error %d\n",
            (int)getpid(), stats.allocs, stats.reused, stats.handles, stats.opened, stats.closed, stats.deferred,
            stats.misaligned, sticky);
}

/* find returns the allocation or mapping that holds [a, a+n), or NULL.
 * mu is held. */
static struct alloc *find(const char *a, size_t n) {
    for (int i = 0; i < nallocs; i++)
        if (a >= allocs[i].va && a + n <= allocs[i].va + allocs[i].n) return &allocs[i];
    return NULL;
}

static int in_space(const char *a) { return space && a >= space && a < space + SPACE; }

static char *backing(CUdeviceptr p, size_t n) {
    char *a = (char *)(uintptr_t)p;
    if (!in_space(a)) return NULL;
    pthread_mutex_lock(&mu);
    struct alloc *al = find(a, n ? n : 1);
    char *r = al ? al->data + (a - al->va) : NULL;
    pthread_mutex_unlock(&mu);
    return r;
}

/* mem returns the bytes behind any address: device memory translated,
 * host memory as it is. */
static char *mem(CUdeviceptr p, size_t n) {
    char *a = (char *)(uintptr_t)p;
    if (in_space(a)) return backing(p, n);
    return a;
}

/* reserve returns n bytes of device address space: a freed range (the
 * last freed first) when reuse allows and one is big enough, else new.
 * mu is held. */
static char *reserve(size_t reserved, int reuse) {
    if (!space) {
        space = mmap(NULL, SPACE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (space == MAP_FAILED) abort();
        next = space;
    }
    if (reuse)
        for (int i = nfreed - 1; i >= 0; i--)
            if (freed[i].reserved >= reserved) {
                char *va = freed[i].va;
                memmove(&freed[i], &freed[i + 1], sizeof freed[0] * (size_t)(nfreed - i - 1));
                nfreed--;
                stats.reused++;
                return va;
            }
    if ((size_t)(next - space) + reserved > SPACE) return NULL;
    char *va = next;
    next += reserved;
    return va;
}

static struct alloc *add(void) {
    if (nallocs == capallocs) {
        capallocs = capallocs ? 2 * capallocs : 64;
        allocs = realloc(allocs, sizeof allocs[0] * (size_t)capallocs);
        if (!allocs) abort();
    }
    memset(&allocs[nallocs], 0, sizeof allocs[0]);
    allocs[nallocs].fd = -1;
    return &allocs[nallocs++];
}

static void drop(struct alloc *a) { *a = allocs[--nallocs]; }

/* ---- deferred work on the default and blocking streams ---- */

#define LEGACY ((void *)1)
#define PER_THREAD ((void *)2)
struct stream { unsigned flags; };
static __thread int tid;
static int ntids;

struct op {
    struct op *next;
    void *stream; /* LEGACY, PER_THREAD or a blocking stream */
    int tid;      /* the issuing thread, for PER_THREAD */
    CUdeviceptr dst, src;
    size_t n;
    char *bytes; /* a pageable source's bytes, taken at the call */
};
static struct op *ops, **ops_tail = &ops;
static pthread_mutex_t ops_mu = PTHREAD_MUTEX_INITIALIZER;

static int my_tid(void) {
    if (!tid) tid = __atomic_add_fetch(&ntids, 1, __ATOMIC_RELAXED);
    return tid;
}

/* stream_of says where an operation on s goes: NULL runs it now. */
static void *stream_of(void *s) {
    if (s == NULL || s == LEGACY) return LEGACY;
    if (s == PER_THREAD) return PER_THREAD;
    return ((struct stream *)s)->flags & 1 ? NULL : s; /* CU_STREAM_NON_BLOCKING runs now */
}

static CUresult copy_now(CUdeviceptr dst, CUdeviceptr src, const char *bytes, size_t n) {
    char *d = mem(dst, n), *s = bytes ? (char *)bytes : mem(src, n);
    if (!d || !s) return INVALID_VALUE;
    memmove(d, s, n);
    return OK;
}

/* flush runs the deferred work that an operation ordered after stream s
 * must see: everything for the legacy stream (it waits for every
 * blocking stream) or for a NULL stream (a context-wide wait); the
 * legacy stream's and its own for a per-thread or blocking stream. */
static void flush(void *s) {
    int me = my_tid();
    pthread_mutex_lock(&ops_mu);
    for (struct op **p = &ops; *p;) {
        struct op *o = *p;
        int run = s == NULL || s == LEGACY || o->stream == LEGACY ||
                  (s == PER_THREAD ? o->stream == PER_THREAD && o->tid == me : o->stream == s);
        if (!run) {
            p = &o->next;
            continue;
        }
        copy_now(o->dst, o->src, o->bytes, o->n);
        *p = o->next;
        free(o->bytes);
        free(o);
    }
    ops_tail = &ops;
    while (*ops_tail) ops_tail = &(*ops_tail)->next;
    pthread_mutex_unlock(&ops_mu);
}

/* copy copies n bytes on stream s: now, or deferred. */
static CUresult copy(CUdeviceptr dst, CUdeviceptr src, size_t n, void *s) {
    void *q = stream_of(s);
    if (!q) return copy_now(dst, src, NULL, n);
    if (!mem(dst, n) || !mem(src, n)) return INVALID_VALUE;
    struct op *o = calloc(1, sizeof *o);
    if (!o) return OUT_OF_MEMORY;
    o->stream = q, o->tid = my_tid(), o->dst = dst, o->src = src, o->n = n;
    if (!in_space((char *)(uintptr_t)src)) { /* pageable host memory: its bytes now */
        o->bytes = malloc(n ? n : 1);
        if (!o->bytes) {
            free(o);
            return OUT_OF_MEMORY;
        }
        memcpy(o->bytes, (char *)(uintptr_t)src, n);
    }
    pthread_mutex_lock(&ops_mu);
    *ops_tail = o, ops_tail = &o->next;
    stats.deferred++;
    pthread_mutex_unlock(&ops_mu);
    return OK;
}

/* ---- the driver API ---- */

#define NEED_INIT if (!initialised) return NOT_INITIALIZED
#define NEED_CTX                                      \
    if (!initialised) return NOT_INITIALIZED;         \
    if (sticky) return sticky;                        \
    if (current != &ctx_obj) return INVALID_CONTEXT

CUresult cuGetErrorName(CUresult r, const char **s) {
    switch (r) {
    case OK: *s = "CUDA_SUCCESS"; break;
    case INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case NOT_INITIALIZED: *s = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; break;
    case NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
    case MISALIGNED: *s = "CUDA_ERROR_MISALIGNED_ADDRESS"; break;
    case NOT_SUPPORTED: *s = "CUDA_ERROR_NOT_SUPPORTED"; break;
    default: *s = "CUDA_ERROR_UNKNOWN"; break;
    }
    return OK;
}
CUresult cuGetErrorString(CUresult r, const char **s) {
    *s = r == MISALIGNED ? "misaligned address (stand-in driver)" : "error of the stand-in driver";
    return OK;
}
CUresult cuInit(unsigned f) {
    (void)f;
    initialised = 1;
    return OK;
}
CUresult cuDriverGetVersion(int *v) {
    *v = 12000;
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
CUresult cuDeviceGetName(char *name, int len, int dev) {
    NEED_INIT;
    if (dev != 0 || len < 1) return INVALID_VALUE;
    snprintf(name, (size_t)len, "gocoll stand-in device (no GPU)");
    return OK;
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
    if (dev != 0) return INVALID_VALUE;
    *ctx = &ctx_obj;
    return OK;
}
CUresult cuDevicePrimaryCtxRelease_v2(int dev) { return dev == 0 ? OK : INVALID_VALUE; }
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
CUresult cuCtxSynchronize(void) {
    NEED_CTX;
    flush(NULL);
    return OK;
}

/* cuPointerGetAttributes: attributes 1 context, 2 memory type, 3 device
 * pointer, 6 sync memops, 7 buffer id, 8 managed, 9 device ordinal, 10
 * legacy IPC capable, 11 range start, 12 range size, 13 mapped. */
CUresult cuPointerGetAttributes(unsigned n, int *attrs, void **data, CUdeviceptr p) {
    NEED_INIT;
    if (sticky) return sticky;
    char *a = (char *)(uintptr_t)p;
    struct alloc al = {0};
    int found = 0;
    pthread_mutex_lock(&mu);
    struct alloc *f = in_space(a) ? find(a, 1) : NULL;
    if (f) al = *f, found = 1;
    pthread_mutex_unlock(&mu);
    for (unsigned k = 0; k < n; k++) {
        switch (attrs[k]) {
        case 1: *(void **)data[k] = found ? &ctx_obj : NULL; break;
        case 2: *(unsigned *)data[k] = found ? 2 : 0; break;
        case 3: *(CUdeviceptr *)data[k] = found ? p : 0; break;
        case 6: *(int *)data[k] = 0; break;
        case 7: *(unsigned long long *)data[k] = found ? al.id : 0; break;
        case 8: *(unsigned *)data[k] = 0; break;
        case 9: *(int *)data[k] = found ? 0 : -1; break;
        case 10: *(int *)data[k] = found && !al.imported; break;
        case 11: *(CUdeviceptr *)data[k] = found ? (CUdeviceptr)(uintptr_t)al.va : 0; break;
        case 12: *(size_t *)data[k] = found ? al.n : 0; break;
        case 13: *(int *)data[k] = found; break;
        default: return INVALID_VALUE;
        }
    }
    return OK;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
    NEED_CTX;
    if (!n) return INVALID_VALUE;
    size_t reserved = (n + PAGE - 1) & ~(PAGE - 1);
    int fd = memfd_create("gpucoll-stub", MFD_CLOEXEC);
    if (fd < 0) return OUT_OF_MEMORY;
    char *data = MAP_FAILED;
    if (ftruncate(fd, (off_t)reserved) == 0) data = mmap(NULL, reserved, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (data == MAP_FAILED) {
        close(fd);
        return OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&mu);
    char *va = reserve(reserved, 1);
    if (!va) {
        pthread_mutex_unlock(&mu);
        munmap(data, reserved), close(fd);
        return OUT_OF_MEMORY;
    }
    struct alloc *al = add();
    al->va = va, al->data = data, al->n = n, al->reserved = reserved, al->fd = fd, al->id = next_id++;
    stats.allocs++;
    pthread_mutex_unlock(&mu);
    *p = (CUdeviceptr)(uintptr_t)va;
    return OK;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
    NEED_CTX;
    flush(NULL); /* cuMemFree waits for the device */
    pthread_mutex_lock(&mu);
    char *a = (char *)(uintptr_t)p;
    struct alloc *al = in_space(a) ? find(a, 1) : NULL;
    if (!al || al->va != a || al->imported) {
        pthread_mutex_unlock(&mu);
        return INVALID_VALUE;
    }
    munmap(al->data, al->reserved);
    close(al->fd);
    if (nfreed == capfreed) {
        capfreed = capfreed ? 2 * capfreed : 64;
        freed = realloc(freed, sizeof freed[0] * (size_t)capfreed);
        if (!freed) abort();
    }
    freed[nfreed].va = al->va, freed[nfreed].reserved = al->reserved, nfreed++;
    drop(al);
    pthread_mutex_unlock(&mu);
    return OK;
}
CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags) {
    NEED_CTX;
    (void)flags;
    *p = malloc(n ? n : 1);
    return *p ? OK : OUT_OF_MEMORY;
}
CUresult cuMemFreeHost(void *p) {
    free(p);
    return OK;
}

/* Copies: the synchronous ones run on the legacy stream, after its
 * deferred work; the asynchronous ones on their stream. */
CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    NEED_CTX;
    flush(LEGACY);
    return copy_now(dst, src, NULL, n);
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    NEED_CTX;
    if (!backing(dst, n)) return INVALID_VALUE;
    return cuMemcpy(dst, (CUdeviceptr)(uintptr_t)src, n);
}
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    NEED_CTX;
    if (!backing(src, n)) return INVALID_VALUE;
    return cuMemcpy((CUdeviceptr)(uintptr_t)dst, src, n);
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    NEED_CTX;
    if (!backing(dst, n) || !backing(src, n)) return INVALID_VALUE;
    return cuMemcpy(dst, src, n);
}
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, void *stream) {
    NEED_CTX;
    return copy(dst, src, n, stream);
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, void *stream) {
    NEED_CTX;
    if (!backing(dst, n)) return INVALID_VALUE;
    return copy(dst, (CUdeviceptr)(uintptr_t)src, n, stream);
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void *stream) {
    NEED_CTX;
    if (!backing(dst, n) || !backing(src, n)) return INVALID_VALUE;
    return copy(dst, src, n, stream);
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, void *stream) {
    NEED_CTX;
    if (!backing(src, n)) return INVALID_VALUE;
    return copy((CUdeviceptr)(uintptr_t)dst, src, n, stream);
}

CUresult cuStreamCreate(void **s, unsigned flags) {
    NEED_CTX;
    struct stream *q = malloc(sizeof *q);
    if (!q) return OUT_OF_MEMORY;
    q->flags = flags;
    *s = q;
    return OK;
}
CUresult cuStreamDestroy_v2(void *s) {
    if (s == NULL || s == LEGACY || s == PER_THREAD) return INVALID_HANDLE;
    flush(s); /* its work completes */
    free(s);
    return OK;
}
CUresult cuStreamSynchronize(void *s) {
    NEED_CTX;
    void *q = stream_of(s);
    if (q) flush(q);
    return OK;
}
CUresult cuStreamWaitEvent(void *s, void *e, unsigned f) {
    NEED_CTX;
    (void)s, (void)e, (void)f;
    return OK; /* the event's work ran when it was recorded */
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
    (void)e;
    void *q = stream_of(s);
    if (q) flush(q); /* the event completes after the stream's work: run it now */
    return OK;
}
CUresult cuEventQuery(void *e) {
    (void)e;
    return sticky;
}
CUresult cuEventSynchronize(void *e) {
    (void)e;
    return sticky;
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
    if (sticky) return sticky;
    char pat[128];
    snprintf(pat, sizeof pat, ".entry %s(", name);
    if (!strstr(m, pat)) return NOT_FOUND;
    *f = strdup(name);
    return OK;
}
CUresult cuModuleUnload(void *m) {
    free(m);
    return sticky;
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
    (void)gy, (void)gz, (void)by, (void)bz, (void)shm, (void)extra;
    if (!gx || !bx || bx > 1024) return INVALID_VALUE;
    char opname[8], type[8];
    if (sscanf(f, "gocoll_%7[a-z]_%7[a-z0-9]", opname, type) != 2) return INVALID_VALUE;
    int op = !strcmp(opname, "sum") ? 0 : !strcmp(opname, "prod") ? 1 : !strcmp(opname, "max") ? 2 : !strcmp(opname, "min") ? 3 : -1;
    CUdeviceptr dp = *(CUdeviceptr *)params[0], ap = *(CUdeviceptr *)params[1], bp = *(CUdeviceptr *)params[2];
    unsigned long long n = *(unsigned long long *)params[3];
    int size = !strcmp(type, "f16") || !strcmp(type, "bf16") ? 2 : (!strcmp(type, "f32") || !strcmp(type, "s32") || !strcmp(type, "u32")) ? 4 : 8;
    char *d = backing(dp, n * size), *a = backing(ap, n * size), *b = backing(bp, n * size);
    if (op < 0 || (n && (!d || !a || !b))) return INVALID_VALUE; /* operands must be device memory */
    void *q = stream_of(stream);
    if (q) flush(q); /* the kernel runs after its stream's earlier work */
    if (n && ((dp | ap | bp) & (CUdeviceptr)(size - 1))) {
        /* A GPU faults on the first misaligned load or store: the launch
         * itself succeeds, the context is dead from then on. */
        sticky = MISALIGNED;
        stats.misaligned++;
        return OK;
    }
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

/* ---- IPC ---- */

/* What a handle carries: the owner's pid, its memfd and that file's
 * identity (a freed allocation's fd number may name another file by the
 * time the handle is opened), the allocation's id and size. */
struct handle {
    char magic[8];
    int pid, fd;
    unsigned long long dev, ino, id, n;
};
static const char magic[8] = "gcstub1";

CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p) {
    NEED_CTX;
    char *a = (char *)(uintptr_t)p;
    struct stat st;
    pthread_mutex_lock(&mu);
    struct alloc *al = in_space(a) ? find(a, 1) : NULL;
    if (!al || al->imported || fstat(al->fd, &st) != 0) {
        pthread_mutex_unlock(&mu);
        return INVALID_VALUE;
    }
    struct handle x = {{0}, (int)getpid(), al->fd, (unsigned long long)st.st_dev, (unsigned long long)st.st_ino, al->id, al->n};
    memcpy(x.magic, magic, sizeof magic);
    stats.handles++;
    pthread_mutex_unlock(&mu);
    memset(h, 0, sizeof *h);
    memcpy(h->reserved, &x, sizeof x);
    return OK;
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *p, CUipcMemHandle h, unsigned flags) {
    NEED_CTX;
    (void)flags;
    struct handle x;
    memcpy(&x, h.reserved, sizeof x);
    if (memcmp(x.magic, magic, sizeof magic)) return INVALID_VALUE;
    if (x.pid == (int)getpid()) return INVALID_CONTEXT; /* as CUDA: not in the process that made it */
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nallocs; i++)
        if (allocs[i].imported && allocs[i].owner == x.pid && allocs[i].owner_id == x.id) {
            allocs[i].refs++;
            *p = (CUdeviceptr)(uintptr_t)allocs[i].va;
            pthread_mutex_unlock(&mu);
            return OK;
        }
    pthread_mutex_unlock(&mu);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", x.pid, x.fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return INVALID_HANDLE; /* the owner exited, or freed it */
    struct stat st;
    if (fstat(fd, &st) != 0 || (unsigned long long)st.st_dev != x.dev || (unsigned long long)st.st_ino != x.ino) {
        close(fd);
        return INVALID_HANDLE; /* freed: the fd now names another file */
    }
    size_t reserved = (x.n + PAGE - 1) & ~(PAGE - 1);
    char *data = mmap(NULL, reserved, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (data == MAP_FAILED) return OUT_OF_MEMORY;
    pthread_mutex_lock(&mu);
    char *va = reserve(reserved, 0); /* a new address, never a reused one */
    if (!va) {
        pthread_mutex_unlock(&mu);
        munmap(data, reserved);
        return OUT_OF_MEMORY;
    }
    struct alloc *al = add();
    al->va = va, al->data = data, al->n = x.n, al->reserved = reserved, al->imported = 1, al->refs = 1;
    al->owner = x.pid, al->owner_id = x.id, al->id = next_id++;
    stats.opened++;
    pthread_mutex_unlock(&mu);
    *p = (CUdeviceptr)(uintptr_t)va;
    return OK;
}

CUresult cuIpcCloseMemHandle(CUdeviceptr p) {
    NEED_CTX;
    char *a = (char *)(uintptr_t)p;
    pthread_mutex_lock(&mu);
    struct alloc *al = in_space(a) ? find(a, 1) : NULL;
    if (!al || al->va != a || !al->imported) {
        pthread_mutex_unlock(&mu);
        return INVALID_VALUE;
    }
    if (--al->refs == 0) {
        munmap(al->data, al->reserved);
        drop(al);
        stats.closed++;
    }
    pthread_mutex_unlock(&mu);
    return OK;
}
