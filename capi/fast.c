/*
 * The fast path for small collectives on one host, entirely in C.
 *
 * Entering Go costs more than a small collective's whole synchronisation,
 * so when a communicator has a shared segment (package intranode) and a
 * call is small, of a predefined type and op, the C entry point runs it
 * on the shared-memory engine's C half (intranode/engine), which follows
 * intranode's protocol on the same segment. What is here is the C ABI's
 * side of it: MPI handles to the engine's kinds, ops and segments (with
 * the tables generated from Go into engine_gen.h), the device-buffer
 * test, and the engine's slow wait, which goes to Go (gocoll_fast_wait): it
 * sleeps on the futex, watches for dead peers and timeouts, and makes the
 * MPI error that names the call and the rank to blame.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include "mpi.h"
#include "fast.h"
#include "../gpu/cuda.h"
#include "_cgo_export.h"

#define MAX_COMMS 1024

static struct gocoll_shm comms[MAX_COMMS + 2]; /* [0] world, [1..] user comms */
int gocoll_fast_enabled; /* bit per call, set by Go */
long long gocoll_fast_calls[GOCOLL_NUM_CALLS];

long long gocoll_fast_count(int call) {
    if (call < 0 || call >= GOCOLL_NUM_CALLS) return 0;
    return __atomic_load_n(&gocoll_fast_calls[call], __ATOMIC_RELAXED);
}

static struct gocoll_shm *slot_for(MPI_Comm comm) {
    unsigned h = (unsigned)comm;
    if (h == 0x44000000u) return &comms[0];
    if (h >= 0x84000000u && h < 0x84000000u + MAX_COMMS) return &comms[1 + (h - 0x84000000u)];
    return 0;
}

int gocoll_fast_held;

static struct gocoll_shm *find(MPI_Comm comm, int call) {
    if (!(gocoll_fast_enabled & (1 << call))) return 0;
    /* Collective requests in flight run first, in order, in Go. */
    if (__atomic_load_n(&gocoll_fast_held, __ATOMIC_ACQUIRE)) return 0;
    struct gocoll_shm *s = slot_for(comm);
    return s && __atomic_load_n(&s->base, __ATOMIC_ACQUIRE) ? s : 0;
}

static int wait_in_go(struct gocoll_shm *s, int call) { return gocoll_fast_wait((MPI_Comm)s->id, call); }

void gocoll_fast_attach(int comm, void *base, int p, int rank, long slot, long data_off, int crowded) {
    struct gocoll_shm *s = slot_for((MPI_Comm)comm);
    if (s) gocoll_shm_init(s, base, p, rank, slot, data_off, crowded, wait_in_go, comm);
}

void gocoll_fast_detach(int comm) {
    struct gocoll_shm *s = slot_for((MPI_Comm)comm);
    if (s) __atomic_store_n(&s->base, (char *)0, __ATOMIC_RELEASE);
}

/* CUDA: the engine memcpy's, so the fast path declines device buffers
 * (the call then goes to Go, which runs it on the device executor, with
 * what was asked here: pl, so that Go does not ask again).
 * Without the CUDA driver (GOCOLL_CUDA=off, or none on the machine) the
 * test is one load; with it, a pointer query per buffer (none before the
 * program has initialised CUDA). Asking, rather than declining every call
 * once CUDA is loaded, keeps the fast path for the small host-memory
 * calls that CUDA programs make too (scalars, flags, loss values). */
static inline int on_device(struct gocoll_placed *pl, const void *sendbuf, const void *recvbuf) {
    if (!__atomic_load_n(&gocoll_cuda_loaded, __ATOMIC_RELAXED)) return 0;
    pl->asked = 1, pl->ptr[0] = sendbuf, pl->ptr[1] = recvbuf;
    pl->dev[0] = sendbuf && gocoll_cuda_classify(sendbuf, &pl->attrs[0]);
    pl->dev[1] = recvbuf && gocoll_cuda_classify(recvbuf, &pl->attrs[1]);
    return pl->dev[0] || pl->dev[1];
}

static int overlaps(const void *a, long alen, const void *b, long blen) {
    return alen > 0 && blen > 0 && (const char *)a < (const char *)b + blen && (const char *)b < (const char *)a + alen;
}

/* args checks the buffers of a call that reads len bytes from sendbuf
 * (MPI_IN_PLACE: from recvbuf) and writes rlen into recvbuf, and returns
 * the engine's input (NULL in place), or (void *)-1 to decline. A rank
 * that receives nothing (a zero count of MPI_Reduce_scatter) may pass a
 * NULL recvbuf. */
static const void *args(struct gocoll_placed *pl, const void *sendbuf, long len, void *recvbuf, long rlen) {
    int inplace = sendbuf == MPI_IN_PLACE;
    if ((!recvbuf && (rlen > 0 || inplace)) || recvbuf == MPI_IN_PLACE ||
        (!inplace && (!sendbuf || overlaps(sendbuf, len, recvbuf, rlen))) ||
        on_device(pl, inplace ? NULL : sendbuf, recvbuf))
        return (const void *)-1;
    return inplace ? NULL : sendbuf;
}
#define DECLINED ((const void *)-1)

int gocoll_fast_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                          struct gocoll_placed *pl) {
    struct gocoll_shm *s = find(comm, GOCOLL_CALL_ALLREDUCE);
    int kind, size = gocoll_mpich_type((unsigned)dt, &kind), o = gocoll_mpich_op((unsigned)op);
    if (!s || kind == GOCOLL_SHM_K_NONE || o == GOCOLL_SHM_OP_NONE || count <= 0 || (long)count * size > GOCOLL_SHM_MAX) return -1;
    long len = (long)count * size;
    const void *in = args(pl, sendbuf, len, recvbuf, len);
    if (in == DECLINED) return -1;
    return gocoll_shm_allreduce(s, in, recvbuf, count, kind, size, o);
}

static int reduce_scatter(const void *sendbuf, void *recvbuf, const int *counts, int count, MPI_Datatype dt, MPI_Op op,
                          MPI_Comm comm, int call, struct gocoll_placed *pl) {
    struct gocoll_shm *s = find(comm, call);
    int kind, size = gocoll_mpich_type((unsigned)dt, &kind), o = gocoll_mpich_op((unsigned)op);
    if (!s || kind == GOCOLL_SHM_K_NONE || o == GOCOLL_SHM_OP_NONE) return -1;
    long total = 0, mine = counts ? 0 : count;
    if (counts) {
        if (counts == (const int *)MPI_IN_PLACE) return -1;
        for (int q = 0; q < s->p; q++) {
            if (counts[q] < 0) return -1;
            total += counts[q];
        }
        mine = counts[s->rank];
    } else
        total = (long)count * s->p;
    if (total <= 0 || total * size > GOCOLL_SHM_MAX) return -1;
    const void *in = args(pl, sendbuf, total * size, recvbuf, mine * size);
    if (in == DECLINED) return -1;
    return gocoll_shm_reduce_scatter(s, in, recvbuf, counts, count, kind, size, o, call);
}

int gocoll_fast_reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                               struct gocoll_placed *pl) {
    if (!recvcounts) return -1;
    return reduce_scatter(sendbuf, recvbuf, recvcounts, 0, dt, op, comm, GOCOLL_CALL_REDUCE_SCATTER, pl);
}

int gocoll_fast_reduce_scatter_block(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                                     struct gocoll_placed *pl) {
    if (count <= 0) return -1;
    return reduce_scatter(sendbuf, recvbuf, NULL, count, dt, op, comm, GOCOLL_CALL_REDUCE_SCATTER_BLOCK, pl);
}

int gocoll_fast_allgather(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm,
                          struct gocoll_placed *pl) {
    struct gocoll_shm *s = find(comm, GOCOLL_CALL_ALLGATHER);
    int kind, rsize = gocoll_mpich_type((unsigned)rtype, &kind);
    if (!s || rsize == 0 || rcount <= 0) return -1;
    long n = (long)rcount * rsize;
    if (sendbuf != MPI_IN_PLACE && (long)scount * gocoll_mpich_type((unsigned)stype, &kind) != n) return -1;
    const void *in = args(pl, sendbuf, n, recvbuf, n * s->p);
    if (in == DECLINED) return -1;
    return gocoll_shm_allgather(s, in, recvbuf, n);
}

int gocoll_fast_bcast_bytes(void *buf, long bytes, int root, MPI_Comm comm, struct gocoll_placed *pl) {
    struct gocoll_shm *s = find(comm, GOCOLL_CALL_BCAST);
    if (!s || !buf || buf == MPI_IN_PLACE || on_device(pl, NULL, buf)) return -1;
    return gocoll_shm_bcast(s, buf, bytes, root);
}

int gocoll_fast_bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm, struct gocoll_placed *pl) {
    int kind, size = gocoll_mpich_type((unsigned)dt, &kind);
    if (size == 0 || count <= 0) return -1;
    return gocoll_fast_bcast_bytes(buf, (long)count * size, root, comm, pl);
}

int gocoll_fast_barrier(MPI_Comm comm) {
    struct gocoll_shm *s = find(comm, GOCOLL_CALL_BARRIER);
    if (!s) return -1;
    return gocoll_shm_barrier(s);
}
