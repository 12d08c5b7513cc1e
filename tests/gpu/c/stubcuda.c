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
 * - Stream memory operations (cuStreamWriteValue32, cuStreamWaitValue32,
 *   _v2 or not) work on stand-in device memory, IPC mappings included
 *   (the bytes are shared), and on host memory. A wait on one of
 *   gocoll's streams that does not hold when it is issued holds that
 *   stream back: what is queued on it after (copies, memsets, kernels,
 *   writes, event records, waits) runs later, in order, once the value
 *   is there, done by whichever thread of the process next calls the
 *   stand-in or by a thread of its own that polls while a stream is held
 *   back; the event recorded behind it completes then (cuEventQuery says
 *   CUDA_ERROR_NOT_READY until), and a stream made to wait for that
 *   event (cuStreamWaitEvent) is held back too. A wait that still does
 *   not hold after GPUCOLL_STUB_WAIT_TIMEOUT seconds (default 30), where
 *   a GPU would hang, sets CUDA_ERROR_LAUNCH_TIMEOUT (702), sticky, and
 *   says so on stderr. On the default and blocking streams the stand-in
 *   runs their deferred work first and waits in the calling thread.
 *
 * Kernels are run by name with the semantics of package ops:
 * gocoll_<op>_<type> (dst = a op b) and the peer kernels
 * gocoll_peer(v)_<op>_<type> (every destination of an array = T(0, p) of
 * an array of sources, the canonical association; float16 and bfloat16
 * accumulate in float32), whose arrays and operands are checked when they
 * run: not aligned (16 bytes for peerv) is CUDA_ERROR_MISALIGNED_ADDRESS,
 * not device memory CUDA_ERROR_ILLEGAL_ADDRESS, both sticky.
 * gpucoll_empty (gpucoll.c's launch baseline) does nothing.
 *
 * gpucoll_stub_report (which gpucoll.c calls when it finds it) prints,
 * with GPUCOLL_STUB_REPORT=1, what the process did ("stubcuda: pid N:
 * ..."), for the self-test to count; the line ends with the events
 * created and how many of them with CU_EVENT_BLOCKING_SYNC ("events
 * created E (blocking-sync B)"), which gocoll must never ask for (its
 * waits would sleep until an interrupt). gpucoll_stub_blocking_sync_events
 * returns that count to a program that looks the symbol up, and
 * cuDeviceGetAttribute answers it for attribute 0x67630002 (the events
 * created: 0x67630001), so that a Go test reads it through
 * gpu.Driver.DeviceAttribute.
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
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct { char reserved[64]; } CUipcMemHandle;

enum {
    OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3, INVALID_CONTEXT = 201,
    INVALID_HANDLE = 400, NOT_FOUND = 500, NOT_READY = 600, ILLEGAL_ADDRESS = 700, LAUNCH_TIMEOUT = 702,
    MISALIGNED = 716, NOT_SUPPORTED = 801,
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
    long events, blocking_sync, writes, waits, held, peer, batches;
} stats;

/* The fields after "sticky error" are new: run.sh reads the ones before
 * by name ("IPC handles made N,", "opened N,"), so those words appear
 * once. */
void gpucoll_stub_report(void) {
    if (!getenv("GPUCOLL_STUB_REPORT") || strcmp(getenv("GPUCOLL_STUB_REPORT"), "1")) return;
    fprintf(stderr,
            "stubcuda: pid %d: allocations %ld (at a reused address %ld), IPC handles made %ld, opened %ld, closed %ld, "
            "copies deferred on default streams %ld, misaligned launches %ld, sticky error %d, "
            "stream writes %ld, stream waits %ld (held a stream back %ld), peer kernels %ld, "
            "events created %ld (blocking-sync %ld), memop batches %ld\n",
            (int)getpid(), stats.allocs, stats.reused, stats.handles, stats.opened, stats.closed, stats.deferred,
            stats.misaligned, sticky, stats.writes, stats.waits, stats.held, stats.peer, stats.events,
            stats.blocking_sync, stats.batches);
}

/* gpucoll_stub_blocking_sync_events is how many events the process made
 * with CU_EVENT_BLOCKING_SYNC: gocoll must make none. */
long gpucoll_stub_blocking_sync_events(void) { return __atomic_load_n(&stats.blocking_sync, __ATOMIC_RELAXED); }

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
struct qop;
/* A stream made by cuStreamCreate: its flags and, for a non-blocking one
 * (gocoll's), the work held back behind an unsatisfied wait (see "held
 * back" below). */
struct stream {
    unsigned flags;
    struct qop *head, **tail;
    int destroyed; /* by cuStreamDestroy while work was held back: freed once it ran */
    struct stream *next_busy;
};
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

/* ---- held back: gocoll's streams behind an unsatisfied wait ---- */

enum { Q_COPY, Q_MEMSET, Q_WRITE, Q_WAIT, Q_KERNEL, Q_EVENT, Q_WAIT_EVENT };

struct event {
    long recorded, completed; /* done when every record has completed */
    int refs;                 /* held-back operations that name it */
    int destroyed;            /* by cuEventDestroy: freed when refs is 0 */
};

/* An operation queued on a non-blocking stream behind a wait. */
struct qop {
    struct qop *next;
    int kind;
    CUdeviceptr dst, src;
    size_t n;
    char *bytes;       /* Q_COPY from pageable memory: its bytes, taken at the call */
    unsigned v, flags; /* Q_MEMSET (n words), Q_WRITE, Q_WAIT */
    struct event *ev;  /* Q_EVENT, Q_WAIT_EVENT: the record it completes or waits for */
    long gen;
    char fn[64];       /* Q_KERNEL: the entry and its parameters */
    unsigned long long args[8];
    struct timespec since; /* Q_WAIT, Q_WAIT_EVENT: when it was issued */
};

static pthread_mutex_t qmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qcond = PTHREAD_COND_INITIALIZER;
static struct stream *busy; /* the streams with work held back */
static int pumping;         /* the polling thread runs */

static CUresult run_kernel(const char *fn, const unsigned long long *args); /* below */

static void lose_context(CUresult r) {
    CUresult none = OK;
    __atomic_compare_exchange_n(&sticky, &none, r, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

static double seconds_since(const struct timespec *t) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t->tv_sec) + (double)(now.tv_nsec - t->tv_nsec) / 1e9;
}

static double wait_timeout(void) {
    const char *e = getenv("GPUCOLL_STUB_WAIT_TIMEOUT");
    double t = e ? atof(e) : 0;
    return t > 0 ? t : 30;
}

/* holds is cuStreamWaitValue32's comparison: GEQ as the driver makes it,
 * (int32_t)(*addr - v) >= 0, right across a wrap-around; EQ, AND, NOR. */
static int holds(uint32_t have, uint32_t v, unsigned flags) {
    switch (flags & 3) {
    case 0: return (int32_t)(have - v) >= 0;
    case 1: return have == v;
    case 2: return (have & v) != 0;
    default: return ~(have | v) != 0;
    }
}

/* word returns the 32-bit word a stream memory operation reaches: device
 * memory translated (an IPC mapping's bytes are the owner's), host memory
 * as it is; NULL if not 4-byte aligned or not mapped. */
static uint32_t *word(CUdeviceptr addr) {
    if (addr & 3) return NULL;
    return (uint32_t *)mem(addr, 4);
}

static void memset32(CUdeviceptr p, unsigned v, size_t n) {
    uint32_t *w = (uint32_t *)mem(p, 4 * n);
    if (!w) {
        lose_context(ILLEGAL_ADDRESS);
        return;
    }
    for (size_t i = 0; i < n; i++) __atomic_store_n(&w[i], v, __ATOMIC_RELAXED);
}

/* run_op runs o, or returns 0 if it must wait. qmu is held. */
static int run_op(struct qop *o) {
    if (__atomic_load_n(&sticky, __ATOMIC_SEQ_CST)) { /* a lost context runs nothing; its events complete (with the error) */
        if (o->kind == Q_EVENT && o->gen > o->ev->completed) o->ev->completed = o->gen;
        return 1;
    }
    switch (o->kind) {
    case Q_COPY:
        if (copy_now(o->dst, o->src, o->bytes, o->n) != OK) lose_context(ILLEGAL_ADDRESS);
        return 1;
    case Q_MEMSET:
        memset32(o->dst, o->v, o->n);
        return 1;
    case Q_WRITE: {
        uint32_t *w = word(o->dst);
        if (!w) lose_context(ILLEGAL_ADDRESS);
        else __atomic_store_n(w, o->v, __ATOMIC_SEQ_CST); /* after the stream's earlier work */
        return 1;
    }
    case Q_WAIT: {
        uint32_t *w = word(o->dst);
        if (!w) {
            lose_context(ILLEGAL_ADDRESS);
            return 1;
        }
        uint32_t have = __atomic_load_n(w, __ATOMIC_SEQ_CST);
        if (holds(have, o->v, o->flags)) return 1;
        if (seconds_since(&o->since) > wait_timeout()) {
            fprintf(stderr,
                    "stubcuda: pid %d: cuStreamWaitValue32 on %#llx for %u (flags %u) not satisfied after %g s: it holds "
                    "%u; the context is lost (CUDA_ERROR_LAUNCH_TIMEOUT) where a GPU would hang\n",
                    (int)getpid(), o->dst, o->v, o->flags, wait_timeout(), have);
            lose_context(LAUNCH_TIMEOUT);
            return 1;
        }
        return 0;
    }
    case Q_KERNEL:
        if (run_kernel(o->fn, o->args) != OK) lose_context(ILLEGAL_ADDRESS);
        return 1;
    case Q_EVENT:
        if (o->gen > o->ev->completed) o->ev->completed = o->gen;
        return 1;
    case Q_WAIT_EVENT:
        if (o->ev->completed >= o->gen) return 1;
        if (seconds_since(&o->since) > wait_timeout()) {
            fprintf(stderr, "stubcuda: pid %d: cuStreamWaitEvent not satisfied after %g s; the context is lost\n",
                    (int)getpid(), wait_timeout());
            lose_context(LAUNCH_TIMEOUT);
            return 1;
        }
        return 0;
    }
    return 1;
}

static void free_op(struct qop *o) {
    if (o->ev && --o->ev->refs == 0 && o->ev->destroyed) free(o->ev);
    free(o->bytes);
    free(o);
}

/* pump_locked runs the held-back work that can run, until nothing more
 * can, and returns the number of streams still held back. qmu is held. */
static int pump_locked(void) {
    int left, progress;
    do {
        left = 0, progress = 0;
        for (struct stream **sp = &busy; *sp;) {
            struct stream *s = *sp;
            while (s->head && run_op(s->head)) {
                struct qop *o = s->head;
                s->head = o->next;
                free_op(o);
                progress = 1;
            }
            if (s->head) {
                left++;
                sp = &s->next_busy;
                continue;
            }
            s->tail = &s->head;
            *sp = s->next_busy;
            s->next_busy = NULL;
            if (s->destroyed) free(s);
        }
    } while (progress && left);
    return left;
}

static int pump(void) {
    pthread_mutex_lock(&qmu);
    int left = pump_locked();
    pthread_mutex_unlock(&qmu);
    return left;
}

/* The polling thread: runs held-back work as soon as it can, while no
 * thread of the process calls the stand-in (a GPU runs it by itself). */
static void *pump_thread(void *arg) {
    (void)arg;
    struct timespec pause = {0, 20000};
    pthread_mutex_lock(&qmu);
    for (;;) {
        if (!pump_locked()) {
            pthread_cond_wait(&qcond, &qmu);
            continue;
        }
        pthread_mutex_unlock(&qmu);
        nanosleep(&pause, NULL);
        pthread_mutex_lock(&qmu);
    }
    return NULL;
}

/* submit runs o on non-blocking stream s now if nothing is held back
 * there and it can run, else queues it behind what is. */
static void submit(struct stream *s, struct qop *o) {
    if (o->kind == Q_WAIT || o->kind == Q_WAIT_EVENT) clock_gettime(CLOCK_MONOTONIC, &o->since);
    pthread_mutex_lock(&qmu);
    if (!s->head && run_op(o)) {
        free_op(o);
        pthread_mutex_unlock(&qmu);
        return;
    }
    if (!s->head) { /* newly held back */
        s->next_busy = busy, busy = s;
        stats.held++;
    }
    o->next = NULL;
    *s->tail = o, s->tail = &o->next;
    if (!pumping) {
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &a, pump_thread, NULL) == 0) pumping = 1;
        pthread_attr_destroy(&a);
    }
    pthread_cond_signal(&qcond);
    pthread_mutex_unlock(&qmu);
}

static struct qop *new_op(int kind) {
    struct qop *o = calloc(1, sizeof *o);
    if (o) o->kind = kind;
    return o;
}

/* drain runs held-back work until stream s (every stream when s is NULL)
 * has none left, or the context is lost. */
static void drain(struct stream *s) {
    struct timespec pause = {0, 20000};
    for (;;) {
        pthread_mutex_lock(&qmu);
        pump_locked();
        int held = s ? s->head != NULL : busy != NULL;
        pthread_mutex_unlock(&qmu);
        if (!held || __atomic_load_n(&sticky, __ATOMIC_SEQ_CST)) return;
        nanosleep(&pause, NULL);
    }
}

/* nonblocking returns s as one of gocoll's non-blocking streams, or NULL
 * for a default or blocking stream (deferred work, above). */
static struct stream *nonblocking(void *s) { return stream_of(s) ? NULL : (struct stream *)s; }

/* held_back reports whether non-blocking stream s has work held back. */
static int held_back(struct stream *s) {
    pthread_mutex_lock(&qmu);
    int h = s->head != NULL;
    pthread_mutex_unlock(&qmu);
    return h;
}

/* copy copies n bytes on stream s: now, deferred (default and blocking
 * streams), or held back (a non-blocking stream behind a wait). */
static CUresult copy(CUdeviceptr dst, CUdeviceptr src, size_t n, void *s) {
    void *q = stream_of(s);
    if (!q && !held_back(s)) return copy_now(dst, src, NULL, n);
    if (!mem(dst, n) || !mem(src, n)) return INVALID_VALUE;
    if (!q) {
        struct qop *o = new_op(Q_COPY);
        if (!o) return OUT_OF_MEMORY;
        o->dst = dst, o->src = src, o->n = n;
        if (!in_space((char *)(uintptr_t)src)) { /* pageable host memory: its bytes now */
            o->bytes = malloc(n ? n : 1);
            if (!o->bytes) {
                free(o);
                return OUT_OF_MEMORY;
            }
            memcpy(o->bytes, (char *)(uintptr_t)src, n);
        }
        submit(s, o);
        return OK;
    }
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
    case NOT_READY: *s = "CUDA_ERROR_NOT_READY"; break;
    case ILLEGAL_ADDRESS: *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; break;
    case LAUNCH_TIMEOUT: *s = "CUDA_ERROR_LAUNCH_TIMEOUT"; break;
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
    drain(NULL);
    return sticky;
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
    drain(NULL);
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
    struct stream *q = calloc(1, sizeof *q);
    if (!q) return OUT_OF_MEMORY;
    q->flags = flags;
    q->tail = &q->head;
    *s = q;
    return OK;
}
CUresult cuStreamDestroy_v2(void *s) {
    if (s == NULL || s == LEGACY || s == PER_THREAD) return INVALID_HANDLE;
    flush(s); /* its work completes */
    struct stream *q = s;
    pthread_mutex_lock(&qmu);
    if (q->head) q->destroyed = 1; /* held back: freed once it ran, as the driver lets queued work finish */
    else free(q);
    pthread_mutex_unlock(&qmu);
    return OK;
}
CUresult cuStreamSynchronize(void *s) {
    NEED_CTX;
    void *q = stream_of(s);
    if (q) flush(q);
    else drain(s);
    return sticky;
}

/* cuStreamQuery: one of gocoll's streams is done once nothing is held
 * back on it; a default or blocking stream runs its deferred work, as a
 * synchronisation does. */
CUresult cuStreamQuery(void *s) {
    NEED_CTX;
    struct stream *q = nonblocking(s);
    if (!q) {
        void *d = stream_of(s);
        if (d) flush(d);
        else drain(s);
        return sticky;
    }
    pthread_mutex_lock(&qmu);
    pump_locked();
    int idle = q->head == NULL;
    pthread_mutex_unlock(&qmu);
    if (sticky) return sticky;
    return idle ? OK : NOT_READY;
}

/* Events: each record completes when the work before it on its stream
 * has: at once, but behind held-back work. */
CUresult cuStreamWaitEvent(void *s, void *e, unsigned f) {
    NEED_CTX;
    (void)f;
    struct event *ev = e;
    struct stream *q = nonblocking(s);
    pthread_mutex_lock(&qmu);
    pump_locked();
    long gen = ev->recorded;
    int pending = ev->completed < gen;
    if (pending && q) ev->refs++;
    pthread_mutex_unlock(&qmu);
    if (!pending) return OK;
    if (!q) { /* a default or blocking stream: wait here */
        while (!__atomic_load_n(&sticky, __ATOMIC_SEQ_CST)) {
            pthread_mutex_lock(&qmu);
            pump_locked();
            int done = ev->completed >= gen;
            pthread_mutex_unlock(&qmu);
            if (done) break;
            struct timespec pause = {0, 20000};
            nanosleep(&pause, NULL);
        }
        return sticky;
    }
    struct qop *o = new_op(Q_WAIT_EVENT);
    if (!o) return OUT_OF_MEMORY;
    o->ev = ev, o->gen = gen;
    submit(q, o);
    return OK;
}
CUresult cuEventCreate(void **e, unsigned flags) {
    NEED_CTX;
    __atomic_add_fetch(&stats.events, 1, __ATOMIC_RELAXED);
    if (flags & 1) __atomic_add_fetch(&stats.blocking_sync, 1, __ATOMIC_RELAXED); /* CU_EVENT_BLOCKING_SYNC */
    struct event *ev = calloc(1, sizeof *ev);
    if (!ev) return OUT_OF_MEMORY;
    *e = ev;
    return OK;
}
CUresult cuEventDestroy_v2(void *e) {
    struct event *ev = e;
    pthread_mutex_lock(&qmu);
    if (ev->refs) ev->destroyed = 1; /* held-back work names it: freed after */
    else free(ev);
    pthread_mutex_unlock(&qmu);
    return OK;
}
CUresult cuEventRecord(void *e, void *s) {
    NEED_CTX;
    struct event *ev = e;
    void *q = stream_of(s);
    if (q) flush(q); /* the event completes after the stream's work: run it now */
    pthread_mutex_lock(&qmu);
    long gen = ++ev->recorded;
    int held = !q && ((struct stream *)s)->head;
    if (held) ev->refs++;
    else ev->completed = gen;
    pthread_mutex_unlock(&qmu);
    if (held) {
        struct qop *o = new_op(Q_EVENT);
        if (!o) return OUT_OF_MEMORY;
        o->ev = ev, o->gen = gen;
        submit(s, o);
    }
    return OK;
}
CUresult cuEventQuery(void *e) {
    struct event *ev = e;
    pthread_mutex_lock(&qmu);
    pump_locked();
    int done = ev->completed >= ev->recorded;
    pthread_mutex_unlock(&qmu);
    if (sticky) return sticky;
    return done ? OK : NOT_READY;
}
CUresult cuEventSynchronize(void *e) {
    struct timespec pause = {0, 20000};
    for (;;) {
        CUresult r = cuEventQuery(e);
        if (r != NOT_READY) return r;
        nanosleep(&pause, NULL);
    }
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

static int type_size(const char *type) {
    if (!strcmp(type, "f16") || !strcmp(type, "bf16")) return 2;
    if (!strcmp(type, "f32") || !strcmp(type, "s32") || !strcmp(type, "u32")) return 4;
    if (!strcmp(type, "f64") || !strcmp(type, "s64") || !strcmp(type, "u64")) return 8;
    return 0;
}

static int op_of(const char *name) {
    return !strcmp(name, "sum") ? 0 : !strcmp(name, "prod") ? 1 : !strcmp(name, "max") ? 2 : !strcmp(name, "min") ? 3 : -1;
}

/* parse splits a kernel name: gocoll_<op>_<type> (peer 0, 4 parameters)
 * or gocoll_peer(v)_<op>_<type> (peer 1, vector 1 for peerv; 5
 * parameters). It returns the parameter count, or -1. */
static int parse(const char *f, int *op, char type[8], int *peer, int *vec) {
    char opname[8];
    *peer = 0, *vec = 0;
    if (!strncmp(f, "gocoll_peerv_", 13)) *peer = 1, *vec = 1, f += 13;
    else if (!strncmp(f, "gocoll_peer_", 12)) *peer = 1, f += 12;
    else if (!strncmp(f, "gocoll_", 7)) f += 7;
    else return -1;
    if (sscanf(f, "%7[a-z]_%7[a-z0-9]", opname, type) != 2) return -1;
    *op = op_of(opname);
    if (*op < 0 || !type_size(type)) return -1;
    return *peer ? 5 : 4;
}

/* pair_kernel is gocoll_<op>_<type>: d = a op b over n elements. */
static void pair_kernel(int op, const char *type, char *d, const char *a, const char *b, unsigned long long n) {
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
}

/* T(lo, hi), the canonical association (algorithms/canonical.go): split
 * at lo plus the largest power of two below hi-lo. Sums and products, in
 * float (binary16 and bfloat16 widened) or double, rounded once per
 * operation. */
static float tree_f(int op, const float *x, int lo, int hi) {
    if (hi - lo == 1) return x[lo];
    int h = 1;
    while (2 * h < hi - lo) h *= 2;
    float a = tree_f(op, x, lo, lo + h), b = tree_f(op, x, lo + h, hi);
    return op == 0 ? a + b : a * b;
}
static double tree_d(int op, const double *x, int lo, int hi) {
    if (hi - lo == 1) return x[lo];
    int h = 1;
    while (2 * h < hi - lo) h *= 2;
    double a = tree_d(op, x, lo, lo + h), b = tree_d(op, x, lo + h, hi);
    return op == 0 ? a + b : a * b;
}

/* peer_element sets out to T(0, p) of the p elements at in[q] + off:
 * float sums and products along T; the other ops, associative and
 * commutative bit for bit, fold left to right with pair_kernel's
 * semantics. p = 1 is a copy. */
static void peer_element(int op, const char *type, int size, char *const *in, int p, size_t off, char *out) {
    memcpy(out, in[0] + off, (size_t)size);
    if (p == 1) return;
    int fl = type[0] == 'f' || type[0] == 'b';
    if (fl && op <= 1) {
        if (!strcmp(type, "f64")) {
            double x[256];
            for (int q = 0; q < p; q++) memcpy(&x[q], in[q] + off, 8);
            double v = tree_d(op, x, 0, p);
            memcpy(out, &v, 8);
            return;
        }
        float x[256];
        for (int q = 0; q < p; q++) {
            uint16_t h;
            if (size == 4) memcpy(&x[q], in[q] + off, 4);
            else memcpy(&h, in[q] + off, 2), x[q] = type[0] == 'b' ? b2f(h) : h2f(h);
        }
        float v = tree_f(op, x, 0, p);
        if (size == 4) memcpy(out, &v, 4);
        else {
            uint16_t h = type[0] == 'b' ? f2b(v) : f2h(v);
            memcpy(out, &h, 2);
        }
        return;
    }
    for (int q = 1; q < p; q++) pair_kernel(op, type, out, out, in[q] + off, 1);
}

/* peer_kernel is gocoll_peer(v)_<op>_<type> with parameters dsts, ndst,
 * srcs, p, n. A fault (an array or operand not aligned, 16 bytes for the
 * vector variant, or not device memory) loses the context, as on a GPU. */
static CUresult peer_kernel(int op, const char *type, int vec, const unsigned long long *a) {
    CUdeviceptr dsts = a[0], srcs = a[2];
    unsigned long long ndst = a[1], p = a[3], n = a[4];
    if (p < 1 || p > 255 || n == 0) return OK; /* the kernel does nothing */
    __atomic_add_fetch(&stats.peer, 1, __ATOMIC_RELAXED);
    int size = type_size(type);
    unsigned long long align = vec ? 16 : (unsigned long long)size;
    if ((dsts | srcs) & 7) {
        lose_context(MISALIGNED);
        stats.misaligned++;
        return OK;
    }
    uint64_t *dp = ndst ? (uint64_t *)backing(dsts, 8 * ndst) : NULL, *sp = (uint64_t *)backing(srcs, 8 * p);
    if ((ndst && !dp) || !sp) {
        lose_context(ILLEGAL_ADDRESS);
        return OK;
    }
    char *in[256], *out = malloc(n * (size_t)size);
    if (!out) return OUT_OF_MEMORY;
    for (unsigned long long q = 0; q < p; q++) {
        if (sp[q] & (align - 1)) {
            lose_context(MISALIGNED);
            stats.misaligned++;
            free(out);
            return OK;
        }
        if (!(in[q] = backing(sp[q], n * size))) {
            lose_context(ILLEGAL_ADDRESS);
            free(out);
            return OK;
        }
    }
    for (unsigned long long i = 0; i < n; i++) peer_element(op, type, size, in, (int)p, i * size, out + i * size);
    for (unsigned long long d = 0; d < ndst; d++) {
        char *o = (dp[d] & (align - 1)) ? NULL : backing(dp[d], n * size);
        if (!o) {
            lose_context(dp[d] & (align - 1) ? MISALIGNED : ILLEGAL_ADDRESS);
            break;
        }
        memcpy(o, out, n * size);
    }
    free(out);
    return OK;
}

/* run_kernel runs a kernel by name on its parameters' values. */
static CUresult run_kernel(const char *f, const unsigned long long *args) {
    int op, peer, vec;
    char type[8];
    if (parse(f, &op, type, &peer, &vec) < 0) return INVALID_VALUE;
    if (peer) return peer_kernel(op, type, vec, args);
    int size = type_size(type);
    CUdeviceptr dp = args[0], ap = args[1], bp = args[2];
    unsigned long long n = args[3];
    char *d = backing(dp, n * size), *a = backing(ap, n * size), *b = backing(bp, n * size);
    if (n && (!d || !a || !b)) return INVALID_VALUE; /* operands must be device memory */
    if (n && ((dp | ap | bp) & (CUdeviceptr)(size - 1))) {
        /* A GPU faults on the first misaligned load or store: the launch
         * itself succeeds, the context is dead from then on. */
        lose_context(MISALIGNED);
        stats.misaligned++;
        return OK;
    }
    pair_kernel(op, type, d, a, b, n);
    return OK;
}

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shm, void *stream, void **params, void **extra) {
    NEED_CTX;
    (void)gy, (void)gz, (void)by, (void)bz, (void)shm, (void)extra;
    if (!gx || !bx || bx > 1024) return INVALID_VALUE;
    if (!strcmp(f, "gpucoll_empty")) { /* gpucoll's launch baseline: a kernel that does nothing */
        void *q = stream_of(stream);
        if (q) flush(q);
        return OK;
    }
    int op, peer, vec;
    char type[8];
    int nargs = parse(f, &op, type, &peer, &vec);
    if (nargs < 0) return INVALID_VALUE;
    unsigned long long args[8];
    for (int i = 0; i < nargs; i++) args[i] = *(unsigned long long *)params[i];
    if (!peer) { /* the operands must be device memory: checked at the launch */
        int size = type_size(type);
        unsigned long long n = args[3];
        if (n && (!backing(args[0], n * size) || !backing(args[1], n * size) || !backing(args[2], n * size)))
            return INVALID_VALUE;
    }
    void *q = stream_of(stream);
    if (q) flush(q); /* the kernel runs after its stream's earlier work */
    if (q || !held_back(stream)) return run_kernel(f, args);
    struct qop *o = new_op(Q_KERNEL);
    if (!o) return OUT_OF_MEMORY;
    snprintf(o->fn, sizeof o->fn, "%s", (const char *)f);
    memcpy(o->args, args, sizeof args);
    submit(stream, o);
    return OK;
}

/* ---- stream memory operations, memset, attributes ---- */

/* write32 and wait32 are cuStreamWriteValue32 and cuStreamWaitValue32
 * (the _v2 entry points and the first ones alike). */
static CUresult write32(void *s, CUdeviceptr addr, unsigned v, unsigned flags) {
    NEED_CTX;
    (void)flags;
    if (!word(addr)) return INVALID_VALUE;
    __atomic_add_fetch(&stats.writes, 1, __ATOMIC_RELAXED);
    void *q = stream_of(s);
    if (q) {
        flush(q);
        __atomic_store_n(word(addr), v, __ATOMIC_SEQ_CST);
        return OK;
    }
    struct qop *o = new_op(Q_WRITE);
    if (!o) return OUT_OF_MEMORY;
    o->dst = addr, o->v = v;
    submit(s, o);
    return OK;
}
static CUresult wait32(void *s, CUdeviceptr addr, unsigned v, unsigned flags) {
    NEED_CTX;
    if (!word(addr) || (flags & ~3u & ~(1u << 30))) return INVALID_VALUE; /* GEQ, EQ, AND, NOR (, FLUSH) */
    __atomic_add_fetch(&stats.waits, 1, __ATOMIC_RELAXED);
    struct qop *o = new_op(Q_WAIT);
    if (!o) return OUT_OF_MEMORY;
    o->dst = addr, o->v = v, o->flags = flags;
    void *q = stream_of(s);
    if (!q) {
        submit(s, o);
        return OK;
    }
    flush(q); /* a default or blocking stream: wait here */
    clock_gettime(CLOCK_MONOTONIC, &o->since);
    struct timespec pause = {0, 20000};
    for (;;) {
        pthread_mutex_lock(&qmu);
        int done = run_op(o);
        pthread_mutex_unlock(&qmu);
        if (done) break;
        pump();
        nanosleep(&pause, NULL);
    }
    free_op(o);
    return sticky;
}
CUresult cuStreamWriteValue32_v2(void *s, CUdeviceptr addr, unsigned v, unsigned flags) { return write32(s, addr, v, flags); }
CUresult cuStreamWriteValue32(void *s, CUdeviceptr addr, unsigned v, unsigned flags) { return write32(s, addr, v, flags); }
CUresult cuStreamWaitValue32_v2(void *s, CUdeviceptr addr, unsigned v, unsigned flags) { return wait32(s, addr, v, flags); }
CUresult cuStreamWaitValue32(void *s, CUdeviceptr addr, unsigned v, unsigned flags) { return wait32(s, addr, v, flags); }

/* cuStreamBatchMemOp: its 48-byte entries (CUstreamBatchMemOpParams), in
 * order, each a write32 or a wait32. */
struct batch_op {
    unsigned operation; /* 1: wait 32 bits, 2: write 32 bits */
    CUdeviceptr address;
    unsigned long long value;
    unsigned flags;
    CUdeviceptr alias;
    unsigned long long pad;
};
static CUresult batch(void *s, unsigned n, void *params, unsigned flags) {
    NEED_CTX;
    const struct batch_op *ops = params;
    if (flags || (n && !ops)) return INVALID_VALUE;
    __atomic_add_fetch(&stats.batches, 1, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < n; i++) {
        CUresult r = ops[i].operation == 2   ? write32(s, ops[i].address, (unsigned)ops[i].value, ops[i].flags)
                     : ops[i].operation == 1 ? wait32(s, ops[i].address, (unsigned)ops[i].value, ops[i].flags)
                                             : INVALID_VALUE;
        if (r != OK) return r;
    }
    return OK;
}
CUresult cuStreamBatchMemOp_v2(void *s, unsigned n, void *params, unsigned flags) { return batch(s, n, params, flags); }
CUresult cuStreamBatchMemOp(void *s, unsigned n, void *params, unsigned flags) { return batch(s, n, params, flags); }

CUresult cuMemsetD32Async(CUdeviceptr p, unsigned v, size_t n, void *s) {
    NEED_CTX;
    if ((p & 3) || (n && !mem(p, 4 * n))) return INVALID_VALUE;
    if (!n) return OK;
    void *q = stream_of(s);
    if (q) {
        flush(q);
        memset32(p, v, n);
        return OK;
    }
    struct qop *o = new_op(Q_MEMSET);
    if (!o) return OUT_OF_MEMORY;
    o->dst = p, o->v = v, o->n = n;
    submit(s, o);
    return OK;
}

/* The stand-in device's attributes: the ones gocoll asks for, and two
 * of the stand-in's own for tests that reach it through the driver API
 * (gpu.Driver.DeviceAttribute): STUB_ATTR_EVENTS, the events the process
 * created, and STUB_ATTR_BLOCKING_SYNC, how many of them with
 * CU_EVENT_BLOCKING_SYNC. */
enum { STUB_ATTR_EVENTS = 0x67630001, STUB_ATTR_BLOCKING_SYNC = 0x67630002 };
CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
    NEED_INIT;
    if (dev != 0) return 101; /* CUDA_ERROR_INVALID_DEVICE */
    switch (attr) {
    case STUB_ATTR_EVENTS: *v = (int)__atomic_load_n(&stats.events, __ATOMIC_RELAXED); return OK;
    case STUB_ATTR_BLOCKING_SYNC: *v = (int)gpucoll_stub_blocking_sync_events(); return OK;
    case 16: *v = 8; return OK;  /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */
    case 75: *v = 9; return OK;  /* COMPUTE_CAPABILITY_MAJOR */
    case 76: *v = 0; return OK;  /* COMPUTE_CAPABILITY_MINOR */
    case 92: *v = 1; return OK;  /* CAN_USE_STREAM_MEM_OPS(_V1) */
    }
    return INVALID_VALUE;
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
