/*
 * abifuzz: bad input against every exported call of the C ABI. With
 * MPI_ERRORS_RETURN on MPI_COMM_WORLD and MPI_COMM_SELF, each call gets
 * NULL pointers, invalid handles (communicator, datatype, op, request,
 * error handler, freed ones too), negative counts, out-of-range ranks,
 * tags and roots, and buffers MPI forbids; it must return the error class
 * its bad argument calls for (with two bad arguments, either one's), and
 * the process must live on, its communicators still working.
 *
 *   abifuzz [-preload] [-seed S] [-random N] [-v]   calls after MPI_Init
 *   abifuzz lifecycle [-preload]                    calls before MPI_Init
 *                                                   and after MPI_Finalize
 *
 * The first form runs at any number of ranks: every case once
 * (systematic), then N cases drawn with seed S (the same on every rank,
 * so that all ranks make the same collective calls; every drawn call has
 * a bad argument that every rank sees, so each fails where it is made,
 * before anything is sent). The second runs as one process, without a
 * launcher: it starts itself again for each case (`abifuzz child ...`),
 * since an error before MPI_Init is fatal, and checks how each child
 * ended. gocoll's rules, which it asserts:
 *
 *   - before MPI_Init only MPI_Initialized, MPI_Finalized,
 *     MPI_Get_version, MPI_Get_library_version, MPI_Get_processor_name,
 *     MPI_Error_string, MPI_Error_class, MPI_Get_count, MPI_Wtime and
 *     MPI_Wtick work; any other call, or a NULL output pointer to those,
 *     prints `gocoll: MPI_X: ...` naming the call (and the argument) and
 *     ends the process with the error class as its status (no error
 *     handler can be set yet; MPICH ends the process too);
 *   - after MPI_Finalize a call fails through MPI_COMM_WORLD's handler:
 *     MPI_ERR_OTHER where it is MPI_ERRORS_RETURN, else the same message
 *     and exit as before MPI_Init;
 *   - MPI_Abort ends the process with its code, whatever the
 *     communicator.
 *
 * With -preload (a program built with a host MPI's mpicc, run with
 * libgocoll-preload.so) only the calls the preload intercepts are fuzzed,
 * MPI_Allreduce, MPI_Reduce_scatter(_block), MPI_Allgather and their _c
 * forms: every other call is the host MPI's own, and so is the answer to
 * bad input (the preload hands it to the host MPI), so any error class
 * passes. Not tried there, since the host MPI alone crashes on them
 * (SIGSEGV or a corrupted heap, measured without the preload) or does
 * not check them: invalid handles other than the null ones (Open MPI's
 * handles are pointers; MPICH 4.0.2 crashes on an unmade user
 * communicator, 0x84000fa0), counts beyond the buffer (2^60), allgathers
 * whose send and receive sizes differ; with Open MPI 4.1.4, NULL buffers
 * with data and MPI_COMM_NULL in MPI_Allgather; with MPICH 4.0.2,
 * negative counts and NULL recvcounts (see host_crashes). Before
 * MPI_Init and after MPI_Finalize the preload hands every call to the
 * host MPI, which ends the process as it does: the lifecycle mode checks
 * only that it ends non-zero, with no Go panic.
 *
 * Each process judges itself: it prints `N passed, N failed` and exits 1
 * if any check failed; the launcher's exit status combines the ranks.
 * Nothing here uses a collective to combine results.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <errno.h>
#include <limits.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int rank, size, preload, verbose, passed, failed;
static const char *where = "";

#define ANY (-1) /* any error class */

#define CHECK(cond, ...)                                                \
    do {                                                                \
        if (cond) passed++;                                             \
        else {                                                          \
            failed++;                                                   \
            if (failed <= 40) {                                         \
                fprintf(stderr, "rank %d: FAIL %s: ", rank, where);     \
                fprintf(stderr, __VA_ARGS__);                           \
                fprintf(stderr, "\n");                                  \
            }                                                           \
        }                                                               \
    } while (0)

static int class_of(int rc) {
    int c = rc;
    if (rc != MPI_SUCCESS && MPI_Error_class(rc, &c) != MPI_SUCCESS) c = -1000;
    return c;
}

/* expect: rc is an error of class a or b (ANY: any error). */
static void expect(int line, const char *what, int rc, int a, int b) {
    int c = class_of(rc);
    /* Under the preload the host MPI answers bad input, with its own
     * classes (Open MPI checks the op before the datatype, for one). */
    if (preload) a = b = ANY;
    int ok = rc != MPI_SUCCESS && (a == ANY || b == ANY || c == a || c == b);
    char want[40];
    if (a == b) snprintf(want, sizeof want, "%d", a);
    else snprintf(want, sizeof want, "%d or %d", a, b);
    CHECK(ok, "line %d: %s: returned %d (class %d), want class %s (-1: any)", line, what, rc, c, want);
}
#define EXPECT(cls, call) expect(__LINE__, #call, (call), (cls), (cls))
#define OK(call)                                                                  \
    do {                                                                          \
        int rc_ = (call);                                                         \
        CHECK(rc_ == MPI_SUCCESS, "line %d: %s: returned %d", __LINE__, #call, rc_); \
    } while (0)

/* ---- a seeded generator (xorshift64*), the same on every rank ---- */

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}
static int pick(int n) { return (int)(rnd() % (uint64_t)n); }

/* ---- invalid values ---- */

#ifdef OPEN_MPI
#define INT_HANDLES 0 /* handles are pointers: only the null ones are safe */
#else
#define INT_HANDLES 1
#endif

#define MAXBAD 12
static MPI_Comm bad_comms[MAXBAD];
static MPI_Datatype bad_types[MAXBAD]; /* the last, uncommitted, is valid for Type_size */
static MPI_Op bad_ops[MAXBAD];         /* the first nops_c are invalid for Op_commutative too */
static MPI_Request bad_reqs[MAXBAD];
static MPI_Errhandler bad_errhs[MAXBAD];
static int ncomms, ntypes, nops, nops_c, nreqs, nerrhs, uncommitted_last;

static void make_bad_handles(void) {
    /* valid, but not committed: not for communication (made first, so
     * that it does not take the handle of the freed one below) */
    MPI_Datatype uncommitted = MPI_DATATYPE_NULL;
    if (!preload) MPI_Type_contiguous(2, MPI_INT, &uncommitted);
    bad_comms[ncomms++] = MPI_COMM_NULL;
    bad_types[ntypes++] = MPI_DATATYPE_NULL;
    bad_ops[nops++] = MPI_OP_NULL;
#if INT_HANDLES
    if (preload) goto done; /* the host MPI's handles: only the null ones */
    bad_comms[ncomms++] = (MPI_Comm)0;
    bad_comms[ncomms++] = (MPI_Comm)-1;
    bad_comms[ncomms++] = (MPI_Comm)0x44000002;  /* next to MPI_COMM_SELF */
    bad_comms[ncomms++] = (MPI_Comm)0x84000fa0;  /* a user communicator never made */
    bad_comms[ncomms++] = (MPI_Comm)0x12345;
    bad_types[ntypes++] = (MPI_Datatype)0;
    bad_types[ntypes++] = (MPI_Datatype)-1;
    bad_types[ntypes++] = (MPI_Datatype)0x4c00ffff; /* not a predefined one */
    bad_types[ntypes++] = (MPI_Datatype)0x8c0fffff; /* a derived one never made */
    bad_ops[nops++] = (MPI_Op)0;
    bad_ops[nops++] = (MPI_Op)0x5800003f;
    bad_ops[nops++] = (MPI_Op)0x98000fff; /* a user op never made */
    bad_reqs[nreqs++] = (MPI_Request)0;
    bad_reqs[nreqs++] = (MPI_Request)-1;
    bad_reqs[nreqs++] = (MPI_Request)0xac000fff; /* a request never made */
    bad_errhs[nerrhs++] = (MPI_Errhandler)0;
    bad_errhs[nerrhs++] = MPI_ERRHANDLER_NULL;
    bad_errhs[nerrhs++] = (MPI_Errhandler)0x54000009;
    {
        /* Handles of another kind, and freed ones (gocoll hands out
         * handles in order; nothing else is made while fuzzing, so a
         * freed handle stays invalid). */
        bad_comms[ncomms++] = (MPI_Comm)MPI_INT;
        bad_types[ntypes++] = (MPI_Datatype)MPI_COMM_WORLD;
        bad_reqs[nreqs++] = (MPI_Request)MPI_COMM_WORLD;
        MPI_Comm c;
        if (MPI_Comm_dup(MPI_COMM_WORLD, &c) == MPI_SUCCESS) {
            MPI_Comm freed = c;
            MPI_Comm_free(&c);
            bad_comms[ncomms++] = freed;
        }
        MPI_Datatype t;
        if (MPI_Type_contiguous(3, MPI_INT, &t) == MPI_SUCCESS) {
            MPI_Datatype freed = t;
            MPI_Type_commit(&t);
            MPI_Type_free(&t);
            bad_types[ntypes++] = freed;
        }
    }
    nops_c = nops;
    /* For communication, not for Op_commutative (MPICH calls them
     * commutative). */
    bad_ops[nops++] = MPI_REPLACE;
    bad_ops[nops++] = MPI_NO_OP;
done:
#endif
    if (!nops_c) nops_c = nops;
    if (uncommitted != MPI_DATATYPE_NULL) {
        bad_types[ntypes++] = uncommitted;
        uncommitted_last = 1;
    }
}

static const int bad_counts[] = {-1, -1000, INT_MIN};
static const int bad_tags[] = {-5, INT_MIN, MPI_ANY_TAG}; /* MPI_ANY_TAG: sends only */

/* ---- the calls and their arguments ---- */

enum fn {
    FN_ALLREDUCE, FN_REDUCE_SCATTER_BLOCK, FN_REDUCE_SCATTER, FN_ALLGATHER,
#if MPI_VERSION >= 4
    FN_ALLREDUCE_C, FN_REDUCE_SCATTER_BLOCK_C, FN_REDUCE_SCATTER_C, FN_ALLGATHER_C,
#endif
    FN_NPRELOAD, /* the calls libgocoll-preload.so intercepts come first */
    FN_ALLGATHERV = FN_NPRELOAD, FN_BARRIER, FN_BCAST, FN_REDUCE, FN_GATHER,
    FN_SEND, FN_RECV, FN_ISEND, FN_IRECV, FN_SENDRECV, FN_WAIT, FN_TEST, FN_WAITALL, FN_GET_COUNT,
    FN_COMM_RANK, FN_COMM_SIZE, FN_COMM_DUP, FN_COMM_SPLIT, FN_COMM_SPLIT_TYPE, FN_COMM_COMPARE,
    FN_COMM_SET_ERRH, FN_COMM_GET_ERRH, FN_ERROR_STRING, FN_ERROR_CLASS,
    FN_TYPE_SIZE, FN_TYPE_CONTIGUOUS, FN_OP_COMMUTATIVE, FN_QUERY_THREAD,
    FN_INITIALIZED, FN_FINALIZED, FN_GET_VERSION, FN_GET_LIBRARY_VERSION, FN_GET_PROCESSOR_NAME,
    NFN
};

static const char *fn_names[NFN] = {
    "MPI_Allreduce", "MPI_Reduce_scatter_block", "MPI_Reduce_scatter", "MPI_Allgather",
#if MPI_VERSION >= 4
    "MPI_Allreduce_c", "MPI_Reduce_scatter_block_c", "MPI_Reduce_scatter_c", "MPI_Allgather_c",
#endif
    "MPI_Allgatherv", "MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Gather",
    "MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv", "MPI_Sendrecv", "MPI_Wait", "MPI_Test",
    "MPI_Waitall", "MPI_Get_count", "MPI_Comm_rank", "MPI_Comm_size", "MPI_Comm_dup",
    "MPI_Comm_split", "MPI_Comm_split_type", "MPI_Comm_compare", "MPI_Comm_set_errhandler",
    "MPI_Comm_get_errhandler", "MPI_Error_string", "MPI_Error_class", "MPI_Type_size", "MPI_Type_contiguous",
    "MPI_Op_commutative", "MPI_Query_thread", "MPI_Initialized", "MPI_Finalized",
    "MPI_Get_version", "MPI_Get_library_version", "MPI_Get_processor_name",
};

/* The kinds of bad argument. */
enum kind {
    K_COMM, K_COMM2, K_TYPE, K_RTYPE, K_OP, K_COUNT, K_RCOUNT, K_BIGCOUNT, K_ROOT,
    K_PEER, K_RPEER, K_TAG, K_RTAG, K_SBUF, K_RBUF, K_INPLACE_RBUF, K_OUT, K_OUT2,
    K_COUNTS, K_NEGCOUNT, K_DISPLS, K_NEGDISPL, K_MISMATCH, K_REQ, K_ERRH, K_CODE, K_COLOR,
    NKIND
};
static const char *kind_names[NKIND] = {
    "comm", "comm2", "datatype", "recvtype", "op", "count", "recvcount", "count 2^60", "root",
    "peer", "recv peer", "tag", "recv tag", "sendbuf NULL", "recvbuf NULL", "recvbuf MPI_IN_PLACE",
    "output NULL", "second output NULL", "counts NULL", "a negative count", "displs NULL",
    "a negative displacement", "send/recv sizes differ", "request", "errhandler", "error code", "color",
};

/* class_for is the class a bad argument of a kind must give. */
static int class_for(int k) {
    switch (k) {
    case K_COMM: case K_COMM2: return MPI_ERR_COMM;
    case K_TYPE: case K_RTYPE: return MPI_ERR_TYPE;
    case K_OP: return MPI_ERR_OP;
    case K_COUNT: case K_RCOUNT: case K_BIGCOUNT: case K_NEGCOUNT: return MPI_ERR_COUNT;
    case K_ROOT: return MPI_ERR_ROOT;
    case K_PEER: case K_RPEER: return MPI_ERR_RANK;
    case K_TAG: case K_RTAG: return MPI_ERR_TAG;
    case K_SBUF: case K_RBUF: case K_INPLACE_RBUF: return MPI_ERR_BUFFER;
    case K_OUT: case K_OUT2: case K_COUNTS: case K_DISPLS: case K_ERRH: case K_CODE: case K_COLOR:
        return MPI_ERR_ARG;
    case K_MISMATCH: return MPI_ERR_TRUNCATE;
    case K_REQ: return MPI_ERR_REQUEST;
    }
    return ANY; /* K_NEGDISPL: MPI names no class */
}

/* The kinds each call can get. */
#define KINDS(...)                                       \
    do {                                                 \
        static const int kinds_[] = {__VA_ARGS__, -1};   \
        return kinds_;                                   \
    } while (0)
static const int *kinds_of(int f) {
    switch (f) {
    case FN_ALLREDUCE: case FN_REDUCE_SCATTER_BLOCK:
        KINDS(K_COMM, K_TYPE, K_OP, K_COUNT, K_SBUF, K_RBUF, K_INPLACE_RBUF);
    case FN_REDUCE_SCATTER:
        KINDS(K_COMM, K_TYPE, K_OP, K_COUNTS, K_NEGCOUNT, K_SBUF, K_RBUF, K_INPLACE_RBUF);
    case FN_ALLGATHER:
        KINDS(K_COMM, K_TYPE, K_RTYPE, K_COUNT, K_RCOUNT, K_MISMATCH, K_SBUF, K_RBUF, K_INPLACE_RBUF);
#if MPI_VERSION >= 4
    case FN_ALLREDUCE_C: case FN_REDUCE_SCATTER_BLOCK_C:
        KINDS(K_COMM, K_TYPE, K_OP, K_COUNT, K_BIGCOUNT, K_SBUF, K_RBUF, K_INPLACE_RBUF);
    case FN_REDUCE_SCATTER_C:
        KINDS(K_COMM, K_TYPE, K_OP, K_COUNTS, K_NEGCOUNT, K_SBUF, K_RBUF, K_INPLACE_RBUF);
    case FN_ALLGATHER_C:
        KINDS(K_COMM, K_TYPE, K_RTYPE, K_COUNT, K_RCOUNT, K_BIGCOUNT, K_MISMATCH, K_SBUF, K_RBUF,
                     K_INPLACE_RBUF);
#endif
    case FN_ALLGATHERV:
        KINDS(K_COMM, K_TYPE, K_RTYPE, K_COUNT, K_COUNTS, K_NEGCOUNT, K_DISPLS, K_NEGDISPL, K_SBUF,
                     K_RBUF);
    case FN_BARRIER: KINDS(K_COMM);
    case FN_BCAST: KINDS(K_COMM, K_TYPE, K_COUNT, K_ROOT, K_RBUF, K_INPLACE_RBUF);
    /* The receive side of Reduce and Gather counts at the root only: it
     * is spoiled only where every rank is the root (one rank). */
    case FN_REDUCE:
        if (size == 1) KINDS(K_COMM, K_TYPE, K_OP, K_COUNT, K_ROOT, K_SBUF, K_RBUF);
        KINDS(K_COMM, K_TYPE, K_OP, K_COUNT, K_ROOT, K_SBUF);
    case FN_GATHER:
        if (size == 1) KINDS(K_COMM, K_TYPE, K_COUNT, K_ROOT, K_SBUF, K_RTYPE, K_RCOUNT, K_RBUF);
        KINDS(K_COMM, K_TYPE, K_COUNT, K_ROOT, K_SBUF);
    case FN_SEND: KINDS(K_COMM, K_TYPE, K_COUNT, K_PEER, K_TAG, K_SBUF);
    case FN_RECV: KINDS(K_COMM, K_TYPE, K_COUNT, K_RPEER, K_RTAG, K_RBUF);
    case FN_ISEND: KINDS(K_COMM, K_TYPE, K_COUNT, K_PEER, K_TAG, K_SBUF, K_OUT);
    case FN_IRECV: KINDS(K_COMM, K_TYPE, K_COUNT, K_RPEER, K_RTAG, K_RBUF, K_OUT);
    case FN_SENDRECV:
        KINDS(K_COMM, K_TYPE, K_RTYPE, K_COUNT, K_RCOUNT, K_PEER, K_RPEER, K_TAG, K_RTAG, K_SBUF,
                     K_RBUF);
    case FN_WAIT: KINDS(K_REQ, K_OUT);
    case FN_TEST: KINDS(K_REQ, K_OUT, K_OUT2);
    case FN_WAITALL: KINDS(K_REQ, K_COUNT, K_OUT);
    case FN_GET_COUNT: KINDS(K_TYPE, K_OUT, K_OUT2);
    case FN_COMM_RANK: case FN_COMM_SIZE: case FN_COMM_DUP: case FN_COMM_GET_ERRH:
        KINDS(K_COMM, K_OUT);
    case FN_COMM_SPLIT: case FN_COMM_SPLIT_TYPE: KINDS(K_COMM, K_OUT, K_COLOR);
    case FN_COMM_COMPARE: KINDS(K_COMM, K_COMM2, K_OUT);
    case FN_COMM_SET_ERRH: KINDS(K_COMM, K_ERRH);
    case FN_ERROR_STRING: KINDS(K_CODE, K_OUT, K_OUT2);
    case FN_ERROR_CLASS: KINDS(K_CODE, K_OUT);
    case FN_TYPE_SIZE: KINDS(K_TYPE, K_OUT);
    case FN_TYPE_CONTIGUOUS: KINDS(K_COUNT, K_TYPE, K_OUT);
    case FN_OP_COMMUTATIVE: KINDS(K_OP, K_OUT);
    case FN_QUERY_THREAD: case FN_INITIALIZED: case FN_FINALIZED: KINDS(K_OUT);
    case FN_GET_VERSION: case FN_GET_LIBRARY_VERSION: case FN_GET_PROCESSOR_NAME: KINDS(K_OUT, K_OUT2);
    }
    KINDS(-1);
}

/* allowed says whether a kind is tried against a call in this mode. */
static int allowed(int f, int k) {
    if (!preload) return 1;
    /* Host MPIs do not check these (undefined behaviour there). */
    if (k == K_BIGCOUNT || k == K_MISMATCH || f >= FN_NPRELOAD) return 0;
    /* Inputs the host MPI alone crashes on (SIGSEGV, measured without
     * the preload): not tried against it. */
    static const int host_crashes[][2] = {
#ifdef OPEN_MPI
        /* Open MPI 4.1.4 does not check NULL buffers with data */
        {-1, K_SBUF}, {-1, K_RBUF},
        /* nor the communicator of MPI_Allgather(_c) */
        {FN_ALLGATHER, K_COMM},
#elif defined(MPICH_VERSION)
        /* MPICH 4.0.2 (Debian's) does not check counts (a negative one
         * returns MPI_SUCCESS or corrupts its heap) nor NULL recvcounts */
        {-1, K_COUNT}, {-1, K_RCOUNT}, {-1, K_NEGCOUNT}, {-1, K_COUNTS},
#endif
        {-2, -2}};
    for (int i = 0; host_crashes[i][0] != -2; i++)
        if ((host_crashes[i][0] == -1 || host_crashes[i][0] == f) && host_crashes[i][1] == k) return 0;
    return 1;
}

/* The arguments of a call: valid ones, then spoiled. */
#define N 8 /* elements per rank */
struct args {
    MPI_Comm comm, comm2;
    MPI_Datatype type, rtype;
    MPI_Op op;
    long count, rcount;
    int root, peer, rpeer, tag, rtag, color, code;
    void *sbuf, *rbuf;
    int *counts, *displs;
#if MPI_VERSION >= 4
    MPI_Count *ccounts;
#endif
    int out_null, out2_null;
    MPI_Request req;
    MPI_Errhandler errh;
    int variant; /* which invalid value (index into a table) */
};

static int *sendbuf, *recvbuf, *countsbuf, *displsbuf;
#if MPI_VERSION >= 4
static MPI_Count *ccountsbuf;
#endif

static void valid_args(struct args *a) {
    memset(a, 0, sizeof *a);
    a->comm = a->comm2 = MPI_COMM_WORLD;
    a->type = a->rtype = MPI_INT;
    a->op = MPI_SUM;
    a->count = a->rcount = N;
    a->root = 0;
    a->peer = a->rpeer = (rank + 1) % size;
    a->tag = a->rtag = 7;
    a->color = 0;
    a->code = MPI_ERR_ARG;
    a->sbuf = sendbuf, a->rbuf = recvbuf;
    for (int q = 0; q < size; q++) countsbuf[q] = N, displsbuf[q] = q * N;
    a->counts = countsbuf, a->displs = displsbuf;
#if MPI_VERSION >= 4
    for (int q = 0; q < size; q++) ccountsbuf[q] = N;
    a->ccounts = ccountsbuf;
#endif
    a->req = MPI_REQUEST_NULL;
    a->errh = MPI_ERRORS_RETURN;
}

/* nvariants is how many invalid values a kind has. */
static int nvariants(int f, int k) {
    switch (k) {
    case K_COMM: case K_COMM2: return ncomms;
    case K_TYPE: case K_RTYPE:
        /* Type_size and Type_contiguous take an uncommitted datatype. */
        return (f == FN_TYPE_SIZE || f == FN_TYPE_CONTIGUOUS) && uncommitted_last ? ntypes - 1 : ntypes;
    case K_OP: return f == FN_OP_COMMUTATIVE ? nops_c : nops;
    case K_COUNT: case K_RCOUNT: return 3;
    case K_ROOT: return 4;
    case K_PEER: return 5;
    case K_RPEER: return 4;
    case K_TAG: return 3;
    case K_RTAG: return 2;
    case K_REQ: return nreqs;
    case K_ERRH: return nerrhs;
    case K_CODE: return 3;
    }
    return 1;
}

static void spoil(struct args *a, int f, int k, int v) {
    switch (k) {
    case K_COMM: a->comm = bad_comms[v]; break;
    case K_COMM2: a->comm2 = bad_comms[v]; break;
    case K_TYPE: a->type = bad_types[v]; break;
    case K_RTYPE: a->rtype = bad_types[v]; break;
    case K_OP: a->op = bad_ops[v]; break;
    case K_COUNT: a->count = bad_counts[v]; break;
    case K_RCOUNT: a->rcount = bad_counts[v]; break;
    case K_BIGCOUNT: a->count = 1L << 60; break;
    case K_ROOT: a->root = (int[]){-1, MPI_ROOT, size, INT_MAX}[v]; break;
    case K_PEER: a->peer = (int[]){size, size + 7, -5, INT_MAX, MPI_ANY_SOURCE}[v]; break;
    case K_RPEER: a->rpeer = (int[]){size, size + 7, -5, INT_MAX}[v]; break;
    case K_TAG: a->tag = bad_tags[v]; break;
    case K_RTAG: a->rtag = bad_tags[v]; break;
    case K_SBUF: a->sbuf = NULL; break;
    case K_RBUF: a->rbuf = NULL; break;
    case K_INPLACE_RBUF: a->rbuf = MPI_IN_PLACE; break;
    case K_OUT: a->out_null = 1; break;
    case K_OUT2: a->out2_null = 1; break;
    case K_COUNTS:
        a->counts = NULL;
#if MPI_VERSION >= 4
        a->ccounts = NULL;
#endif
        break;
    case K_NEGCOUNT: /* the same entry on every rank */
        countsbuf[size - 1] = -1;
#if MPI_VERSION >= 4
        ccountsbuf[size - 1] = -1;
#endif
        break;
    case K_DISPLS: a->displs = NULL; break;
    case K_NEGDISPL: displsbuf[size - 1] = -N; break;
    case K_MISMATCH: a->count = a->rcount + 1; break;
    case K_REQ: a->req = bad_reqs[v]; break;
    case K_ERRH: a->errh = bad_errhs[v]; break;
    case K_CODE: a->code = (int[]){-1, 1000000, INT_MAX}[v]; break;
    case K_COLOR: a->color = -5; break;
    }
    (void)f;
}

/* call makes the call f with a's arguments and returns its result. */
static int call(int f, struct args *a) {
    int i, flag;
    MPI_Comm c;
    MPI_Datatype t;
    MPI_Status st;
    MPI_Errhandler eh;
    char str[MPI_MAX_LIBRARY_VERSION_STRING];
    int *ip = a->out_null ? NULL : &i, *ip2 = a->out2_null ? NULL : &flag;
    MPI_Status *sp = a->out_null ? NULL : &st;
    memset(&st, 0, sizeof st);
    switch (f) {
    case FN_ALLREDUCE: return MPI_Allreduce(a->sbuf, a->rbuf, (int)a->count, a->type, a->op, a->comm);
    case FN_REDUCE_SCATTER_BLOCK:
        return MPI_Reduce_scatter_block(a->sbuf, a->rbuf, (int)a->count, a->type, a->op, a->comm);
    case FN_REDUCE_SCATTER: return MPI_Reduce_scatter(a->sbuf, a->rbuf, a->counts, a->type, a->op, a->comm);
    case FN_ALLGATHER:
        return MPI_Allgather(a->sbuf, (int)a->count, a->type, a->rbuf, (int)a->rcount, a->rtype, a->comm);
#if MPI_VERSION >= 4
    case FN_ALLREDUCE_C: return MPI_Allreduce_c(a->sbuf, a->rbuf, a->count, a->type, a->op, a->comm);
    case FN_REDUCE_SCATTER_BLOCK_C:
        return MPI_Reduce_scatter_block_c(a->sbuf, a->rbuf, a->count, a->type, a->op, a->comm);
    case FN_REDUCE_SCATTER_C: return MPI_Reduce_scatter_c(a->sbuf, a->rbuf, a->ccounts, a->type, a->op, a->comm);
    case FN_ALLGATHER_C: return MPI_Allgather_c(a->sbuf, a->count, a->type, a->rbuf, a->rcount, a->rtype, a->comm);
#endif
    case FN_ALLGATHERV:
        return MPI_Allgatherv(a->sbuf, (int)a->count, a->type, a->rbuf, a->counts, a->displs, a->rtype, a->comm);
    case FN_BARRIER: return MPI_Barrier(a->comm);
    case FN_BCAST: return MPI_Bcast(a->rbuf, (int)a->count, a->type, a->root, a->comm);
    case FN_REDUCE: return MPI_Reduce(a->sbuf, a->rbuf, (int)a->count, a->type, a->op, a->root, a->comm);
    case FN_GATHER:
        return MPI_Gather(a->sbuf, (int)a->count, a->type, a->rbuf, (int)a->rcount, a->rtype, a->root, a->comm);
    case FN_SEND: return MPI_Send(a->sbuf, (int)a->count, a->type, a->peer, a->tag, a->comm);
    case FN_RECV: return MPI_Recv(a->rbuf, (int)a->count, a->type, a->rpeer, a->rtag, a->comm, &st);
    case FN_ISEND: {
        MPI_Request r = MPI_REQUEST_NULL;
        return MPI_Isend(a->sbuf, (int)a->count, a->type, a->peer, a->tag, a->comm, a->out_null ? NULL : &r);
    }
    case FN_IRECV: {
        MPI_Request r = MPI_REQUEST_NULL;
        return MPI_Irecv(a->rbuf, (int)a->count, a->type, a->rpeer, a->rtag, a->comm, a->out_null ? NULL : &r);
    }
    case FN_SENDRECV:
        return MPI_Sendrecv(a->sbuf, (int)a->count, a->type, a->peer, a->tag, a->rbuf, (int)a->rcount, a->rtype,
                            a->rpeer, a->rtag, a->comm, &st);
    case FN_WAIT: return MPI_Wait(a->out_null ? NULL : &a->req, &st);
    case FN_TEST: return MPI_Test(a->out_null ? NULL : &a->req, ip2, &st);
    case FN_WAITALL: {
        MPI_Request rs[2] = {a->req, MPI_REQUEST_NULL};
        /* One request, its status ignored: the class is the request's
         * own (with statuses it would be MPI_ERR_IN_STATUS). */
        return MPI_Waitall(a->count == N ? 1 : (int)a->count, a->out_null ? NULL : rs, MPI_STATUSES_IGNORE);
    }
    case FN_GET_COUNT: return MPI_Get_count(sp, a->type, ip2);
    case FN_COMM_RANK: return MPI_Comm_rank(a->comm, ip);
    case FN_COMM_SIZE: return MPI_Comm_size(a->comm, ip);
    case FN_COMM_DUP: {
        int rc = MPI_Comm_dup(a->comm, a->out_null ? NULL : &c);
        if (rc == MPI_SUCCESS) MPI_Comm_free(&c);
        return rc;
    }
    case FN_COMM_SPLIT: {
        int rc = MPI_Comm_split(a->comm, a->color, 0, a->out_null ? NULL : &c);
        if (rc == MPI_SUCCESS && c != MPI_COMM_NULL) MPI_Comm_free(&c);
        return rc;
    }
    case FN_COMM_SPLIT_TYPE: {
        /* The color's bad value (-5) is a bad split_type; its good one
         * (0) stands for MPI_COMM_TYPE_SHARED. */
        int rc = MPI_Comm_split_type(a->comm, a->color < 0 ? a->color : MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                                     a->out_null ? NULL : &c);
        if (rc == MPI_SUCCESS && c != MPI_COMM_NULL) MPI_Comm_free(&c);
        return rc;
    }
    case FN_COMM_COMPARE: return MPI_Comm_compare(a->comm, a->comm2, ip);
    case FN_COMM_SET_ERRH: return MPI_Comm_set_errhandler(a->comm, a->errh);
    case FN_COMM_GET_ERRH: return MPI_Comm_get_errhandler(a->comm, a->out_null ? NULL : &eh);
    case FN_ERROR_STRING: return MPI_Error_string(a->code, a->out_null ? NULL : str, ip2);
    case FN_ERROR_CLASS: return MPI_Error_class(a->code, ip);
    case FN_TYPE_SIZE: return MPI_Type_size(a->type, ip);
    case FN_TYPE_CONTIGUOUS: {
        int rc = MPI_Type_contiguous((int)a->count, a->type, a->out_null ? NULL : &t);
        if (rc == MPI_SUCCESS) MPI_Type_free(&t);
        return rc;
    }
    case FN_OP_COMMUTATIVE: return MPI_Op_commutative(a->op, ip);
    case FN_QUERY_THREAD: return MPI_Query_thread(ip);
    case FN_INITIALIZED: return MPI_Initialized(ip);
    case FN_FINALIZED: return MPI_Finalized(ip);
    case FN_GET_VERSION: return MPI_Get_version(ip, ip2);
    case FN_GET_LIBRARY_VERSION: return MPI_Get_library_version(a->out_null ? NULL : str, ip2);
    case FN_GET_PROCESSOR_NAME: return MPI_Get_processor_name(a->out_null ? NULL : str, ip2);
    }
    return MPI_SUCCESS;
}

/* still_works: a collective and a message with valid arguments, after
 * the bad ones, give the right answers. */
static void still_works(const char *after) {
    where = after;
    int one = rank + 1, sum = -1;
    OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == size * (size + 1) / 2, "MPI_Allreduce gives %d, want %d", sum, size * (size + 1) / 2);
    MPI_Errhandler eh = MPI_ERRORS_ARE_FATAL;
    OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "MPI_COMM_WORLD's error handler changed");
    if (!preload) {
        int got = -1, to = (rank + 1) % size, from = (rank + size - 1) % size;
        MPI_Status st;
        OK(MPI_Sendrecv(&rank, 1, MPI_INT, to, 3, &got, 1, MPI_INT, from, 3, MPI_COMM_WORLD, &st));
        CHECK(got == from, "MPI_Sendrecv gives %d, want %d", got, from);
    }
}

static int nfn(void) { return preload ? FN_NPRELOAD : NFN; }

/* systematic: every call, every kind of bad argument, every value. */
static void systematic(void) {
    char desc[160];
    for (int f = 0; f < nfn(); f++) {
        for (const int *k = kinds_of(f); *k >= 0; k++) {
            if (!allowed(f, *k)) continue;
            for (int v = 0; v < nvariants(f, *k); v++) {
                struct args a;
                valid_args(&a);
                spoil(&a, f, *k, v);
                snprintf(desc, sizeof desc, "%s with bad %s (value %d)", fn_names[f], kind_names[*k], v);
                where = desc;
                if (verbose) fprintf(stderr, "rank %d: %s\n", rank, desc);
                int want = class_for(*k);
                expect(__LINE__, desc, call(f, &a), want, want);
            }
        }
    }
}

/* randomly: n calls, each with one or two bad arguments drawn with the
 * seeded generator (the same draws on every rank). */
static void randomly(long n) {
    char desc[200];
    for (long i = 0; i < n; i++) {
        int f = pick(nfn());
        const int *ks = kinds_of(f);
        int nk = 0;
        while (ks[nk] >= 0) nk++;
        int k1 = ks[pick(nk)], k2 = ks[pick(nk)];
        int v1 = pick(nvariants(f, k1)), v2 = pick(nvariants(f, k2));
        int two = pick(2) && k2 != k1;
        if (!allowed(f, k1) || (two && !allowed(f, k2))) continue;
        struct args a;
        valid_args(&a);
        spoil(&a, f, k1, v1);
        if (two) spoil(&a, f, k2, v2);
        snprintf(desc, sizeof desc, "random case %ld: %s with bad %s (value %d)%s%s", i, fn_names[f],
                 kind_names[k1], v1, two ? " and bad " : "", two ? kind_names[k2] : "");
        where = desc;
        if (verbose) fprintf(stderr, "rank %d: %s\n", rank, desc);
        expect(__LINE__, desc, call(f, &a), class_for(k1), two ? class_for(k2) : class_for(k1));
        if (i % 200 == 199) still_works("after random cases");
    }
}

/* the cases that need a particular set-up. */
static void special(void) {
#if INT_HANDLES
    where = "special cases";
    int x = 1;
    MPI_Comm c;
    MPI_Datatype t;
    MPI_Op op;
    /* MPI_Init again */
    int provided;
    EXPECT(MPI_ERR_OTHER, MPI_Init(NULL, NULL));
    EXPECT(MPI_ERR_OTHER, MPI_Init_thread(NULL, NULL, MPI_THREAD_SINGLE, &provided));
    /* frees */
    EXPECT(MPI_ERR_ARG, MPI_Comm_free(NULL));
    c = MPI_COMM_NULL;
    EXPECT(MPI_ERR_COMM, MPI_Comm_free(&c));
    c = MPI_COMM_WORLD;
    EXPECT(MPI_ERR_COMM, MPI_Comm_free(&c));
    CHECK(c == MPI_COMM_WORLD, "MPI_Comm_free(MPI_COMM_WORLD) changed the handle");
    c = MPI_COMM_SELF;
    EXPECT(MPI_ERR_COMM, MPI_Comm_free(&c));
    for (int i = 0; i < ncomms; i++) {
        c = bad_comms[i];
        EXPECT(MPI_ERR_COMM, MPI_Comm_free(&c));
    }
    EXPECT(MPI_ERR_ARG, MPI_Type_commit(NULL));
    EXPECT(MPI_ERR_ARG, MPI_Type_free(NULL));
    t = MPI_INT;
    EXPECT(MPI_ERR_TYPE, MPI_Type_free(&t));
    for (int i = 0; i < ntypes - uncommitted_last; i++) {
        t = bad_types[i];
        EXPECT(MPI_ERR_TYPE, MPI_Type_commit(&t));
        t = bad_types[i];
        EXPECT(MPI_ERR_TYPE, MPI_Type_free(&t));
    }
    EXPECT(MPI_ERR_ARG, MPI_Op_create(NULL, 1, &op));
    EXPECT(MPI_ERR_ARG, MPI_Op_free(NULL));
    op = MPI_SUM;
    EXPECT(MPI_ERR_OP, MPI_Op_free(&op));
    for (int i = 0; i < nops_c; i++) {
        op = bad_ops[i];
        EXPECT(MPI_ERR_OP, MPI_Op_free(&op));
    }
    /* a derived datatype and a user op, freed twice */
    OK(MPI_Type_contiguous(2, MPI_INT, &t));
    OK(MPI_Type_commit(&t));
    MPI_Datatype t2 = t;
    OK(MPI_Type_free(&t));
    CHECK(t == MPI_DATATYPE_NULL, "MPI_Type_free did not set MPI_DATATYPE_NULL");
    EXPECT(MPI_ERR_TYPE, MPI_Type_free(&t2));
    EXPECT(MPI_ERR_TYPE, MPI_Allreduce(&x, &x, 1, t2, MPI_SUM, MPI_COMM_WORLD));
    OK(MPI_Op_create((MPI_User_function *)(void *)1, 1, &op)); /* never called */
    MPI_Op op2 = op;
    OK(MPI_Op_free(&op));
    EXPECT(MPI_ERR_OP, MPI_Op_free(&op2));
    EXPECT(MPI_ERR_OP, MPI_Op_commutative(op2, &x));
    EXPECT(MPI_ERR_OP, MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, op2, MPI_COMM_WORLD));
    /* a communicator, freed twice */
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    MPI_Comm c2 = c;
    OK(MPI_Comm_free(&c));
    EXPECT(MPI_ERR_COMM, MPI_Comm_free(&c2));
    EXPECT(MPI_ERR_COMM, MPI_Barrier(c2));
    /* a set error handler is kept when a bad one is refused */
    EXPECT(MPI_ERR_ARG, MPI_Comm_set_errhandler(MPI_COMM_WORLD, (MPI_Errhandler)0x54000009));
    /* ops refused on a datatype, buffers MPI forbids */
    float fl = 1, fl2;
    EXPECT(MPI_ERR_OP, MPI_Allreduce(&fl, &fl2, 1, MPI_FLOAT, MPI_BAND, MPI_COMM_WORLD));
    EXPECT(MPI_ERR_BUFFER, MPI_Send(MPI_IN_PLACE, 1, MPI_INT, 0, 0, MPI_COMM_WORLD));
    EXPECT(MPI_ERR_BUFFER, MPI_Recv(MPI_IN_PLACE, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    /* MPI_Waitall: a bad request with statuses gives MPI_ERR_IN_STATUS and
     * the class in the request's status */
    MPI_Request rs[2] = {(MPI_Request)0xac000fff, MPI_REQUEST_NULL};
    MPI_Status sts[2];
    memset(sts, 0, sizeof sts);
    EXPECT(MPI_ERR_IN_STATUS, MPI_Waitall(2, rs, sts));
    CHECK(sts[0].MPI_ERROR == MPI_ERR_REQUEST, "MPI_Waitall: status[0].MPI_ERROR = %d", sts[0].MPI_ERROR);
    /* a NULL request with data: a completed receive's count */
    MPI_Status st;
    memset(&st, 0, sizeof st);
    EXPECT(MPI_ERR_ARG, MPI_Get_count(MPI_STATUS_IGNORE, MPI_INT, &x));
    /* a huge derived datatype */
    OK(MPI_Type_contiguous(1 << 30, MPI_LONG_DOUBLE, &t));
    MPI_Datatype big;
    EXPECT(MPI_ERR_COUNT, MPI_Type_contiguous(1 << 30, t, &big));
    OK(MPI_Type_free(&t));
    /* calls that must work: null requests */
    MPI_Request r = MPI_REQUEST_NULL;
    int flag = 0;
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
    CHECK(flag == 1, "MPI_Test on MPI_REQUEST_NULL: flag %d", flag);
    OK(MPI_Send(NULL, 0, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
#endif
}

/* ---- the life cycle: before MPI_Init, after MPI_Finalize ---- */

/* lifecycle calls: each with valid-looking arguments. */
static int life_call(int f) {
    static int ibuf[64], obuf[64], counts[64] = {1}, displs[64];
    int i, flag;
    MPI_Comm c;
    MPI_Datatype t = MPI_INT;
    MPI_Op op = MPI_SUM;
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Errhandler eh;
    switch (f) {
    case 0: return MPI_Allreduce(ibuf, obuf, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    case 1: return MPI_Reduce_scatter_block(ibuf, obuf, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    case 2: return MPI_Reduce_scatter(ibuf, obuf, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    case 3: return MPI_Allgather(ibuf, 1, MPI_INT, obuf, 1, MPI_INT, MPI_COMM_WORLD);
#if MPI_VERSION >= 4
    case 4: return MPI_Allreduce_c(ibuf, obuf, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    case 5: return MPI_Reduce_scatter_block_c(ibuf, obuf, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    case 6: {
        MPI_Count cc[1] = {1};
        return MPI_Reduce_scatter_c(ibuf, obuf, cc, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    }
    case 7: return MPI_Allgather_c(ibuf, 1, MPI_INT, obuf, 1, MPI_INT, MPI_COMM_WORLD);
#endif
    case 10: return MPI_Allgatherv(ibuf, 1, MPI_INT, obuf, counts, displs, MPI_INT, MPI_COMM_WORLD);
    case 11: return MPI_Barrier(MPI_COMM_WORLD);
    case 12: return MPI_Bcast(ibuf, 1, MPI_INT, 0, MPI_COMM_WORLD);
    case 13: return MPI_Reduce(ibuf, obuf, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    case 14: return MPI_Gather(ibuf, 1, MPI_INT, obuf, 1, MPI_INT, 0, MPI_COMM_WORLD);
    case 15: return MPI_Send(ibuf, 1, MPI_INT, 0, 0, MPI_COMM_SELF);
    case 16: return MPI_Recv(ibuf, 1, MPI_INT, 0, 0, MPI_COMM_SELF, MPI_STATUS_IGNORE);
    case 17: return MPI_Isend(ibuf, 1, MPI_INT, 0, 0, MPI_COMM_SELF, &r);
    case 18: return MPI_Irecv(ibuf, 1, MPI_INT, 0, 0, MPI_COMM_SELF, &r);
    case 19:
        return MPI_Sendrecv(ibuf, 1, MPI_INT, 0, 0, obuf, 1, MPI_INT, 0, 0, MPI_COMM_SELF, MPI_STATUS_IGNORE);
    case 20: return MPI_Wait(&r, MPI_STATUS_IGNORE);
    case 21: return MPI_Waitall(1, &r, MPI_STATUSES_IGNORE);
    case 22: return MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    case 23: return MPI_Comm_rank(MPI_COMM_WORLD, &i);
    case 24: return MPI_Comm_size(MPI_COMM_WORLD, &i);
    case 25: return MPI_Comm_dup(MPI_COMM_WORLD, &c);
    case 26: return MPI_Comm_split(MPI_COMM_WORLD, 0, 0, &c);
    case 27: c = MPI_COMM_WORLD; return MPI_Comm_free(&c);
    case 28: return MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_SELF, &i);
    case 29: return MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    case 30: return MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh);
    case 31: return MPI_Type_size(MPI_INT, &i);
    case 32: return MPI_Type_contiguous(2, MPI_INT, &t);
    case 33: return MPI_Type_commit(&t);
    case 34: return MPI_Type_free(&t);
    case 35: return MPI_Op_create((MPI_User_function *)(void *)1, 1, &op);
    case 36: return MPI_Op_free(&op);
    case 37: return MPI_Op_commutative(MPI_SUM, &i);
    case 38: return MPI_Query_thread(&i);
    case 39: return MPI_Finalize();
    case 40: return MPI_Init(NULL, NULL); /* after MPI_Finalize only */
    /* NULL output pointers to the calls allowed before MPI_Init */
    case 50: return MPI_Initialized(NULL);
    case 51: return MPI_Finalized(NULL);
    case 52: return MPI_Get_version(NULL, &i);
    case 53: return MPI_Get_library_version(NULL, &i);
    case 54: return MPI_Get_processor_name((char *)obuf, NULL);
    case 55: return MPI_Error_string(MPI_ERR_ARG, NULL, &i);
    case 56: return MPI_Error_class(MPI_ERR_ARG, NULL);
    }
    return -12345; /* no such case */
}

/* The name each lifecycle case must print, and the argument for the
 * NULL-pointer ones. */
static const char *life_name(int f, const char **arg) {
    static const char *names[] = {
        [0] = "MPI_Allreduce", "MPI_Reduce_scatter_block", "MPI_Reduce_scatter", "MPI_Allgather",
        "MPI_Allreduce", "MPI_Reduce_scatter_block", "MPI_Reduce_scatter", "MPI_Allgather",
        [10] = "MPI_Allgatherv", "MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Gather", "MPI_Send",
        "MPI_Recv", "MPI_Isend", "MPI_Irecv", "MPI_Sendrecv", "MPI_Wait", "MPI_Waitall", "MPI_Test",
        "MPI_Comm_rank", "MPI_Comm_size", "MPI_Comm_dup", "MPI_Comm_split", "MPI_Comm_free",
        "MPI_Comm_compare", "MPI_Comm_set_errhandler", "MPI_Comm_get_errhandler", "MPI_Type_size",
        "MPI_Type_contiguous", "MPI_Type_commit", "MPI_Type_free", "MPI_Op_create", "MPI_Op_free",
        "MPI_Op_commutative", "MPI_Query_thread", "MPI_Finalize", "MPI_Init",
        [50] = "MPI_Initialized", "MPI_Finalized", "MPI_Get_version", "MPI_Get_library_version",
        "MPI_Get_processor_name", "MPI_Error_string", "MPI_Error_class",
    };
    static const char *args[] = {[50] = "flag", "flag", "version", "version", "resultlen", "string",
                                 "errorclass"};
    *arg = f < (int)(sizeof args / sizeof *args) ? args[f] : NULL;
    return f < (int)(sizeof names / sizeof *names) ? names[f] : NULL;
}

/* child runs one lifecycle case: "pre" (no MPI_Init), "post" (after
 * MPI_Finalize, the default handler), "postret" (every case after
 * MPI_Finalize, with MPI_ERRORS_RETURN on MPI_COMM_WORLD: exits with the
 * number of wrong results), "abort" (MPI_Abort on MPI_COMM_NULL). */
static int child(const char *what, int f) {
    alarm(60);
    if (!strcmp(what, "pre")) {
        int rc = life_call(f);
        printf("returned %d\n", rc);
        return 0;
    }
    if (!strcmp(what, "preabort")) {
        MPI_Abort(MPI_COMM_WORLD, 9);
        return 0;
    }
    MPI_Init(NULL, NULL);
    if (!strcmp(what, "abort")) {
        MPI_Abort(MPI_COMM_NULL, 7);
        return 0;
    }
    if (!strcmp(what, "postret")) {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Finalize();
        int wrong = 0;
        for (int g = 0; g <= 40; g++) {
            const char *arg, *name = life_name(g, &arg);
            if (!name || (preload && g >= FN_NPRELOAD)) continue;
            int rc = life_call(g);
            if (rc != MPI_ERR_OTHER) {
                fprintf(stderr, "after MPI_Finalize, %s returned %d, want MPI_ERR_OTHER\n", name, rc);
                wrong++;
            }
        }
        return wrong;
    }
    MPI_Finalize();
    int rc = life_call(f);
    printf("returned %d\n", rc);
    return 0;
}

/* spawn runs this program as `child what f` and returns how it ended
 * (waitpid's status) and its output. */
static int spawn(const char *what, int f, char *out, size_t outlen) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    char fs[16];
    snprintf(fs, sizeof fs, "%d", f);
    char *argv[] = {"abifuzz", "child", (char *)what, fs, preload ? "-preload" : NULL, NULL};
    pid_t pid;
    int err = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (err != 0) {
        close(fds[0]);
        return -1;
    }
    size_t n = 0;
    ssize_t k;
    while ((k = read(fds[0], out + n, outlen - 1 - n)) > 0 || (k < 0 && errno == EINTR))
        if (k > 0) n += (size_t)k;
    out[n] = 0;
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}

/* no_panic: a child's output shows no Go panic or crash. */
static int no_panic(const char *out) {
    return !strstr(out, "panic") && !strstr(out, "goroutine ") && !strstr(out, "SIGSEGV") &&
           !strstr(out, "fatal error") && !strstr(out, "signal arrived");
}

/* ended checks how a child ended: exit status want (-1: any non-zero),
 * with call (and arg) named in its output, and no panic. */
static void ended(const char *desc, int status, const char *out, int want, const char *call, const char *arg,
                  const char *phrase) {
    where = desc;
    if (!WIFEXITED(status)) {
        CHECK(0, "killed by signal %d, not a clean exit:\n%s", WIFSIGNALED(status) ? WTERMSIG(status) : -1, out);
        return;
    }
    int code = WEXITSTATUS(status);
    CHECK(want < 0 ? code != 0 : code == want, "exit status %d, want %d:\n%s", code, want, out);
    CHECK(no_panic(out), "a panic or crash in the output:\n%s", out);
    if (call) {
        char needle[96];
        snprintf(needle, sizeof needle, "gocoll: %s: ", call);
        CHECK(strstr(out, needle) != NULL, "the message does not begin `%s`:\n%s", needle, out);
        if (arg) {
            snprintf(needle, sizeof needle, "%s is NULL", arg);
            CHECK(strstr(out, needle) != NULL, "the message does not say `%s`:\n%s", needle, out);
        }
        if (phrase) CHECK(strstr(out, phrase) != NULL, "the message does not say `%s`:\n%s", phrase, out);
    }
}

static void lifecycle(void) {
    static char out[1 << 16];
    char desc[160];
    /* The calls allowed before MPI_Init, here in this process. */
    where = "before MPI_Init";
    int flag = -1, v = -1, sv = -1, len = 0, cls = -1;
    char str[MPI_MAX_LIBRARY_VERSION_STRING];
    OK(MPI_Initialized(&flag));
    CHECK(flag == 0, "MPI_Initialized says %d before MPI_Init", flag);
    OK(MPI_Finalized(&flag));
    CHECK(flag == 0, "MPI_Finalized says %d before MPI_Init", flag);
    if (!preload) { /* the host MPI's own calls: not gocoll's business */
        OK(MPI_Get_version(&v, &sv));
        CHECK(v == MPI_VERSION && sv == MPI_SUBVERSION, "MPI_Get_version: %d.%d", v, sv);
        OK(MPI_Get_library_version(str, &len));
        CHECK(len > 0 && (int)strlen(str) == len, "MPI_Get_library_version: %d, %s", len, str);
        CHECK(MPI_Wtime() > 0 && MPI_Wtick() > 0, "MPI_Wtime/MPI_Wtick");
        OK(MPI_Get_processor_name(str, &len));
        CHECK(len > 0 && (int)strlen(str) == len, "MPI_Get_processor_name: %d, %s", len, str);
        OK(MPI_Error_class(MPI_ERR_ARG, &cls));
        CHECK(cls == MPI_ERR_ARG, "MPI_Error_class: %d", cls);
        OK(MPI_Error_string(MPI_ERR_ARG, str, &len));
        CHECK(len > 0, "MPI_Error_string");
    }
    /* Each other call, in a child of its own: before MPI_Init, and after
     * MPI_Finalize with the default handler. */
    for (int f = 0; f <= 56; f++) {
        const char *arg, *name = life_name(f, &arg);
        if (!name || (preload && f >= FN_NPRELOAD)) continue;
        if (f != 40) { /* MPI_Init before MPI_Init is no error */
            int st = spawn("pre", f, out, sizeof out);
            snprintf(desc, sizeof desc, "%s before MPI_Init", name);
            if (preload) ended(desc, st, out, -1, NULL, NULL, NULL);
            else if (arg) ended(desc, st, out, MPI_ERR_ARG, name, arg, NULL);
            else ended(desc, st, out, MPI_ERR_OTHER, name, NULL, "called before MPI_Init");
        }
        if (!arg) {
            int st = spawn("post", f, out, sizeof out);
            snprintf(desc, sizeof desc, "%s after MPI_Finalize", name);
            if (preload) ended(desc, st, out, -1, NULL, NULL, NULL);
            else ended(desc, st, out, MPI_ERR_OTHER, name, NULL, "after MPI_Finalize");
        }
    }
    if (preload) return;
    int st = spawn("postret", 0, out, sizeof out);
    ended("every call after MPI_Finalize, with MPI_ERRORS_RETURN", st, out, 0, NULL, NULL, NULL);
    st = spawn("abort", 0, out, sizeof out);
    ended("MPI_Abort(MPI_COMM_NULL, 7)", st, out, 7, NULL, NULL, NULL);
    CHECK(strstr(out, "MPI_Abort") != NULL, "MPI_Abort says nothing:\n%s", out);
    st = spawn("preabort", 0, out, sizeof out);
    ended("MPI_Abort(MPI_COMM_WORLD, 9) before MPI_Init", st, out, 9, NULL, NULL, NULL);
}

int main(int argc, char **argv) {
    long nrandom = 3000;
    const char *mode = "fuzz";
    if (argc > 1 && (!strcmp(argv[1], "lifecycle") || !strcmp(argv[1], "child"))) mode = argv[1];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-preload")) preload = 1;
        else if (!strcmp(argv[i], "-v")) verbose = 1;
        else if (!strcmp(argv[i], "-seed") && i + 1 < argc) rng_state = strtoull(argv[++i], NULL, 0) | 1;
        else if (!strcmp(argv[i], "-random") && i + 1 < argc) nrandom = atol(argv[++i]);
    }
    if (!strcmp(mode, "child")) return argc > 3 ? child(argv[2], atoi(argv[3])) : 2;
    if (!strcmp(mode, "lifecycle")) {
        lifecycle();
        printf("%d passed, %d failed\n", passed, failed);
        return failed ? 1 : 0;
    }
    uint64_t seed = rng_state;
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    sendbuf = calloc((size_t)N * size, sizeof(int));
    recvbuf = calloc((size_t)N * size, sizeof(int));
    countsbuf = calloc((size_t)size, sizeof(int));
    displsbuf = calloc((size_t)size, sizeof(int));
#if MPI_VERSION >= 4
    ccountsbuf = calloc((size_t)size, sizeof(MPI_Count));
#endif
    make_bad_handles();
    systematic();
    still_works("after the systematic cases");
    if (!preload) {
        special();
        still_works("after the special cases");
    }
    randomly(nrandom);
    still_works("after the random cases");
    where = "MPI_Finalize";
    OK(MPI_Finalize());
    printf("rank %d: seed %#llx, %ld random cases\n", rank, (unsigned long long)seed, nrandom);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
