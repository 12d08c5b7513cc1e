/*
 * Declarations shared by the C half of libgocoll-preload.so (shim.c,
 * pmpi.c, fortran.c) and its Go half (the cgo preambles). Declarations
 * only: cgo copies the preambles of files with //export into
 * _cgo_export.h, which every .c file of the package includes.
 *
 * The library is built without any MPI header: it serves Open MPI and
 * MPICH, whose headers disagree on every handle type, so a handle is
 * carried as a gc_handle, wide enough for both (a pointer on Open MPI, an
 * int on MPICH, zero-extended).
 */
#ifndef GOCOLL_PRELOAD_H
#define GOCOLL_PRELOAD_H

#include <stdint.h>
#include <stddef.h>
#include "engine.h" /* the shared-memory engine's C half (intranode/engine) */
#include "../gpu/cuda.h"

typedef uint64_t gc_handle;

/* The host MPI, decided at the first call. */
enum { GC_UNKNOWN = 0, GC_OMPI = 1, GC_MPICH = 2 };

/* The collectives, in the order of Go's algorithms.Collective. */
enum { GC_ALLREDUCE = 0, GC_REDUCE_SCATTER = 1, GC_REDUCE_SCATTER_BLOCK = 2, GC_ALLGATHER = 3, GC_NCOLL = 4 };

/*
 * Why a call went to the host MPI, decided in C (gc_note_host prints them).
 * GC_R_TUNED is decided in Go (the tuner chose native).
 */
enum {
    GC_R_NONE = 0,
    GC_R_NOT_READY,     /* before MPI_Init, after MPI_Finalize, or gocoll could not start */
    GC_R_COMM,          /* MPI_COMM_NULL or an unknown communicator */
    GC_R_INTER,         /* an intercommunicator */
    GC_R_FORCED,        /* GOCOLL_<COLLECTIVE>_ALGORITHM=native */
    GC_R_DATATYPE,      /* a derived (or unknown) datatype */
    GC_R_OP,            /* MPI_OP_NULL, MPI_REPLACE, MPI_NO_OP or an unknown op */
    GC_R_OP_TYPE,       /* a predefined op gocoll does not define on the datatype */
    GC_R_DEVICE,        /* a CUDA device buffer, gocoll's CUDA runtime off */
    GC_R_BUFFER,        /* a NULL buffer (MPI_BOTTOM) with data, MPI_IN_PLACE as the receive
                         * buffer, or a negative count: the host MPI reports the error */
    GC_R_SIZES,         /* allgather's send and receive sizes differ */
    GC_R_SETUP,         /* gocoll could not set up the communicator */
    GC_R_LARGE,         /* a count beyond what the host's point-to-point calls take */
    GC_R_TUNED,         /* the tuner chose native */
    GC_R_PROGRESS,      /* a nonblocking or persistent call that nothing would move while the
                         * program blocks in a host call (requests.c: no progress hook in the
                         * host, no progress thread) */
    GC_NREASONS
};

/*
 * The C half's share of the path counters (package coll/counters has
 * the rest; counters.go adds these to it): GC_K_HOST calls handed to the
 * host MPI, GC_K_FALLBACK those of them whose forced algorithm could not
 * run, GC_K_CACHED calls gocoll ran on a decision from the communicator's
 * cache, GC_K_HOST_CACHED host calls decided from the cache (a host call
 * from the cache costs one counter, as a host call did before there were
 * counters), GC_K_MEMO host calls that matched the thread's last host
 * call of the collective and went straight to the host (shim.c, "the
 * fast path"; counted as host calls decided from the cache, and read
 * alone as "<call>.remembered" by gocoll_test_counter), GC_K_FAST calls
 * the shared-memory engine's C half ran without entering Go (shim.c,
 * "the engine"; package counters' Fast path, the report's fast=),
 * GC_K_FAST_MEMO those of them that matched the thread's last calls of
 * the collective and skipped the checks (read alone as
 * "<call>.fast_remembered" by gocoll_test_counter), GC_K_CORRECTED
 * calls gocoll ran because the host is excluded on their (op, datatype)
 * (GC_HOW_CORRECTED, below; package counters' Corrected). Each thread
 * counts in a block of its own (counters.c); gc_counter sums them with
 * gc_counters, where the Go tests set values.
 */
enum { GC_K_HOST = 0, GC_K_HOST_CACHED = 1, GC_K_CACHED = 2, GC_K_FALLBACK = 3, GC_K_MEMO = 4, GC_K_FAST = 5,
       GC_K_FAST_MEMO = 6, GC_K_CORRECTED = 7, GC_K_REQUEST = 8, GC_K_REQUEST_HOST = 9, GC_NCOUNTERS = 10 };
/* GC_K_REQUEST counts the nonblocking and persistent calls gocoll made a
 * request of (MPI_I*, MPI_*_init), GC_K_REQUEST_HOST those it handed to
 * the host's PMPI_I* or PMPI_*_init (requests.c); read alone as
 * "<call>.requests" and "<call>.requests_host" by gocoll_test_counter, in
 * no report. */

/*
 * The (op, datatype) pairs the host MPI must not run (host.go): one byte
 * per gocoll op and type (ops.Op, ops.Type), each bit a reason. Go fills
 * this rank's table at the start; each communicator holds the bitwise OR
 * of its ranks' tables, agreed at its first call (shim.c, comm_state), so
 * that its ranks never disagree about a call's route. A call of a pair
 * with a reason set never goes to the host's collective by the tuner's
 * choice (GC_HOW_CORRECTED, counted as GC_K_CORRECTED); GOCOLL_<COLL>_ALGORITHM=native
 * still sends it there.
 */
#define GC_HOW_CORRECTED 4
#define GC_NOPS 16
#define GC_NTYPES 128
enum {
    GC_X_WRONG = 1, /* the host's reduction gives a wrong result (host.go's probe) */
    GC_X_TEST = 2,  /* GOCOLL_PRELOAD_EXCLUDE names the pair on this rank (tests) */
    GC_X_REPRODUCIBLE = 4, /* GOCOLL_REPRODUCIBLE=1 and the result depends on the order */
};
/* The reasons of a commutative user-defined op (which gocoll cannot know
 * exact): GC_X_REPRODUCIBLE in reproducible mode, else 0 (set by Go). */
extern int gc_user_excluded;
void gc_exclude_host(int op, int type, int reasons);
void gc_set_agree_op(gc_handle bor); /* the host's MPI_BOR, which agrees the tables */

/*
 * gocoll's state of one user communicator, kept by the host MPI as an
 * attribute (so it is found in one lookup and freed with the
 * communicator, by the attribute's delete callback).
 *
 * Its decisions: one per collective and size class (the tuner's, eight
 * per doubling: tuner.ClassRange; gc_size_class), each holding for the
 * bytes [lo, end) of its class where the tuner answers alike (Go's
 * tuner.Span), the op's commutativity and the pair's exclusions. A call
 * whose class holds another span or key enters Go to decide, and its
 * answer replaces the class's. Zeroed, a decision holds for no size.
 */
#define GC_CLASSES 512 /* classes up to 2^63 bytes: 8 * 62 + 7 < 512 */
#define GC_HOW_MEASURED 8 /* a decision measured here (run-time tuning) */
struct gc_decision {
    int64_t lo, end;    /* the bytes it holds for: lo <= bytes < end */
    int8_t commutative;
    int8_t how;         /* 0 tuned, 1 forced, 2 tuned after a forced one could not run;
                         * plus GC_HOW_CORRECTED: the tuner chose the host, which is
                         * excluded on the pair (GC_X_*), so it chose among gocoll's;
                         * plus GC_HOW_MEASURED: run-time tuning decided */
    int8_t excluded;    /* the call's GC_X_* reasons, part of the key */
    int16_t alg;        /* index in the collective's sorted algorithm names; -1 native */
};
struct gc_comm {
    int inter;          /* an intercommunicator: always the host's */
    int rank, size;
    int id;             /* gocoll's communicator (Go side), 0 until set up */
    int native;         /* setup failed: always the host's */
    struct gc_decision cache[GC_NCOLL][GC_CLASSES];
    uint8_t excluded[GC_NOPS][GC_NTYPES]; /* agreed over the ranks at the first call */
    /* The communicator's shared segment, as the engine's C half sees it
     * (shm.base NULL: none, or not yet attached by the Go half). */
    struct gocoll_shm shm;
    /* gocoll requests started on the communicator and not completed
     * (requests.c): while any is, the engine's C half declines its
     * blocking calls, which go to Go and run after them. */
    int held;
};

/* How an intercepted call is made: blocking (NULL), nonblocking (MPI_I*)
 * or persistent (MPI_*_init, info is its MPI_Info), the request handle
 * going to *req. */
struct gc_form {
    int persistent;
    gc_handle info;
    gc_handle *req;
};

/* One intercepted call, as C hands it to Go. */
struct gc_call {
    int coll;
    int alg, how;              /* the tuner's choice (see gc_decision) */
    int inplace;
    const void *sbuf;
    void *rbuf;
    int64_t count;             /* Allreduce: count; _block: recvcount; Allgather: recvcount */
    const void *counts;        /* Reduce_scatter's recvcounts: int[] or, if counts64, int64_t[] */
    int counts64;
    int64_t bytes;             /* the size the tuner sees */
    int type;                  /* gocoll's ops.Type */
    int elem;                  /* its size (extent) in bytes */
    int op;                    /* gocoll's ops.Op; 0 for a user-defined op */
    int commutative;
    int excluded;              /* the pair's GC_X_* reasons: the host must not run it */
    int device;                /* a buffer is CUDA device memory and gocoll's CUDA runtime is on */
    int dev[2];                /* with the runtime on: sbuf [0], rbuf [1] is device memory, */
    struct gocoll_cuda_attrs attrs[2]; /* as the driver said (Go does not ask again) */
    int cached;                /* decided from the communicator's decision cache */
    int engine;                /* the shared-memory engine's C half ran it (shim.c) */
    int remembered;            /* it matched the thread's last calls (shim.c) */
    /* Set by Go's gc_decide: the bytes [lo, end) its answer holds for
     * (empty: not to be kept), and whether the call is a trial of
     * run-time tuning (timed, reported with gc_trial_time, never kept
     * nor remembered). request: the call makes a request (no trials). */
    int64_t lo, end;
    int trial, request;
    gc_handle dt, mpiop, comm; /* the caller's handles */
    struct gc_comm *cs;
};

/* What the Go half needs from the C half. */
extern int gc_flavor;
extern int gc_debug;
extern int gc_cuda; /* gocoll's CUDA runtime is on: device buffers are gocoll's (set by gc_start) */
extern int gc_forced_native[GC_NCOLL];
/* Each collective's index of the shm algorithm (see gc_decision.alg), -1
 * if none or while the engine's C half must not run calls (set by Go). */
extern int gc_shm_alg[GC_NCOLL];
void gc_attach_shm(struct gc_comm *cs, void *base, int p, int rank, long slot, long data_off, int crowded);
void gc_detach_shm(struct gc_comm *cs);
extern uint64_t gc_counters[GC_NCOLL][GC_NCOUNTERS];
uint64_t gc_counter(int coll, int k); /* gc_counters plus every thread's own counts */
void gc_register_type(gc_handle h, int type, int size);
void gc_register_op(gc_handle h, int op);
void gc_allow(int op, int type);
gc_handle gc_sym_handle(const char *name);
void gc_forget(struct gc_comm *cs);
int gc_size_class(int64_t bytes); /* the size class of the decisions (shim.c) */
/* Run-time tuning's test hook (-tags gocolltest): nanoseconds spun
 * inside each timed trial of the host [0] or of gocoll [1]. */
extern int64_t gc_tune_delay[2];
int gc_allreduce_max_doubles(gc_handle comm, double *v, int n);
gc_handle gc_world(void);
gc_handle gc_self(void);
int gc_host_class(int gocoll_class);

/* PMPI helpers for the Go half (pmpi.c); each returns an MPI error code. */
int gc_dup(gc_handle comm, gc_handle *dup);
int gc_comm_free(gc_handle *comm);
int gc_tag_ub(int *ub);
int gc_type_extent(gc_handle dt, int64_t *lb, int64_t *extent);
int gc_comm_name(gc_handle comm, char *name, int len);
int gc_allgather_int(gc_handle comm, int mine, int *all);
int gc_allgatherv_bytes(gc_handle comm, const void *mine, int n, void *all, const int *counts, const int *displs);
int gc_allreduce_min_int(gc_handle comm, int *v);
int gc_isend(const void *buf, int64_t n, int peer, int tag, gc_handle comm, gc_handle *req);
int gc_irecv(void *buf, int64_t n, int peer, int tag, gc_handle comm, gc_handle *req);
int gc_test(gc_handle *req, int *flag, int64_t *n, int *source, int *err, int *cancelled);
int gc_cancel(gc_handle *req);
int gc_reduce_local(const void *in, void *inout, int64_t count, gc_handle dt, gc_handle op);
void gc_errors_return(gc_handle saved[2]);
void gc_errors_restore(gc_handle saved[2]);
int gc_errhandler_returns(gc_handle comm);
int gc_world_rank(void);
int gc_thread_level(void); /* the host's MPI_Query_thread, -1 if unknown */
void gc_register_progress(int thread); /* requests.c: who moves gocoll's requests */
int gc_large_p2p(void);
const char *gc_library_version(void);

#endif
