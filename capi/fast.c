/*
 * The fast path for small collectives on one host, entirely in C.
 *
 * Entering Go costs more than a small collective's whole synchronisation,
 * so when a communicator has a shared segment (package intranode) and a
 * call is small, of a predefined type and op, the C entry point runs it
 * here, following intranode's protocol on the same segment: write this
 * rank's data into its slot of the step's set, publish the step in its
 * control line (waking sleepers), spin until every rank has published it,
 * read. If the peers are slow to come, it hands the wait to Go
 * (go_fast_wait), which sleeps on the futex and watches for dead peers and
 * timeouts. Reductions run in rank order, exactly as intranode's do, and
 * MAX/MIN follow the ops package: a NaN operand gives the canonical NaN,
 * and max(+0, -0) = +0, min(+0, -0) = -0.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>
#include "mpi.h"
#include "fast.h"
#include "../gpu/cuda.h"
#include "_cgo_export.h"

#define FAST_MAX 4096   /* largest message (bytes) taken here */
#define SPINS 4000      /* polls before the wait goes to Go */
#define SPINS_CROWDED 64 /* the same when there are more local ranks than cores */
/* Then, when crowded, sched_yield polls for at most this long before Go's
 * futex wait, which also watches for dead peers and timeouts. A time, not
 * a number of yields: on a loaded core one yield can take milliseconds
 * (2000 took 3 s beside a busy loop), and a dead peer would go unnoticed
 * that long per call. 10 ms is far longer than the hand-offs the yields
 * are for (a few µs to a time slice) and far shorter than Go's 100 ms
 * check for dead peers. */
#define YIELD_NS_CROWDED 10000000L
#define MAX_COMMS 1024

struct fastcomm {
    char *base;
    int p, rank, spins, crowded;
    long slot, data_off, ctl_off, bell_off;
};

static struct fastcomm comms[MAX_COMMS + 2]; /* [0] world, [1..] user comms */
int gocoll_fast_enabled; /* bit per collective, set by Go */
long long gocoll_fast_calls[FAST_BARRIER + 1];

long long gocoll_fast_count(int which) {
    return __atomic_load_n(&gocoll_fast_calls[which], __ATOMIC_RELAXED);
}

static struct fastcomm *find(MPI_Comm comm) {
    unsigned h = (unsigned)comm;
    struct fastcomm *f = 0;
    if (h == 0x44000000u)
        f = &comms[0];
    else if (h >= 0x84000000u && h < 0x84000000u + MAX_COMMS)
        f = &comms[1 + (h - 0x84000000u)];
    return f && f->base ? f : 0;
}

void gocoll_fast_attach(int comm, void *base, int p, int rank, long slot, long data_off, long ctl_off, long bell_off, int crowded) {
    struct fastcomm *f = 0;
    unsigned h = (unsigned)comm;
    if (h == 0x44000000u)
        f = &comms[0];
    else if (h >= 0x84000000u && h < 0x84000000u + MAX_COMMS)
        f = &comms[1 + (h - 0x84000000u)];
    if (!f) return;
    f->p = p, f->rank = rank, f->slot = slot, f->data_off = data_off, f->ctl_off = ctl_off, f->bell_off = bell_off;
    /* With more ranks than cores, a peer we wait for may need this core:
     * hand the wait to Go, which sleeps, almost at once. */
    f->spins = crowded ? SPINS_CROWDED : SPINS;
    f->crowded = crowded;
    __atomic_store_n(&f->base, (char *)base, __ATOMIC_RELEASE);
}

void gocoll_fast_detach(int comm) {
    unsigned h = (unsigned)comm;
    if (h == 0x44000000u)
        comms[0].base = 0;
    else if (h >= 0x84000000u && h < 0x84000000u + MAX_COMMS)
        comms[1 + (h - 0x84000000u)].base = 0;
}

static uint64_t *step_of(struct fastcomm *f, int q) { return (uint64_t *)(f->base + f->ctl_off + 64 * q); }
static char *slot_of(struct fastcomm *f, int set, int q) { return f->base + f->data_off + ((long)set * f->p + q) * f->slot; }

/* publish announces the next step and returns it. */
static uint64_t publish(struct fastcomm *f) {
    uint64_t *mine = step_of(f, f->rank);
    uint64_t step = __atomic_load_n(mine, __ATOMIC_RELAXED) + 1;
    __atomic_store_n(mine, step, __ATOMIC_SEQ_CST);
    uint32_t *seq = (uint32_t *)(f->base + f->bell_off);
    int32_t *sleepers = (int32_t *)(f->base + f->bell_off + 4);
    if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST) > 0) {
        __atomic_add_fetch(seq, 1, __ATOMIC_SEQ_CST);
        syscall(SYS_futex, seq, FUTEX_WAKE, INT_MAX, 0, 0, 0);
    }
    return step;
}

static int all_at(struct fastcomm *f, uint64_t step) {
    for (int q = 0; q < f->p; q++)
        if (__atomic_load_n(step_of(f, q), __ATOMIC_ACQUIRE) < step) return 0;
    return 1;
}

/* wait_all spins, then lets Go wait; returns an MPI error code. which
 * (FAST_ALLREDUCE, ...) names the call in Go's error messages. */
static int wait_all(struct fastcomm *f, uint64_t step, MPI_Comm comm, int which) {
    for (int i = 0; i < f->spins; i++) {
        if (all_at(f, step)) return MPI_SUCCESS;
        __builtin_ia32_pause();
    }
    if (f->crowded) {
        /* More ranks than cores: the rank we wait for may be waiting for
         * our core. Yielding hands it over at once; a futex sleep would
         * cost a wake-up on every step. */
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do {
            if (all_at(f, step)) return MPI_SUCCESS;
            sched_yield();
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < YIELD_NS_CROWDED);
    }
    return go_fast_wait(comm, which);
}

enum { T_NONE, T_I32, T_U32, T_I64, T_U64, T_F32, T_F64 };

static int kind_of(MPI_Datatype dt, int *size) {
    switch ((unsigned)dt) {
    case 0x4c000405u: case 0x4c000439u: case 0x4c00041bu: case 0x4c000430u: /* INT, INT32_T, INTEGER, INTEGER4 */
        *size = 4; return T_I32;
    case 0x4c000406u: case 0x4c00043du: /* UNSIGNED, UINT32_T */
        *size = 4; return T_U32;
    case 0x4c000807u: case 0x4c000809u: case 0x4c00083au: case 0x4c000831u: /* LONG, LONG_LONG, INT64_T, INTEGER8 */
        *size = 8; return T_I64;
    case 0x4c000808u: case 0x4c000819u: case 0x4c00083eu: /* UNSIGNED_LONG, UNSIGNED_LONG_LONG, UINT64_T */
        *size = 8; return T_U64;
    case 0x4c00040au: case 0x4c00041cu: case 0x4c000427u: /* FLOAT, REAL, REAL4 */
        *size = 4; return T_F32;
    case 0x4c00080bu: case 0x4c00081fu: case 0x4c000829u: /* DOUBLE, DOUBLE_PRECISION, REAL8 */
        *size = 8; return T_F64;
    }
    return T_NONE;
}

enum { O_NONE, O_SUM, O_PROD, O_MAX, O_MIN };

static int op_of(MPI_Op op) {
    switch ((unsigned)op) {
    case 0x58000003u: return O_SUM;
    case 0x58000004u: return O_PROD;
    case 0x58000001u: return O_MAX;
    case 0x58000002u: return O_MIN;
    }
    return O_NONE;
}

static float fmaxf_go(float a, float b) {
    if (isnan(a) || isnan(b)) return __builtin_nanf("");
    if (a > b) return a;
    if (b > a) return b;
    return signbit(a) && signbit(b) ? a : (signbit(a) ? b : a);
}
static float fminf_go(float a, float b) {
    if (isnan(a) || isnan(b)) return __builtin_nanf("");
    if (a < b) return a;
    if (b < a) return b;
    return signbit(a) ? a : b;
}
static double fmax_go(double a, double b) {
    if (isnan(a) || isnan(b)) return __builtin_nan("");
    if (a > b) return a;
    if (b > a) return b;
    return signbit(a) && signbit(b) ? a : (signbit(a) ? b : a);
}
static double fmin_go(double a, double b) {
    if (isnan(a) || isnan(b)) return __builtin_nan("");
    if (a < b) return a;
    if (b < a) return b;
    return signbit(a) ? a : b;
}

/* Integer sums and products wrap: compute in the unsigned type. */
#define INT_LOOP(T, U)                                                        \
    {                                                                         \
        T *d = dst; const T *x = a, *y = b;                                   \
        switch (op) {                                                         \
        case O_SUM: for (long i = 0; i < n; i++) d[i] = (T)((U)x[i] + (U)y[i]); break; \
        case O_PROD: for (long i = 0; i < n; i++) d[i] = (T)((U)x[i] * (U)y[i]); break; \
        case O_MAX: for (long i = 0; i < n; i++) d[i] = x[i] > y[i] ? x[i] : y[i]; break; \
        case O_MIN: for (long i = 0; i < n; i++) d[i] = x[i] < y[i] ? x[i] : y[i]; break; \
        }                                                                     \
    }                                                                         \
    break;

#define FLOAT_LOOP(T, MAX, MIN)                                               \
    {                                                                         \
        T *d = dst; const T *x = a, *y = b;                                   \
        switch (op) {                                                         \
        case O_SUM: for (long i = 0; i < n; i++) d[i] = x[i] + y[i]; break;   \
        case O_PROD: for (long i = 0; i < n; i++) d[i] = x[i] * y[i]; break;  \
        case O_MAX: for (long i = 0; i < n; i++) d[i] = MAX(x[i], y[i]); break; \
        case O_MIN: for (long i = 0; i < n; i++) d[i] = MIN(x[i], y[i]); break; \
        }                                                                     \
    }                                                                         \
    break;

/* combine sets dst = a op b for n elements of kind k. */
static void combine(int k, int op, void *dst, const void *a, const void *b, long n) {
    switch (k) {
    case T_I32: INT_LOOP(int32_t, uint32_t)
    case T_U32: INT_LOOP(uint32_t, uint32_t)
    case T_I64: INT_LOOP(int64_t, uint64_t)
    case T_U64: INT_LOOP(uint64_t, uint64_t)
    case T_F32: FLOAT_LOOP(float, fmaxf_go, fminf_go)
    case T_F64: FLOAT_LOOP(double, fmax_go, fmin_go)
    }
}

/* reduce_slots sets out = s(0) op ... op s(p-1) over bytes [lo, lo+len). */
static void reduce_slots(struct fastcomm *f, int set, int k, int op, void *out, long lo, long len, int size) {
    long n = len / size;
    if (f->p == 1) {
        memcpy(out, slot_of(f, set, 0) + lo, len);
        return;
    }
    combine(k, op, out, slot_of(f, set, 0) + lo, slot_of(f, set, 1) + lo, n);
    for (int q = 2; q < f->p; q++) combine(k, op, out, out, slot_of(f, set, q) + lo, n);
}

/* CUDA: the fast path memcpy's, so it declines device buffers (the call
 * then goes to Go, which runs it on the device executor). Without the CUDA
 * driver (GOCOLL_CUDA=off, or none on the machine) the test is one load;
 * with it, a pointer query per buffer (none before the program has
 * initialised CUDA). Asking, rather than declining every call once CUDA is
 * loaded, keeps the fast path for the small host-memory calls that CUDA
 * programs make too (scalars, flags, loss values). */
static inline int on_device(const void *sendbuf, const void *recvbuf) {
    if (!__atomic_load_n(&gocoll_cuda_loaded, __ATOMIC_RELAXED)) return 0;
    return (sendbuf && gocoll_cuda_is_device(sendbuf)) || gocoll_cuda_is_device(recvbuf);
}

static int overlaps(const void *a, long alen, const void *b, long blen) {
    return alen > 0 && blen > 0 && (const char *)a < (const char *)b + blen && (const char *)b < (const char *)a + alen;
}

int gocoll_fast_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
    if (!(gocoll_fast_enabled & FAST_ALLREDUCE)) return -1;
    struct fastcomm *f = find(comm);
    int size, k = kind_of(dt, &size), o = op_of(op);
    if (!f || k == T_NONE || o == O_NONE || count <= 0) return -1;
    long len = (long)count * size;
    int inplace = sendbuf == MPI_IN_PLACE;
    if (len > FAST_MAX || len > f->slot || !recvbuf || recvbuf == MPI_IN_PLACE || (!inplace && (!sendbuf || overlaps(sendbuf, len, recvbuf, len))))
        return -1;
    if (on_device(inplace ? NULL : sendbuf, recvbuf)) return -1;
    uint64_t step = __atomic_load_n(step_of(f, f->rank), __ATOMIC_RELAXED) + 1;
    int set = (int)(step & 1);
    memcpy(slot_of(f, set, f->rank), inplace ? recvbuf : sendbuf, len);
    publish(f);
    int rc = wait_all(f, step, comm, FAST_ALLREDUCE);
    if (rc != MPI_SUCCESS) return rc;
    reduce_slots(f, set, k, o, recvbuf, 0, len, size);
    return MPI_SUCCESS;
}

int gocoll_fast_reduce_scatter_block(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
    if (!(gocoll_fast_enabled & FAST_REDUCE_SCATTER_BLOCK)) return -1;
    struct fastcomm *f = find(comm);
    int size, k = kind_of(dt, &size), o = op_of(op);
    if (!f || k == T_NONE || o == O_NONE || count <= 0) return -1;
    long mine = (long)count * size, total = mine * f->p;
    int inplace = sendbuf == MPI_IN_PLACE;
    if (total > FAST_MAX || total > f->slot || !recvbuf || recvbuf == MPI_IN_PLACE || (!inplace && (!sendbuf || overlaps(sendbuf, total, recvbuf, mine))))
        return -1;
    if (on_device(inplace ? NULL : sendbuf, recvbuf)) return -1;
    uint64_t step = __atomic_load_n(step_of(f, f->rank), __ATOMIC_RELAXED) + 1;
    int set = (int)(step & 1);
    memcpy(slot_of(f, set, f->rank), inplace ? recvbuf : sendbuf, total);
    publish(f);
    int rc = wait_all(f, step, comm, FAST_REDUCE_SCATTER_BLOCK);
    if (rc != MPI_SUCCESS) return rc;
    reduce_slots(f, set, k, o, recvbuf, mine * f->rank, mine, size);
    return MPI_SUCCESS;
}

int gocoll_fast_allgather(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm) {
    if (!(gocoll_fast_enabled & FAST_ALLGATHER)) return -1;
    struct fastcomm *f = find(comm);
    int rsize;
    if (!f || kind_of(rtype, &rsize) == T_NONE || rcount <= 0) return -1;
    long n = (long)rcount * rsize;
    int inplace = sendbuf == MPI_IN_PLACE;
    if (!inplace) {
        int ssize;
        if (stype != rtype || scount != rcount || kind_of(stype, &ssize) == T_NONE) return -1;
    }
    if (n > f->slot || n * f->p > FAST_MAX * 4 || !recvbuf || recvbuf == MPI_IN_PLACE ||
        (!inplace && (!sendbuf || overlaps(sendbuf, n, recvbuf, n * f->p))))
        return -1;
    if (on_device(inplace ? NULL : sendbuf, recvbuf)) return -1;
    uint64_t step = __atomic_load_n(step_of(f, f->rank), __ATOMIC_RELAXED) + 1;
    int set = (int)(step & 1);
    memcpy(slot_of(f, set, f->rank), inplace ? (char *)recvbuf + n * f->rank : sendbuf, n);
    publish(f);
    int rc = wait_all(f, step, comm, FAST_ALLGATHER);
    if (rc != MPI_SUCCESS) return rc;
    for (int q = 0; q < f->p; q++)
        if (!(inplace && q == f->rank)) memcpy((char *)recvbuf + n * q, slot_of(f, set, q), n);
    return MPI_SUCCESS;
}

int gocoll_fast_barrier(MPI_Comm comm) {
    if (!(gocoll_fast_enabled & FAST_BARRIER)) return -1;
    struct fastcomm *f = find(comm);
    if (!f) return -1;
    uint64_t step = publish(f);
    return wait_all(f, step, comm, FAST_BARRIER);
}
