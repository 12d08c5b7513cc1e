/*
 * The collectives' entry points of libgocoll-preload.so: MPI_Allreduce,
 * MPI_Reduce_scatter, MPI_Reduce_scatter_block, MPI_Allgather, their
 * MPI-4 large-count _c forms, and their nonblocking (MPI_I*) and
 * persistent (MPI_*_init) forms. Each decides here, in C, whatever it can
 * without Go (entering Go costs about 0.2 us, a small native collective
 * 0.5 us): whether MPI is running, whether the communicator, datatype and
 * op are ones gocoll handles, and, from a per-communicator cache, what the
 * tuner chose for this size class. Only calls that gocoll runs, the
 * first call of each size class, run-time tuning's trials, and calls on
 * CUDA device memory (which gocoll runs on its device executor, deciding
 * afresh each time) enter Go.
 * Everything else goes to the host MPI's PMPI_ function. The
 * nonblocking and persistent forms are decided the same way (a gc_form);
 * those gocoll runs become requests.c's requests (requests.h).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "internal.h"
#include "counters.h"
#include "requests.h"
#include "_cgo_export.h"

/* For the few small functions of the path a remembered host call takes
 * (below): inlined whatever the compiler's size heuristics say. */
#define ALWAYS_INLINE inline __attribute__((always_inline))

int gc_debug;
int gc_forced_native[GC_NCOLL];

/* Life cycle: waiting for MPI_Init, running, or off for good. */
enum { S_WAITING = 0, S_RUNNING = 1, S_OFF = 2, S_BADCONFIG = 3 };
static int state;
static int found = 1;
static pthread_once_t lookup_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t start_mu = PTHREAD_MUTEX_INITIALIZER;
static int comm_key, self_key;

/* ---- predefined datatypes and ops, by handle ---- */

#define TSLOTS 1024
#define OSLOTS 64
static struct { H h; int16_t type, size; } types[TSLOTS];
static struct { H h; int op; } ops[OSLOTS];
static uint8_t allowed[32][128];

/* This rank's exclusions (preload.h), set by Go before gocoll runs, and
 * the host's MPI_BOR, with which a communicator's ranks agree on them. */
static uint8_t excluded[GC_NOPS][GC_NTYPES];
static H agree_op;
int gc_user_excluded;

void gc_exclude_host(int op, int type, int reasons) {
    if (op >= 0 && op < GC_NOPS && type >= 0 && type < GC_NTYPES) excluded[op][type] |= (uint8_t)reasons;
}

void gc_set_agree_op(gc_handle bor) { agree_op = bor; }

static unsigned slot(H h, unsigned n) { return (unsigned)((h ^ (h >> 7) ^ (h >> 17) ^ (h >> 29)) & (n - 1)); }

void gc_register_type(gc_handle h, int type, int size) {
    if (!h) return;
    for (unsigned i = slot(h, TSLOTS), k = 0; k < TSLOTS; i = (i + 1) & (TSLOTS - 1), k++) {
        if (types[i].h == h) return;
        if (!types[i].h) {
            types[i].h = h, types[i].type = (int16_t)type, types[i].size = (int16_t)size;
            return;
        }
    }
}

void gc_register_op(gc_handle h, int op) {
    if (!h) return;
    for (unsigned i = slot(h, OSLOTS), k = 0; k < OSLOTS; i = (i + 1) & (OSLOTS - 1), k++) {
        if (ops[i].h == h) return;
        if (!ops[i].h) {
            ops[i].h = h, ops[i].op = op;
            return;
        }
    }
}

void gc_allow(int op, int type) {
    if (op >= 0 && op < 32 && type >= 0 && type < 128) allowed[op][type] = 1;
}

static int type_of(H h, int *type, int *size) {
    for (unsigned i = slot(h, TSLOTS), k = 0; k < TSLOTS && types[i].h; i = (i + 1) & (TSLOTS - 1), k++)
        if (types[i].h == h) {
            *type = types[i].type, *size = types[i].size;
            return 1;
        }
    return 0;
}

static int op_of(H h) {
    for (unsigned i = slot(h, OSLOTS), k = 0; k < OSLOTS && ops[i].h; i = (i + 1) & (OSLOTS - 1), k++)
        if (ops[i].h == h) return ops[i].op;
    return -1;
}

/* ---- start-up ---- */

static void lookup(void) { found = gc_lookup_functions() == 0; }

/* The communicator attribute's callbacks: never copied to a duplicate;
 * deleting it (MPI_Comm_free, MPI_Finalize) frees gocoll's state. */
static int comm_copy(H comm, int key, void *extra, void *in, void *out, int *flag) {
    (void)comm, (void)key, (void)extra, (void)in, (void)out;
    *flag = 0;
    return 0;
}

/* comm_gen counts the deletions of gocoll's communicator states: a
 * thread's remembered communicator (last_comm) from an older count may
 * name a freed state, and its handle a new communicator. */
static uint64_t comm_gen;

/* decide_gen counts the events that may change what the slow path would
 * decide for a call it handed to the host before: a communicator state
 * deleted (its handle may come back as another communicator), a decision
 * cache emptied (the tuner asked again once a communicator is set up),
 * MPI_Finalize. A thread's remembered host calls (memos) from an older
 * count are void. It starts at 1, so that a thread's zeroed memos are. */
static uint64_t decide_gen = 1;

static int comm_delete(H comm, int key, void *val, void *extra) {
    (void)comm, (void)key, (void)extra;
    struct gc_comm *cs = val;
    __atomic_fetch_add(&comm_gen, 1, __ATOMIC_ACQ_REL);
    __atomic_fetch_add(&decide_gen, 1, __ATOMIC_ACQ_REL);
    if (cs && cs->id) gc_drop_comm(cs->id);
    if (cs) gc_requests_forget(cs);
    free(cs);
    return 0;
}

/* MPI_Finalize deletes MPI_COMM_SELF's attributes first, while MPI still
 * works: gocoll frees its communicators there and stops. */
static int self_delete(H comm, int key, void *val, void *extra) {
    (void)comm, (void)key, (void)val, (void)extra;
    __atomic_store_n(&state, S_OFF, __ATOMIC_RELEASE);
    __atomic_fetch_add(&decide_gen, 1, __ATOMIC_ACQ_REL);
    gc_finish();
    return 0;
}

/* start reports whether gocoll may handle calls now, starting it at the
 * first call made while MPI is initialized. */
static int start(void) {
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (s != S_WAITING) return s == S_RUNNING;
    pthread_once(&lookup_once, lookup);
    if (!found) return 0;
    int init = 0, fin = 0;
    if (gc_p.Initialized(&init) != 0 || !init) return 0;
    if (gc_p.Finalized(&fin) != 0 || fin) return 0;
    pthread_mutex_lock(&start_mu);
    if (state == S_WAITING) {
        int ns = S_OFF;
        if (gc_lookup_handles() != 0) {
            fprintf(stderr, "gocoll: cannot find the host MPI's predefined objects; using its collectives\n");
        } else if (gc_p.Comm_create_keyval((void *)comm_copy, (void *)comm_delete, &comm_key, NULL) != 0 ||
                   gc_p.Comm_create_keyval((void *)comm_copy, (void *)self_delete, &self_key, NULL) != 0 ||
                   gc_p.Comm_set_attr(gc_c.comm_self, self_key, NULL) != 0) {
            fprintf(stderr, "gocoll: cannot create communicator attributes; using the host MPI's collectives\n");
        } else {
            ns = gc_start() == 0 ? S_RUNNING : S_BADCONFIG;
        }
        __atomic_store_n(&state, ns, __ATOMIC_RELEASE);
    }
    int running = state == S_RUNNING;
    pthread_mutex_unlock(&start_mu);
    return running;
}

static void empty_cache(struct gc_comm *cs) { memset(cs->cache, 0, sizeof cs->cache); }

/* The communicator of this thread's last call and its state, valid while
 * comm_gen is gen: a host call costs MPI_Comm_get_attr only when the
 * communicator changes (on Open MPI the attribute lookup was a third of
 * what a host call spends here, about 60 of 170 cycles). */
static __thread __attribute__((tls_model("initial-exec"))) struct {
    H comm;
    struct gc_comm *cs;
    uint64_t gen;
} last_comm;

/* comm_state returns gocoll's state of a communicator, making it at the
 * first call; NULL for MPI_COMM_NULL. */
static struct gc_comm *comm_state(H comm) {
    if (comm == gc_c.comm_null || (gc_flavor == GC_OMPI && comm == 0)) return NULL;
    uint64_t gen = __atomic_load_n(&comm_gen, __ATOMIC_ACQUIRE);
    if (last_comm.cs && last_comm.comm == comm && last_comm.gen == gen) return last_comm.cs;
    void *v = NULL;
    int flag = 0;
    if (gc_p.Comm_get_attr(comm, comm_key, &v, &flag) != 0) return NULL;
    if (flag && v) {
        last_comm.comm = comm, last_comm.cs = v, last_comm.gen = gen;
        return v;
    }
    struct gc_comm *cs = calloc(1, sizeof *cs);
    if (!cs) return NULL;
    gc_p.Comm_test_inter(comm, &cs->inter);
    gc_p.Comm_rank(comm, &cs->rank);
    gc_p.Comm_size(comm, &cs->size);
    empty_cache(cs);
    /* Every rank makes its first collective call on comm here, in the
     * same call: one host allreduce there ORs the ranks' exclusions, so
     * that a rank whose host differs (another CPU, another SIMD path)
     * cannot route a call differently. */
    if (cs->inter || cs->size < 2 || !agree_op ||
        gc_p.Allreduce(excluded, cs->excluded, (int)sizeof excluded, gc_c.byte, agree_op, comm) != 0)
        memcpy(cs->excluded, excluded, sizeof excluded);
    if (gc_p.Comm_set_attr(comm, comm_key, cs) != 0) {
        free(cs);
        return NULL;
    }
    last_comm.comm = comm, last_comm.cs = cs, last_comm.gen = gen;
    return cs;
}

/* gc_forget empties a communicator's decision cache (the Go half, once
 * the communicator is set up), voiding every thread's memos. */
void gc_forget(struct gc_comm *cs) {
    empty_cache(cs);
    __atomic_fetch_add(&decide_gen, 1, __ATOMIC_ACQ_REL);
}

/* ---- deciding ---- */

/* why_comm checks the communicator of a call. */
static int why_comm(struct gc_call *c, H comm) {
    c->comm = comm;
    c->cs = comm_state(comm);
    if (!c->cs) return GC_R_COMM;
    if (c->cs->inter) return GC_R_INTER;
    if (gc_forced_native[c->coll]) return GC_R_FORCED;
    if (c->cs->native) return GC_R_SETUP;
    return GC_R_NONE;
}

/* why_reduce checks the datatype and op of a reducing call. */
static int why_reduce(struct gc_call *c, H dt, H op) {
    c->dt = dt, c->mpiop = op;
    if (!type_of(dt, &c->type, &c->elem)) return GC_R_DATATYPE;
    int o = op_of(op);
    if (o > 0) {
        if (!allowed[o][c->type]) return GC_R_OP_TYPE;
        c->op = o, c->commutative = 1, c->excluded = c->cs->excluded[o][c->type];
        return GC_R_NONE;
    }
    if (op == gc_c.op_null || op == gc_c.op_replace || op == gc_c.op_no_op || (gc_flavor == GC_OMPI && op == 0))
        return GC_R_OP;
    /* A user-defined op: gocoll applies it with MPI_Reduce_local. */
    int commute = 0;
    if (gc_p.Op_commutative(op, &commute) != 0) return GC_R_OP;
    c->op = 0, c->commutative = commute != 0;
    c->excluded = c->commutative ? gc_user_excluded : 0;
    return GC_R_NONE;
}

/* on_device: whether a buffer gocoll would touch is CUDA device memory.
 * With gocoll's CUDA runtime on, what the driver said of each buffer is
 * kept in c, for the Go half, which does not ask again. */
static int on_device(struct gc_call *c) {
    if (c->bytes == 0) return 0;
    if (gc_cuda) {
        c->dev[0] = !c->inplace && gocoll_cuda_classify(c->sbuf, &c->attrs[0]);
        c->dev[1] = gocoll_cuda_classify(c->rbuf, &c->attrs[1]);
        return c->dev[0] || c->dev[1];
    }
    return (!c->inplace && gc_is_device(c->sbuf)) || gc_is_device(c->rbuf);
}

/* gc_size_class is a size's class, the tuner's (tuner.ClassRange: one
 * per size up to 16 bytes, then eight per doubling, each (lo, hi] so
 * that a power of two tops its class), and its decision's index in a
 * communicator's cache: every class has its own, so sizes a program
 * mixes never take each other's place. */
int gc_size_class(int64_t bytes) {
    if (bytes <= 16) return bytes < 0 ? 0 : (int)bytes;
    uint64_t x = (uint64_t)(bytes - 1);
    int e = 63 - __builtin_clzll(x);
    return e * 8 + (int)((x >> (e - 3)) & 7);
}

/* decide asks the tuner, through the communicator's cache: GC_R_NONE
 * when gocoll runs the call (c->alg set), GC_R_TUNED when the host does,
 * -1 when the call must fail (GOCOLL_FALLBACK=error and a forced
 * algorithm that cannot run it). The cache holds one decision per
 * collective and size class, for the bytes of the class where Go's
 * answer holds (c->lo, c->end); a call outside them, or with another
 * commutativity or exclusion, asks Go, whose answer replaces it. A
 * trial of run-time tuning (c->trial) is never kept: the next call asks
 * Go again, until the class is decided. With gocoll's CUDA runtime on,
 * a call on device memory is a device call (c->device): the tuner is
 * asked every time, with Params.DeviceMemory, and never through the
 * cache, which holds the choices for host memory (the device tuner never
 * answers native, nor an shm algorithm). So every call asks the driver
 * about its buffers once CUDA is initialised (gocoll's classification
 * asks too). */
static int decide(struct gc_call *c) {
    if (gc_cuda && on_device(c)) {
        c->device = 1;
        c->alg = gc_decide(c);
        if (c->alg < -1) return -1;
        return c->alg < 0 ? GC_R_TUNED : GC_R_NONE;
    }
    struct gc_decision *d = &c->cs->cache[c->coll][gc_size_class(c->bytes)];
    if (!gc_debug && d->lo <= c->bytes && c->bytes < d->end && d->commutative == c->commutative &&
        d->excluded == c->excluded) {
        c->alg = d->alg, c->how = d->how, c->cached = 1;
    } else {
        c->lo = c->end = 0;
        c->alg = gc_decide(c);
        if (c->alg < -1) return -1; /* the call must fail (reported) */
        if (c->lo <= c->bytes && c->bytes < c->end) {
            d->lo = c->lo, d->end = c->end;
            d->commutative = (int8_t)c->commutative, d->alg = (int16_t)c->alg, d->how = (int8_t)c->how;
            d->excluded = (int8_t)c->excluded;
        }
    }
    return c->alg < 0 ? GC_R_TUNED : GC_R_NONE;
}

/* why_device: with gocoll's CUDA runtime off (GOCOLL_CUDA=off, or no
 * driver), a device buffer goes to the host MPI, which may be
 * CUDA-aware; checked once gocoll would run the call. With the runtime
 * on, decide has classified the buffers. */
static int why_device(struct gc_call *c) {
    return !gc_cuda && on_device(c) ? GC_R_DEVICE : GC_R_NONE;
}

/* note counts a call handed to the host (and, when the tuner chose the
 * host because a forced algorithm could not run, the fallback) and, with
 * GOCOLL_DEBUG=info, says why (the tuner's choices are logged by the
 * tuner's caller). */
static void note(const struct gc_call *c, int why, const struct gc_form *f) {
    gc_count(c->coll, f ? GC_K_REQUEST_HOST : c->cached ? GC_K_HOST_CACHED : GC_K_HOST);
    if (why == GC_R_TUNED && c->how == 2) gc_count(c->coll, GC_K_FALLBACK);
    if (gc_debug && why != GC_R_TUNED && state == S_RUNNING)
        gc_note_host(c->coll, c->cs ? c->cs->rank : -1, why);
}

/* run hands the call to Go. It returns MPI_SUCCESS, a host error code
 * (after calling the communicator's error handler), -1 when gocoll could
 * not set the communicator up, or -2 when the tuner, asked again once the
 * communicator is set up, gives the call to the host. */
static int run(struct gc_call *c) {
    int rc = gc_run(c);
    if (rc <= 0) return rc;
    int code = gc_host_class(rc);
    gc_p.Comm_call_errhandler(c->comm, code);
    return code;
}

/* fail_call fails a call with MPI_ERR_ARG through the communicator's
 * error handler: GOCOLL_ variables are wrong (reported once, at the
 * first call), or GOCOLL_FALLBACK=error refuses the call (reported). */
static int fail_call(H comm) {
    int code = gc_host_class(12); /* MPI_ERR_ARG */
    gc_p.Comm_call_errhandler(comm, code);
    return code;
}

static int missing(const char *name) {
    fprintf(stderr, "gocoll: the host MPI has no %s\n", name);
    return 16;
}

/* ---- the engine: small shm calls without Go ---- */

/*
 * Where the tuner chose the shm algorithm for a host-memory call, the
 * shared-memory engine's C half (intranode/engine) runs it when it is
 * small (one step of the engine's protocol): entering Go costs about as
 * much as the whole call. It lays the data out as the Go half does for a
 * message of one step, so a rank whose call goes to Go (a user-defined
 * op, a type the C kernels do not reduce, MPI_Reduce_scatter_c's 64-bit
 * counts) still meets the others. The engine's slow wait goes to Go
 * (gc_shm_wait), which sleeps on the segment's futex, watches for dead
 * peers and the timeout, and makes the error.
 */
int gc_shm_alg[GC_NCOLL] = {-1, -1, -1, -1};

static int wait_in_go(struct gocoll_shm *s, int call) { return gc_shm_wait((int)s->id, call); }

void gc_attach_shm(struct gc_comm *cs, void *base, int p, int rank, long slot, long data_off, int crowded) {
    gocoll_shm_init(&cs->shm, base, p, rank, slot, data_off, crowded, wait_in_go, cs->id);
}

void gc_detach_shm(struct gc_comm *cs) { __atomic_store_n(&cs->shm.base, (char *)0, __ATOMIC_RELEASE); }

static int overlap(const void *a, int64_t alen, const void *b, int64_t blen) {
    return alen > 0 && blen > 0 && (const char *)a < (const char *)b + blen && (const char *)b < (const char *)a + alen;
}

/* engine runs a call the tuner gave the shm algorithm on the engine's C
 * half: GOCOLL_SHM_DECLINE when it is not one for it (nothing done), 0,
 * or gocoll's error class. Overlapping send and receive buffers (not in
 * place) are left to Go, which reports them. */
static int engine(const struct gc_call *c) {
    struct gocoll_shm *s = &c->cs->shm;
    if (!__atomic_load_n(&s->base, __ATOMIC_ACQUIRE) || c->bytes <= 0 || s->p != c->cs->size)
        return GOCOLL_SHM_DECLINE; /* the engine declines what is too large for it */
    if (__atomic_load_n(&c->cs->held, __ATOMIC_ACQUIRE))
        return GOCOLL_SHM_DECLINE; /* gocoll requests in flight: Go runs the call after them */
    const void *in = c->inplace ? NULL : c->sbuf;
    int kind = gocoll_shm_kind(c->type);
    int64_t mine = c->count * c->elem; /* bytes this rank receives (allreduce: all) */
    switch (c->coll) {
    case GC_ALLREDUCE:
        if (in && overlap(in, c->bytes, c->rbuf, c->bytes)) return GOCOLL_SHM_DECLINE;
        return gocoll_shm_allreduce(s, in, c->rbuf, c->count, kind, c->elem, c->op);
    case GC_REDUCE_SCATTER_BLOCK:
        if (in && overlap(in, c->bytes, c->rbuf, mine)) return GOCOLL_SHM_DECLINE;
        return gocoll_shm_reduce_scatter(s, in, c->rbuf, NULL, c->count, kind, c->elem, c->op,
                                         GOCOLL_CALL_REDUCE_SCATTER_BLOCK);
    case GC_REDUCE_SCATTER:
        if (c->counts64) return GOCOLL_SHM_DECLINE;
        mine = (int64_t)((const int *)c->counts)[s->rank] * c->elem;
        if (in && overlap(in, c->bytes, c->rbuf, mine)) return GOCOLL_SHM_DECLINE;
        return gocoll_shm_reduce_scatter(s, in, c->rbuf, c->counts, 0, kind, c->elem, c->op, GOCOLL_CALL_REDUCE_SCATTER);
    case GC_ALLGATHER:
        if (in && overlap(in, mine, c->rbuf, c->bytes)) return GOCOLL_SHM_DECLINE;
        return gocoll_shm_allgather(s, in, c->rbuf, mine);
    }
    return GOCOLL_SHM_DECLINE;
}

/* ran_engine runs a checked call on the engine: false if it declines;
 * else true, *rc the call's result, c->engine set. */
static int ran_engine(struct gc_call *c, int *rc) {
    if ((*rc = engine(c)) == GOCOLL_SHM_DECLINE) return 0;
    c->engine = 1;
    gc_count(c->coll, GC_K_FAST);
    if (c->how & GC_HOW_CORRECTED) gc_count(c->coll, GC_K_CORRECTED);
    if (c->remembered) gc_count(c->coll, GC_K_FAST_MEMO);
    if (c->cached) gc_count(c->coll, GC_K_CACHED);
    if (*rc > 0) {
        int code = gc_host_class(*rc);
        gc_p.Comm_call_errhandler(c->comm, code);
        *rc = code;
    }
    return 1;
}

/* ---- run-time tuning's trials ---- */

/*
 * While run-time tuning decides a size class (Go: tune.go), its calls
 * are trials: Go's gc_decide says which candidate runs each (the host's
 * collective or gocoll's best), this half times it on this rank and
 * reports the time (gc_trial_time), and nothing about it is kept (the
 * cache, the thread's memos), so the next call of the class asks Go
 * again, until the ranks have agreed on the winner. gc_tune_delay, set
 * only in a library built with -tags gocolltest, makes a candidate
 * slower on purpose (tests).
 */
int64_t gc_tune_delay[2];

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* trial_start returns the time a trial of candidate k (0 the host, 1
 * gocoll) starts, after the test hook's delay if any, which it times. */
static uint64_t trial_start(int k) {
    uint64_t t0 = now_ns();
    if (gc_tune_delay[k] > 0)
        while (now_ns() - t0 < (uint64_t)gc_tune_delay[k]) __builtin_ia32_pause();
    return t0;
}

static void trial_end(struct gc_call *c, uint64_t t0) { gc_trial_time(c, (int64_t)(now_ns() - t0)); }

/* ran decides a checked call and, if gocoll takes it, runs it: true when
 * the call is done (*rc is its result, also when it must fail), false
 * when the host MPI runs it (*why says why). */
static int ran(struct gc_call *c, int *why, int *rc, const struct gc_form *f) {
    if (f && !f->req) {
        *why = GC_R_BUFFER; /* no request handle: the host reports it */
        return 0;
    }
    c->request = f != NULL;
    if ((*why = decide(c)) < 0) {
        *rc = fail_call(c->comm);
        return 1;
    }
    if (*why || (*why = why_device(c))) return 0;
    if (f && !gc_requests_movable()) {
        *why = GC_R_PROGRESS;
        return 0;
    }
    uint64_t t0 = c->trial ? trial_start(1) : 0;
    if (!f && !c->device && c->alg == gc_shm_alg[c->coll] && ran_engine(c, rc)) {
        if (c->trial) trial_end(c, t0);
        return 1;
    }
    if ((*rc = f ? gc_request_run(c, f) : run(c)) >= 0) {
        if (c->trial) trial_end(c, t0);
        if (c->cached) gc_count(c->coll, GC_K_CACHED);
        if (c->how & GC_HOW_CORRECTED) gc_count(c->coll, GC_K_CORRECTED);
        return 1;
    }
    *why = *rc == -2 ? GC_R_TUNED : GC_R_SETUP;
    return 0;
}

#define HOST(fn) (gc_p.fn ? gc_p.fn : (__typeof__(gc_p.fn))dlsym(RTLD_NEXT, "PMPI_" #fn))

/* ---- the fast path: a thread's last host call of each collective ---- */

/*
 * Where the tuner gives a call to the host, the slow path above checks
 * the communicator, datatype, op and buffers and looks the decision up:
 * about 70 cycles, and a dozen cache lines (the datatype and op tables,
 * the communicator's state and cache, the constants), which the barrier
 * of a benchmark or an application's own work between two calls evicts:
 * measured with a barrier before every call (the pattern MPI suites
 * time), 80-100 ns per 4 B allreduce over Open MPI, a fifth of the call.
 * So each thread remembers, per collective, the last two calls the tuner
 * gave the host (two: programs alternate sizes, a small allreduce and a
 * larger one, say): their communicator, datatype and op (masked as gc_fix masks),
 * and its count (allgather: the receive count and type; reduce-scatter:
 * the sum of the recvcounts). A call that matches it, while decide_gen
 * is unchanged, goes straight to the host: every call with those
 * arguments would (the tuner's answer depends on the size, the op's
 * commutativity and the communicator only; a bad buffer or send type the
 * slow path would also hand to the host). Only predefined ops are
 * remembered (a freed user op's handle may come back non-commutative),
 * and nothing is while GOCOLL_DEBUG=info logs each decision or gocoll's
 * CUDA runtime must look at each call's buffers. A hit counts as a host
 * call decided from the cache, as the slow path would count it, and as
 * remembered (gocoll_test_counter's "<call>.remembered").
 */
struct memo {
    H comm, dt, op, mask; /* mask: all ones on Open MPI, the low 32 bits on MPICH */
    int64_t n;
    uint64_t gen; /* decide_gen when remembered */
    int size;     /* the communicator's size: reduce-scatter sums that many counts */
    int fallback; /* the host was the tuner's choice after a forced algorithm could not run */
    int how;      /* the decision's how (an engine call's GC_HOW_CORRECTED is counted again) */
    /* A call the engine ran (below): what it needs to run it again. */
    int engine, type, elem, op_code;
    struct gc_comm *cs;
};
#define MEMOS 2
static __thread __attribute__((tls_model("initial-exec"))) struct memo memos[GC_NCOLL][MEMOS];

/* same: whether a call's handles are the remembered ones, still valid. */
static ALWAYS_INLINE int same(const struct memo *m, H comm, H dt, H op) {
    return !(((comm ^ m->comm) | (dt ^ m->dt) | (op ^ m->op)) & m->mask) &&
           m->gen == __atomic_load_n(&decide_gen, __ATOMIC_ACQUIRE);
}

/* hit counts a remembered call (GC_K_MEMO: a host call decided from the
 * cache, as the slow path would have counted it, and one remembered). */
static ALWAYS_INLINE int hit(const struct memo *m, int coll) {
    gc_count(coll, GC_K_MEMO);
    if (m->fallback) gc_count(coll, GC_K_FALLBACK);
    return 1;
}

/* remember keeps a call the tuner gave the host (why GC_R_TUNED) or the
 * engine ran (c->engine), decided while decide_gen was gen, by its
 * datatype c->dt (allgather: the receive type), its op c->mpiop (0 for
 * allgather) and its count n. */
static void remember(const struct gc_call *c, int why, int64_t n, uint64_t gen) {
    if ((why != GC_R_TUNED && !c->engine) || gc_debug || gc_cuda || c->device || !c->cs ||
        (c->coll != GC_ALLGATHER && c->op <= 0))
        return;
    struct memo *m = memos[c->coll];
    memmove(m + 1, m, (MEMOS - 1) * sizeof *m); /* the older one goes */
    m->comm = c->comm, m->dt = c->dt, m->op = c->mpiop, m->n = n, m->gen = gen;
    m->mask = gc_flavor == GC_MPICH ? 0xffffffffu : ~(H)0;
    m->size = c->cs->size, m->fallback = c->how == 2, m->how = c->how;
    m->engine = c->engine, m->type = c->type, m->elem = c->elem, m->op_code = c->op, m->cs = c->cs;
}

/* ---- the collectives ---- */

/*
 * Every collective, blocking (f NULL) or as a request (form f), goes
 * through one skeleton (collective, below): recall the thread's memo (a
 * remembered host call goes straight to the host, a remembered engine
 * call to the engine); start gocoll; check the communicator, then the
 * collective's own arguments (its datatypes, op, counts and buffers,
 * which give the call's size); let the tuner decide and run the call if
 * gocoll takes it; else remember and count the host call and hand it to
 * the host. A request never uses the thread's memos nor the engine's C
 * half, and counts its host calls apart (GC_K_REQUEST_HOST).
 *
 * A call's arguments travel as one struct args; the parts that differ
 * between the collectives are the small functions that read it (args_match,
 * why_args, host). The skeleton is always inlined into each collective's
 * entry, with a constant coll, so their switches fold away: a remembered
 * host call costs the loads and compares of its memo, its counter and
 * the host call (a tail call), as when each collective had its own copy
 * of the skeleton.
 */
struct args {
    int coll;
    int large;          /* the _c form: MPI_Count counts (reduce-scatter: its counts are int64_t) */
    const void *sbuf;
    void *rbuf;
    C64 count;          /* allreduce: count; _block: recvcount; allgather: recvcount; reduce-scatter: 0 */
    const void *counts; /* reduce-scatter's recvcounts */
    H dt, op, comm;     /* allgather: dt is the receive type, op 0 */
    C64 scount;         /* allgather's send count and type */
    H stype;
    const struct gc_form *f;
};

/* sum is the total of a reduce-scatter's n recvcounts. */
static ALWAYS_INLINE int64_t sum(const void *counts, int counts64, int n) {
    int64_t t = 0;
    if (counts64)
        for (int i = 0; i < n; i++) t += ((const int64_t *)counts)[i];
    else
        for (int i = 0; i < n; i++) t += ((const int *)counts)[i];
    return t;
}

/* args_match: whether a call is remembered call m. A reduce-scatter's
 * counts are read only once the communicator is known to be m's: the
 * array has one per rank. */
static ALWAYS_INLINE int args_match(const struct memo *m, const struct args *a) {
    if (a->coll == GC_REDUCE_SCATTER)
        return a->counts && same(m, a->comm, a->dt, a->op) && sum(a->counts, a->large, m->size) == m->n;
    return a->count == m->n && same(m, a->comm, a->dt, a->op);
}

/* recall returns the thread's remembered call that a blocking call
 * matches, or NULL. */
static ALWAYS_INLINE const struct memo *recall(const struct args *a) {
    if (a->f) return NULL;
    for (int i = 0; i < MEMOS; i++) {
        const struct memo *m = &memos[a->coll][i];
        if (args_match(m, a)) return m;
    }
    return NULL;
}

/*
 * A remembered engine call. Where the engine ran a call, a call with the
 * same communicator, datatype, op and count would be decided the same
 * (shm, from the cache): it skips the checks and the lookups and runs on
 * the engine at once, if its buffers are ones the slow path would give
 * it (not NULL, not MPI_IN_PLACE as the receive buffer, not device
 * memory; the engine itself declines overlapping ones). Anything else
 * goes down the slow path, which decides it afresh. Counted as the slow
 * path would count it, fast and decided from the cache, and as
 * remembered (GC_K_FAST_MEMO).
 */
static int ran_remembered(const struct memo *m, const struct gc_call *call, H comm, int *rc) {
    struct gc_call c = *call; /* the slow path starts from the caller's, if this declines */
    c.inplace = c.sbuf == gc_c.in_place;
    if (!c.rbuf || c.rbuf == gc_c.in_place || (!c.inplace && !c.sbuf)) return 0;
    c.cs = m->cs, c.type = m->type, c.elem = m->elem, c.op = m->op_code, c.commutative = 1, c.cached = 1, c.remembered = 1;
    c.how = m->how;
    c.comm = gc_fix(comm);
    switch (c.coll) {
    case GC_ALLREDUCE: c.bytes = c.count * c.elem; break;
    case GC_REDUCE_SCATTER: c.bytes = m->n * c.elem; break;
    default: c.bytes = c.count * c.elem * m->size;
    }
    return !on_device(&c) && ran_engine(&c, rc);
}

/* sends_as_remembered: an allgather is remembered by its receive side;
 * the engine runs it again only if it sends in place or as it receives. */
static ALWAYS_INLINE int sends_as_remembered(const struct args *a) {
    return a->coll != GC_ALLGATHER || a->sbuf == gc_c.in_place || (a->stype == a->dt && a->scount == a->count);
}

/* ran_done returns the result of a call gocoll ran, remembering it
 * first if the engine ran it (the arguments as remember's). */
static inline int ran_done(const struct gc_call *c, int rc, int64_t n, uint64_t gen) {
    if (c->engine && rc == 0 && !c->trial) remember(c, GC_R_NONE, n, gen);
    return rc;
}

/* bad_buffers: whether a call that sends and receives count elements
 * (allgather: receives) has a buffer the host must report (a negative
 * count, MPI_IN_PLACE as the receive buffer, a NULL buffer with data). */
static inline int bad_buffers(const struct gc_call *c, int64_t count) {
    return count < 0 || c->rbuf == gc_c.in_place || (count > 0 && (!c->rbuf || (!c->inplace && !c->sbuf)));
}

/* The checks of each collective's own arguments, once its communicator
 * is known (c->cs): GC_R_NONE with c->bytes set (the size the tuner
 * sees), or why the host runs the call. */

static inline int why_allreduce(struct gc_call *c, const struct args *a) {
    int why = why_reduce(c, a->dt, a->op);
    if (why) return why;
    c->bytes = a->count * c->elem;
    return bad_buffers(c, a->count) ? GC_R_BUFFER : GC_R_NONE;
}

static inline int why_reduce_scatter_block(struct gc_call *c, const struct args *a) {
    int why = why_reduce(c, a->dt, a->op);
    if (why) return why;
    c->bytes = a->count * c->elem * c->cs->size;
    return bad_buffers(c, a->count) ? GC_R_BUFFER : GC_R_NONE;
}

/* why_reduce_scatter also sets *total, the sum of the recvcounts (the
 * count the call is remembered by). */
static inline int why_reduce_scatter(struct gc_call *c, const struct args *a, int64_t *total) {
    int why = why_reduce(c, a->dt, a->op);
    if (why) return why;
    int64_t mine = 0;
    int bad = !a->counts;
    for (int i = 0; !bad && i < c->cs->size; i++) {
        int64_t n = a->large ? ((const int64_t *)a->counts)[i] : ((const int *)a->counts)[i];
        if (n < 0) bad = 1;
        *total += n;
        if (i == c->cs->rank) mine = n;
    }
    c->bytes = *total * c->elem;
    if (bad || c->rbuf == gc_c.in_place || (mine > 0 && !c->rbuf) || (*total > 0 && c->inplace && !c->rbuf) ||
        (*total > 0 && !c->inplace && !c->sbuf))
        return GC_R_BUFFER;
    return GC_R_NONE;
}

static inline int why_allgather(struct gc_call *c, const struct args *a) {
    int st = 0, ssize = 0;
    c->dt = a->dt;
    if (!type_of(a->dt, &c->type, &c->elem) || (!c->inplace && !type_of(a->stype, &st, &ssize)))
        return GC_R_DATATYPE;
    if (!c->inplace && a->scount * ssize != a->count * c->elem) return GC_R_SIZES;
    c->bytes = a->count * c->elem * c->cs->size;
    return bad_buffers(c, a->count) || (!c->inplace && a->scount < 0) ? GC_R_BUFFER : GC_R_NONE;
}

/* why_args checks a call's own arguments (above); *n is the count it is
 * remembered by. */
static ALWAYS_INLINE int why_args(struct gc_call *c, const struct args *a, int64_t *n) {
    switch (a->coll) {
    case GC_ALLREDUCE: return why_allreduce(c, a);
    case GC_REDUCE_SCATTER_BLOCK: return why_reduce_scatter_block(c, a);
    case GC_REDUCE_SCATTER: return why_reduce_scatter(c, a, n);
    default: return why_allgather(c, a);
    }
}

/* CALL calls the host's blocking (Fn), nonblocking (In) or persistent
 * (Init) form of a collective, as a call of form f is, or says that the
 * host has none. */
#define CALL1(fn, ...) (HOST(fn) ? HOST(fn)(__VA_ARGS__) : missing("MPI_" #fn))
#define CALL(Fn, In, Init, ...)                                                                             \
    (!f ? CALL1(Fn, __VA_ARGS__)                                                                            \
        : f->persistent ? CALL1(Init, __VA_ARGS__, f->info, f->req) : CALL1(In, __VA_ARGS__, f->req))

/* host hands a call to the host MPI, in its form. */
static ALWAYS_INLINE int host(const struct args *a) {
    const struct gc_form *f = a->f;
    switch (a->coll) {
    case GC_ALLREDUCE:
        if (a->large)
            return CALL(Allreduce_c, Iallreduce_c, Allreduce_init_c, a->sbuf, a->rbuf, a->count, a->dt, a->op, a->comm);
        return CALL(Allreduce, Iallreduce, Allreduce_init, a->sbuf, a->rbuf, (int)a->count, a->dt, a->op, a->comm);
    case GC_REDUCE_SCATTER_BLOCK:
        if (a->large)
            return CALL(Reduce_scatter_block_c, Ireduce_scatter_block_c, Reduce_scatter_block_init_c, a->sbuf, a->rbuf,
                        a->count, a->dt, a->op, a->comm);
        return CALL(Reduce_scatter_block, Ireduce_scatter_block, Reduce_scatter_block_init, a->sbuf, a->rbuf,
                    (int)a->count, a->dt, a->op, a->comm);
    case GC_REDUCE_SCATTER:
        if (a->large)
            return CALL(Reduce_scatter_c, Ireduce_scatter_c, Reduce_scatter_init_c, a->sbuf, a->rbuf, a->counts, a->dt,
                        a->op, a->comm);
        return CALL(Reduce_scatter, Ireduce_scatter, Reduce_scatter_init, a->sbuf, a->rbuf, a->counts, a->dt, a->op,
                    a->comm);
    default:
        if (a->large)
            return CALL(Allgather_c, Iallgather_c, Allgather_init_c, a->sbuf, a->scount, a->stype, a->rbuf, a->count,
                        a->dt, a->comm);
        return CALL(Allgather, Iallgather, Allgather_init, a->sbuf, (int)a->scount, a->stype, a->rbuf, (int)a->count,
                    a->dt, a->comm);
    }
}

/* collective is the skeleton every collective runs through (above). */
static ALWAYS_INLINE int collective(struct args a) {
    const struct memo *m = recall(&a);
    if (m && !m->engine && hit(m, a.coll)) return host(&a);
    struct gc_call c = {.coll = a.coll, .sbuf = a.sbuf, .rbuf = a.rbuf, .count = a.count, .counts = a.counts,
                        .counts64 = a.coll == GC_REDUCE_SCATTER && a.large, .commutative = a.coll == GC_ALLGATHER};
    int why = GC_R_NOT_READY, rc;
    if (m && sends_as_remembered(&a) && ran_remembered(m, &c, a.comm, &rc)) return rc;
    int64_t n = a.count; /* the count the call is remembered by (reduce-scatter: set by why_args) */
    uint64_t gen = __atomic_load_n(&decide_gen, __ATOMIC_ACQUIRE);
    if (start()) {
        a.dt = gc_fix(a.dt), a.comm = gc_fix(a.comm);
        if (a.coll == GC_ALLGATHER)
            a.stype = gc_fix(a.stype);
        else
            a.op = gc_fix(a.op);
        c.inplace = a.sbuf == gc_c.in_place;
        if (!(why = why_comm(&c, a.comm)) && !(why = why_args(&c, &a, &n)) && ran(&c, &why, &rc, a.f))
            return ran_done(&c, rc, n, gen);
    } else if (state == S_BADCONFIG) {
        return fail_call(gc_fix(a.comm));
    }
    if (c.trial) {
        note(&c, why, a.f);
        uint64_t t0 = trial_start(0);
        rc = host(&a);
        trial_end(&c, t0);
        return rc;
    }
    if (!a.f) remember(&c, why, n, gen);
    note(&c, why, a.f);
    return host(&a);
}

static int allreduce(const void *sbuf, void *rbuf, C64 count, H dt, H op, H comm, int large, const struct gc_form *f) {
    return collective((struct args){.coll = GC_ALLREDUCE, .large = large, .sbuf = sbuf, .rbuf = rbuf, .count = count,
                                    .dt = dt, .op = op, .comm = comm, .f = f});
}

static int reduce_scatter_block(const void *sbuf, void *rbuf, C64 count, H dt, H op, H comm, int large,
                                const struct gc_form *f) {
    return collective((struct args){.coll = GC_REDUCE_SCATTER_BLOCK, .large = large, .sbuf = sbuf, .rbuf = rbuf,
                                    .count = count, .dt = dt, .op = op, .comm = comm, .f = f});
}

static int reduce_scatter(const void *sbuf, void *rbuf, const void *counts, int counts64, H dt, H op, H comm,
                          const struct gc_form *f) {
    return collective((struct args){.coll = GC_REDUCE_SCATTER, .large = counts64, .sbuf = sbuf, .rbuf = rbuf,
                                    .counts = counts, .dt = dt, .op = op, .comm = comm, .f = f});
}

static int allgather(const void *sbuf, C64 scount, H stype, void *rbuf, C64 rcount, H rtype, H comm, int large,
                     const struct gc_form *f) {
    return collective((struct args){.coll = GC_ALLGATHER, .large = large, .sbuf = sbuf, .rbuf = rbuf, .count = rcount,
                                    .dt = rtype, .comm = comm, .scount = scount, .stype = stype, .f = f});
}

/* ---- the exported C names ---- */

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, H dt, H op, H comm) {
    return allreduce(sbuf, rbuf, count, dt, op, comm, 0, NULL);
}
int MPI_Allreduce_c(const void *sbuf, void *rbuf, C64 count, H dt, H op, H comm) {
    return allreduce(sbuf, rbuf, count, dt, op, comm, 1, NULL);
}
int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int count, H dt, H op, H comm) {
    return reduce_scatter_block(sbuf, rbuf, count, dt, op, comm, 0, NULL);
}
int MPI_Reduce_scatter_block_c(const void *sbuf, void *rbuf, C64 count, H dt, H op, H comm) {
    return reduce_scatter_block(sbuf, rbuf, count, dt, op, comm, 1, NULL);
}
int MPI_Reduce_scatter(const void *sbuf, void *rbuf, const int counts[], H dt, H op, H comm) {
    return reduce_scatter(sbuf, rbuf, counts, 0, dt, op, comm, NULL);
}
int MPI_Reduce_scatter_c(const void *sbuf, void *rbuf, const C64 counts[], H dt, H op, H comm) {
    return reduce_scatter(sbuf, rbuf, counts, 1, dt, op, comm, NULL);
}
int MPI_Allgather(const void *sbuf, int scount, H stype, void *rbuf, int rcount, H rtype, H comm) {
    return allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, 0, NULL);
}
int MPI_Allgather_c(const void *sbuf, C64 scount, H stype, void *rbuf, C64 rcount, H rtype, H comm) {
    return allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, 1, NULL);
}

/* The nonblocking and persistent collectives: the same decision, in
 * form NB or PERS (requests.c completes the requests gocoll makes). */
#define NB(req) (&(struct gc_form){.req = (req)})
#define PERS(info, req) (&(struct gc_form){.persistent = 1, .info = (info), .req = (req)})

int MPI_Iallreduce(const void *s, void *r, int n, H dt, H op, H comm, H *req) {
    return allreduce(s, r, n, dt, op, comm, 0, NB(req));
}
int MPI_Iallreduce_c(const void *s, void *r, C64 n, H dt, H op, H comm, H *req) {
    return allreduce(s, r, n, dt, op, comm, 1, NB(req));
}
int MPI_Ireduce_scatter_block(const void *s, void *r, int n, H dt, H op, H comm, H *req) {
    return reduce_scatter_block(s, r, n, dt, op, comm, 0, NB(req));
}
int MPI_Ireduce_scatter_block_c(const void *s, void *r, C64 n, H dt, H op, H comm, H *req) {
    return reduce_scatter_block(s, r, n, dt, op, comm, 1, NB(req));
}
int MPI_Ireduce_scatter(const void *s, void *r, const int *counts, H dt, H op, H comm, H *req) {
    return reduce_scatter(s, r, counts, 0, dt, op, comm, NB(req));
}
int MPI_Ireduce_scatter_c(const void *s, void *r, const C64 *counts, H dt, H op, H comm, H *req) {
    return reduce_scatter(s, r, counts, 1, dt, op, comm, NB(req));
}
int MPI_Iallgather(const void *s, int sn, H st, void *r, int rn, H rt, H comm, H *req) {
    return allgather(s, sn, st, r, rn, rt, comm, 0, NB(req));
}
int MPI_Iallgather_c(const void *s, C64 sn, H st, void *r, C64 rn, H rt, H comm, H *req) {
    return allgather(s, sn, st, r, rn, rt, comm, 1, NB(req));
}
int MPI_Allreduce_init(const void *s, void *r, int n, H dt, H op, H comm, H info, H *req) {
    return allreduce(s, r, n, dt, op, comm, 0, PERS(info, req));
}
int MPI_Allreduce_init_c(const void *s, void *r, C64 n, H dt, H op, H comm, H info, H *req) {
    return allreduce(s, r, n, dt, op, comm, 1, PERS(info, req));
}
int MPI_Reduce_scatter_block_init(const void *s, void *r, int n, H dt, H op, H comm, H info, H *req) {
    return reduce_scatter_block(s, r, n, dt, op, comm, 0, PERS(info, req));
}
int MPI_Reduce_scatter_block_init_c(const void *s, void *r, C64 n, H dt, H op, H comm, H info, H *req) {
    return reduce_scatter_block(s, r, n, dt, op, comm, 1, PERS(info, req));
}
int MPI_Reduce_scatter_init(const void *s, void *r, const int *counts, H dt, H op, H comm, H info, H *req) {
    return reduce_scatter(s, r, counts, 0, dt, op, comm, PERS(info, req));
}
int MPI_Reduce_scatter_init_c(const void *s, void *r, const C64 *counts, H dt, H op, H comm, H info, H *req) {
    return reduce_scatter(s, r, counts, 1, dt, op, comm, PERS(info, req));
}
int MPI_Allgather_init(const void *s, int sn, H st, void *r, int rn, H rt, H comm, H info, H *req) {
    return allgather(s, sn, st, r, rn, rt, comm, 0, PERS(info, req));
}
int MPI_Allgather_init_c(const void *s, C64 sn, H st, void *r, C64 rn, H rt, H comm, H info, H *req) {
    return allgather(s, sn, st, r, rn, rt, comm, 1, PERS(info, req));
}
/* Open MPI 4.1's names of the persistent collectives (its pcollreq
 * extension). */
int MPIX_Allreduce_init(const void *s, void *r, int n, H dt, H op, H comm, H info, H *req) {
    return MPI_Allreduce_init(s, r, n, dt, op, comm, info, req);
}
int MPIX_Reduce_scatter_block_init(const void *s, void *r, int n, H dt, H op, H comm, H info, H *req) {
    return MPI_Reduce_scatter_block_init(s, r, n, dt, op, comm, info, req);
}
int MPIX_Reduce_scatter_init(const void *s, void *r, const int *counts, H dt, H op, H comm, H info, H *req) {
    return MPI_Reduce_scatter_init(s, r, counts, dt, op, comm, info, req);
}
int MPIX_Allgather_init(const void *s, int sn, H st, void *r, int rn, H rt, H comm, H info, H *req) {
    return MPI_Allgather_init(s, sn, st, r, rn, rt, comm, info, req);
}

/* ---- the Fortran entry points' way in (fortran.c) ---- */

int gc_allreduce(const void *sbuf, void *rbuf, C64 count, H dt, H op, H comm, int large) {
    return allreduce(sbuf, rbuf, count, dt, op, comm, large, NULL);
}
int gc_reduce_scatter_block(const void *sbuf, void *rbuf, C64 count, H dt, H op, H comm, int large) {
    return reduce_scatter_block(sbuf, rbuf, count, dt, op, comm, large, NULL);
}
int gc_reduce_scatter(const void *sbuf, void *rbuf, const void *counts, int counts64, H dt, H op, H comm) {
    return reduce_scatter(sbuf, rbuf, counts, counts64, dt, op, comm, NULL);
}
int gc_allgather(const void *sbuf, C64 scount, H stype, void *rbuf, C64 rcount, H rtype, H comm, int large) {
    return allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, large, NULL);
}
