/*
 * collfuzz: the C-level fuzz harness of gocoll's collectives. It decodes
 * inputs into calls of MPI_Allreduce, MPI_Reduce_scatter(_block),
 * MPI_Allgather(v) and their MPI-4 large-count forms, with
 * MPI_ERRORS_RETURN, and checks each call: an invalid one must return
 * one of the MPI error classes its arguments call for, a valid one the
 * right result; and neither may write outside the receive buffer (guard
 * bytes around every buffer) or into the send buffer.
 *
 *   collfuzz [-random N] [-seed S] [-nocheck] [corpus files...]
 *
 * Each corpus file holds one input as hexadecimal bytes ('#' starts a
 * comment line); -random adds N inputs drawn from a fixed seed. Every rank
 * decodes the same inputs, so that all make the same calls in the same
 * order. Whether a call is valid may still differ between ranks (a NULL
 * receive buffer is fine where recvcounts[rank] is 0): the harness runs
 * under GOCOLL_CHECK=1, with which a rank whose arguments are invalid
 * makes every rank fail (MPI_ERR_OTHER at the others). With -nocheck it
 * skips the inputs whose validity differs between ranks, which would
 * otherwise leave the valid ranks waiting.
 *
 * Each rank prints its own `rank R: N passed, N failed` and exits non-zero
 * if any of its checks failed (the launcher's exit status combines the
 * ranks'); with -v it prints each call. The decoding, byte by byte
 * (each taken modulo its choices):
 *
 *   0 call   1 communicator   2 datatype   3 op   4 count
 *   5 send buffer (normal, NULL, MPI_IN_PLACE, inside the receive buffer)
 *   6 receive buffer (normal, NULL, MPI_IN_PLACE)
 *   7 recvcounts (array, NULL, MPI_IN_PLACE)   8 displs (packed,
 *     reversed, NULL, negative, MPI_IN_PLACE)   9 receive datatype
 *   10 receive count - send count + 1 (allgather)   11 offset of a send
 *   buffer inside the receive buffer   12.. recvcounts[q]
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>

static int wrank, wsize, verbose, passed, failed;
static long skipped;

#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        if (cond) passed++;                                                 \
        else {                                                              \
            failed++;                                                       \
            if (failed <= 30) {                                             \
                fprintf(stderr, "rank %d: FAIL %s: ", wrank, desc);         \
                fprintf(stderr, __VA_ARGS__);                               \
                fprintf(stderr, "\n");                                      \
            }                                                               \
        }                                                                   \
    } while (0)

/* ---- the choices ---- */

enum call { ALLREDUCE, REDUCE_SCATTER, REDUCE_SCATTER_BLOCK, ALLGATHER, ALLGATHERV,
            ALLREDUCE_C, REDUCE_SCATTER_C, REDUCE_SCATTER_BLOCK_C, ALLGATHER_C, NCALLS };
static const char *callnames[] = {"MPI_Allreduce", "MPI_Reduce_scatter", "MPI_Reduce_scatter_block", "MPI_Allgather",
                                  "MPI_Allgatherv", "MPI_Allreduce_c", "MPI_Reduce_scatter_c",
                                  "MPI_Reduce_scatter_block_c", "MPI_Allgather_c"};

/* Element kinds, for the reference and for which ops apply. */
enum kind { K_INT, K_LONG, K_UCHAR, K_DOUBLE, K_FLOAT, K_CHAR, K_BYTE, K_2INT, K_INT3, K_BAD };
struct dtype {
    const char *name;
    MPI_Datatype h;
    enum kind k;
    int size;
};
static struct dtype types[] = {
    {"MPI_INT", MPI_INT, K_INT, 4},
    {"MPI_LONG", MPI_LONG, K_LONG, 8},
    {"MPI_UNSIGNED_CHAR", MPI_UNSIGNED_CHAR, K_UCHAR, 1},
    {"MPI_DOUBLE", MPI_DOUBLE, K_DOUBLE, 8},
    {"MPI_FLOAT", MPI_FLOAT, K_FLOAT, 4},
    {"MPI_CHAR", MPI_CHAR, K_CHAR, 1},
    {"MPI_BYTE", MPI_BYTE, K_BYTE, 1},
    {"MPI_2INT", MPI_2INT, K_2INT, 8},
    {"contiguous(3, MPI_INT)", 0, K_INT3, 12}, /* handles filled in at start */
    {"uncommitted contiguous(2, MPI_INT)", 0, K_BAD, 8},
    {"freed contiguous(2, MPI_INT)", 0, K_BAD, 8},
    {"MPI_DATATYPE_NULL", MPI_DATATYPE_NULL, K_BAD, 0},
    {"invalid datatype 0x4c00ffff", (MPI_Datatype)0x4c00ffff, K_BAD, 0},
};
#define NTYPES (int)(sizeof types / sizeof *types)

enum opk { O_SUM, O_PROD, O_MAX, O_MIN, O_BAND, O_BXOR, O_LAND, O_LOR, O_MAXLOC, O_USER, O_BAD };
struct op {
    const char *name;
    MPI_Op h;
    enum opk o;
};
static struct op opsl[] = {
    {"MPI_SUM", MPI_SUM, O_SUM},   {"MPI_PROD", MPI_PROD, O_PROD}, {"MPI_MAX", MPI_MAX, O_MAX},
    {"MPI_MIN", MPI_MIN, O_MIN},   {"MPI_BAND", MPI_BAND, O_BAND}, {"MPI_BXOR", MPI_BXOR, O_BXOR},
    {"MPI_LAND", MPI_LAND, O_LAND}, {"MPI_LOR", MPI_LOR, O_LOR},   {"MPI_MAXLOC", MPI_MAXLOC, O_MAXLOC},
    {"user sum", 0, O_USER},       {"freed user op", 0, O_BAD},    {"MPI_OP_NULL", MPI_OP_NULL, O_BAD},
    {"MPI_REPLACE", MPI_REPLACE, O_BAD}, {"invalid op 0x58001234", (MPI_Op)0x58001234, O_BAD},
};
#define NOPS (int)(sizeof opsl / sizeof *opsl)

/* ---- values and the reference ---- */

static long value(int r, long i, enum opk o) {
    if (o == O_PROD) return 1 + (r + i) % 2;
    if (o == O_LAND || o == O_LOR) return (r * 3 + i) % 4 % 2;
    return (r * 7 + i * 3) % 11 + 1;
}

/* elems is the number of base elements per element of kind k. */
static int elems(enum kind k) { return k == K_INT3 ? 3 : k == K_2INT ? 2 : 1; }

/* put writes base element j (of rank r's element index i) into buf. */
static void put(void *buf, long at, enum kind k, long v) {
    switch (k) {
    case K_INT: case K_INT3: case K_2INT: ((int *)buf)[at] = (int)v; break;
    case K_LONG: ((long *)buf)[at] = v; break;
    case K_UCHAR: case K_CHAR: case K_BYTE: ((unsigned char *)buf)[at] = (unsigned char)v; break;
    case K_DOUBLE: ((double *)buf)[at] = (double)v; break;
    case K_FLOAT: ((float *)buf)[at] = (float)v; break;
    default: break;
    }
}

static long get(const void *buf, long at, enum kind k) {
    switch (k) {
    case K_INT: case K_INT3: case K_2INT: return ((const int *)buf)[at];
    case K_LONG: return ((const long *)buf)[at];
    case K_UCHAR: case K_CHAR: case K_BYTE: return ((const unsigned char *)buf)[at];
    case K_DOUBLE: return (long)((const double *)buf)[at];
    case K_FLOAT: return (long)((const float *)buf)[at];
    default: return 0;
    }
}

/* fill writes rank r's element i (all its base elements) at element at. */
static void fill(void *buf, long at, enum kind k, enum opk o, int r, long i) {
    int e = elems(k);
    if (k == K_2INT) { /* (value, index) pairs */
        put(buf, at * 2, k, value(r, i, o) % 4);
        put(buf, at * 2 + 1, k, r);
        return;
    }
    for (int j = 0; j < e; j++) put(buf, at * e + j, k, value(r, i * e + j, o));
}

/* want computes the reduction over p ranks of element i, base element j. */
static long fold(enum kind k, enum opk o, int p, long i, int j) {
    if (k == K_2INT && o == O_USER) { /* the user sum adds both ints of the pairs */
        long acc = 0;
        for (int r = 0; r < p; r++) acc += j == 0 ? value(r, i, o) % 4 : r;
        return acc;
    }
    if (k == K_2INT) { /* MAXLOC: the largest value, the lowest rank among ties */
        long best = value(0, i, o) % 4, at = 0;
        for (int r = 1; r < p; r++)
            if (value(r, i, o) % 4 > best) best = value(r, i, o) % 4, at = r;
        return j == 0 ? best : at;
    }
    int e = elems(k);
    long acc = value(0, i * e + j, o);
    for (int r = 1; r < p; r++) {
        long v = value(r, i * e + j, o);
        switch (o) {
        case O_SUM: case O_USER: acc += v; break;
        case O_PROD: acc *= v; break;
        case O_MAX: acc = v > acc ? v : acc; break;
        case O_MIN: acc = v < acc ? v : acc; break;
        case O_BAND: acc &= v; break;
        case O_BXOR: acc ^= v; break;
        case O_LAND: acc = acc && v; break;
        case O_LOR: acc = acc || v; break;
        default: break;
        }
    }
    return acc;
}

/* allowed reports whether the MPI standard defines op o on kind k (a
 * contiguous type of MPI_INT counts as MPI_INT, which gocoll allows). */
static int allowed(enum opk o, enum kind k) {
    int cint = k == K_INT || k == K_LONG || k == K_UCHAR || k == K_INT3;
    int fp = k == K_DOUBLE || k == K_FLOAT;
    switch (o) {
    case O_SUM: case O_PROD: case O_MAX: case O_MIN: return cint || fp;
    case O_BAND: case O_BXOR: return cint || k == K_BYTE;
    case O_LAND: case O_LOR: return cint;
    case O_MAXLOC: return k == K_2INT;
    case O_USER: return k != K_BAD;
    default: return 0;
    }
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    int sz;
    MPI_Type_size(*dt, &sz);
    /* Only used on kinds stored as ints or bytes or doubles: sum by size. */
    if (*dt == MPI_DOUBLE) {
        for (int i = 0; i < *len; i++) ((double *)inout)[i] += ((double *)in)[i];
    } else if (*dt == MPI_FLOAT) {
        for (int i = 0; i < *len; i++) ((float *)inout)[i] += ((float *)in)[i];
    } else if (sz % 8 == 0 && *dt == MPI_LONG) {
        for (int i = 0; i < *len; i++) ((long *)inout)[i] += ((long *)in)[i];
    } else if (sz == 1) {
        for (int i = 0; i < *len; i++) ((unsigned char *)inout)[i] += ((unsigned char *)in)[i];
    } else {
        for (long i = 0; i < (long)*len * sz / 4; i++) ((int *)inout)[i] += ((int *)in)[i];
    }
}

/* ---- guarded buffers ---- */

#define GUARD 64
#define CANARY 0x5a

struct gbuf {
    unsigned char *mem; /* GUARD, len bytes, GUARD */
    long len;
};

static struct gbuf galloc(long len) {
    struct gbuf g = {malloc(len + 2 * GUARD), len};
    memset(g.mem, CANARY, len + 2 * GUARD);
    return g;
}

static void *gptr(struct gbuf *g) { return g->mem + GUARD; }

/* intact checks the guard bytes, and the body outside [from, to). */
static long damaged(struct gbuf *g, long from, long to, const unsigned char *body) {
    for (long i = 0; i < g->len + 2 * GUARD; i++) {
        long at = i - GUARD;
        if (at >= from && at < to) continue;
        unsigned char want = (at >= 0 && at < g->len && body) ? body[at] : CANARY;
        if (g->mem[i] != want) return at;
    }
    return LONG_MIN;
}

/* ---- one call ---- */

struct handles {
    MPI_Comm dup, freed_comm;
    MPI_Op freed_op;
};
static struct handles H;

static char desc[700];

/* One input: up to 64 bytes. */
struct input {
    unsigned char b[64];
    int n;
};

static int B(const struct input *in, int i) { return i < in->n ? in->b[i] : 0; }

/* plan is a decoded input, as every rank sees it. */
struct plan {
    enum call call;
    int large;    /* the _c form */
    int reducing; /* a reduction, not a gather */
    int vector;   /* takes recvcounts */
    MPI_Comm comm;
    const char *commname;
    int comm_ok, p, me;
    struct dtype *t, *rt; /* send (and reduction) type; receive type of the gathers */
    struct op *o;
    long count, rcount;
    int smode; /* 0 normal, 1 NULL, 2 MPI_IN_PLACE, 3 inside the receive buffer */
    int rmode; /* 0 normal, 1 NULL, 2 MPI_IN_PLACE */
    int cmode; /* recvcounts: 0 array, 1 NULL, 2 MPI_IN_PLACE */
    int dmode; /* displs: 0 packed, 1 reversed, 2 NULL, 3 negative, 4 MPI_IN_PLACE */
    int off;   /* smode 3: the send buffer starts off elements into the receive buffer */
    long counts[8], displs[8];
};

static uint64_t bit(int c) { return (uint64_t)1 << c; }

/* need is what rank r's call needs and may do. */
struct need {
    uint64_t bad;     /* the error classes its arguments call for; 0: valid */
    long recv, send;  /* bytes of the receive and send buffers it uses */
    long sendcount;   /* the sendcount argument (Allgatherv: recvcounts[r]) */
};

static struct need needs(const struct plan *pl, int r) {
    struct need nd = {0, 0, 0, 0};
    if (!pl->comm_ok) {
        nd.bad = bit(MPI_ERR_COMM);
        return nd;
    }
    int p = pl->p, inplace = pl->smode == 2;
    long total = 0, mine = 0;
    int countsok = 1;
    if (pl->vector) {
        if (pl->cmode != 0) nd.bad |= bit(MPI_ERR_ARG), countsok = 0;
        else
            for (int q = 0; q < p; q++) {
                if (pl->counts[q] < 0) nd.bad |= bit(MPI_ERR_COUNT), countsok = 0;
                else total += pl->counts[q];
            }
        if (countsok) mine = pl->counts[r];
    }
    long n = pl->count;
    if (pl->reducing) {
        const struct dtype *t = pl->t;
        if (t->k == K_BAD) nd.bad |= bit(MPI_ERR_TYPE);
        if (pl->o->o == O_BAD || (t->k != K_BAD && !allowed(pl->o->o, t->k))) nd.bad |= bit(MPI_ERR_OP);
        if (!pl->vector && (n < 0 || n > (1L << 50))) nd.bad |= bit(MPI_ERR_COUNT);
        /* An op not defined on the type is found after the buffers are:
         * those errors count too. Other errors leave no sizes to check. */
        if (nd.bad & ~bit(MPI_ERR_OP)) return nd;
        long sz = t->size;
        switch (pl->call) {
        case ALLREDUCE: case ALLREDUCE_C: nd.recv = nd.send = n * sz; break;
        case REDUCE_SCATTER: case REDUCE_SCATTER_C: nd.recv = (inplace ? total : mine) * sz, nd.send = total * sz; break;
        default: nd.recv = (inplace ? n * p : n) * sz, nd.send = n * p * sz; break;
        }
    } else {
        long own = pl->vector && pl->cmode == 0 ? pl->counts[r] : 0; /* recvcounts[r], whatever the others */
        long rc = pl->call == ALLGATHERV ? own : pl->rcount;
        nd.sendcount = pl->call == ALLGATHERV ? own : n;
        if (pl->call == ALLGATHERV && pl->dmode >= 2) nd.bad |= bit(pl->dmode == 3 ? MPI_ERR_COUNT : MPI_ERR_ARG);
        if (pl->rt->k == K_BAD) nd.bad |= bit(MPI_ERR_TYPE);
        if (rc < 0 || rc > (1L << 50)) nd.bad |= bit(MPI_ERR_COUNT);
        if (!inplace) { /* the send side must carry the same bytes */
            if (pl->t->k == K_BAD) nd.bad |= bit(MPI_ERR_TYPE);
            if (nd.sendcount < 0 || nd.sendcount > (1L << 50)) nd.bad |= bit(MPI_ERR_COUNT);
            if (pl->t->k != K_BAD && pl->rt->k != K_BAD && nd.sendcount >= 0 && rc >= 0 &&
                nd.sendcount * pl->t->size != rc * pl->rt->size)
                nd.bad |= bit(MPI_ERR_TRUNCATE);
        }
        if (nd.bad) return nd;
        nd.send = inplace ? 0 : nd.sendcount * pl->t->size;
        nd.recv = (pl->call == ALLGATHERV ? total : rc * p) * pl->rt->size;
    }
    if (inplace) nd.send = 0;
    if (nd.recv > 0 && pl->rmode != 0) nd.bad |= bit(MPI_ERR_BUFFER);            /* NULL or MPI_IN_PLACE */
    if (nd.send > 0 && pl->smode == 1) nd.bad |= bit(MPI_ERR_BUFFER);            /* NULL */
    long esz = pl->reducing ? pl->t->size : pl->rt->size;
    if (pl->smode == 3 && nd.send > 0 && nd.recv > 0 && pl->off * esz < nd.recv) /* overlapping */
        nd.bad |= bit(MPI_ERR_BUFFER);
    return nd;
}

static void decode(const struct input *in, struct plan *pl) {
    memset(pl, 0, sizeof *pl);
    pl->call = (enum call)(B(in, 0) % NCALLS);
    pl->large = pl->call >= ALLREDUCE_C;
    pl->reducing = pl->call == ALLREDUCE || pl->call == REDUCE_SCATTER || pl->call == REDUCE_SCATTER_BLOCK ||
                   pl->call == ALLREDUCE_C || pl->call == REDUCE_SCATTER_C || pl->call == REDUCE_SCATTER_BLOCK_C;
    pl->vector = pl->call == REDUCE_SCATTER || pl->call == REDUCE_SCATTER_C || pl->call == ALLGATHERV;
    int cm = B(in, 1) % 11;
    pl->comm_ok = 1;
    if (cm < 6) pl->comm = MPI_COMM_WORLD, pl->commname = "MPI_COMM_WORLD";
    else if (cm == 6) pl->comm = H.dup, pl->commname = "a dup of MPI_COMM_WORLD";
    else if (cm == 7) pl->comm = MPI_COMM_SELF, pl->commname = "MPI_COMM_SELF";
    else if (cm == 8) pl->comm = MPI_COMM_NULL, pl->commname = "MPI_COMM_NULL", pl->comm_ok = 0;
    else if (cm == 9) pl->comm = (MPI_Comm)0x84001234, pl->commname = "an invalid communicator", pl->comm_ok = 0;
    else pl->comm = H.freed_comm, pl->commname = "a freed communicator", pl->comm_ok = 0;
    pl->p = 1;
    if (pl->comm_ok) {
        MPI_Comm_size(pl->comm, &pl->p);
        MPI_Comm_rank(pl->comm, &pl->me);
    }
    pl->t = &types[B(in, 2) % NTYPES];
    pl->o = &opsl[B(in, 3) % NOPS];
    int c = B(in, 4);
    if (c < 180) pl->count = c % 41 - 1; /* -1 .. 39 */
    else if (c < 230) pl->count = 1000 + (c - 180) * 37;
    else if (c < 250) pl->count = 0;
    else pl->count = pl->large ? (1L << 60) + c : -c; /* too large for the _c forms, negative for the others */
    pl->smode = (const int[]){0, 0, 0, 0, 0, 1, 2, 3}[B(in, 5) % 8];
    pl->rmode = (const int[]){0, 0, 0, 0, 0, 0, 1, 2}[B(in, 6) % 8];
    pl->cmode = (const int[]){0, 0, 0, 0, 0, 1, 2}[B(in, 7) % 7];
    pl->dmode = (const int[]){0, 0, 0, 1, 1, 2, 3, 4}[B(in, 8) % 8];
    int rt = B(in, 9) % 8;
    pl->rt = rt < 6 ? pl->t : rt == 6 ? &types[4] : &types[3]; /* the same, MPI_FLOAT or MPI_DOUBLE */
    pl->rcount = pl->count + B(in, 10) % 3 - 1;
    if (B(in, 10) % 3 == 1 || pl->count > (1L << 50)) pl->rcount = pl->count;
    pl->off = B(in, 11) % 6;
    for (int q = 0; q < pl->p && q < 8; q++) pl->counts[q] = B(in, 12 + q) % 23 - 1; /* -1 .. 21 */
    long at = 0;
    for (int i = 0; i < pl->p; i++) {
        int q = pl->dmode == 1 ? pl->p - 1 - i : i; /* reversed: the last rank's block first */
        pl->displs[q] = at;
        at += pl->counts[q] < 0 ? 0 : pl->counts[q];
    }
    if (pl->dmode == 3) pl->displs[pl->p - 1] = -3;
}

/* block writes rank q's contribution to a gather (n elements of kind k). */
static void block(void *buf, enum kind k, int q, long n) {
    for (long i = 0; i < n; i++) fill(buf, i, k, O_SUM, q, i);
}

/* run makes one input's call and checks it. */
static void run(const struct input *in, int nocheck) {
    struct plan pl;
    decode(in, &pl);
    enum call c = pl.call;
    struct need nd = needs(&pl, pl.me);
    uint64_t any = 0;
    int uniform = 1; /* every rank valid, or every rank invalid */
    for (int q = 0; q < pl.p; q++) {
        uint64_t b = needs(&pl, q).bad;
        any |= b;
        if ((b != 0) != (nd.bad != 0)) uniform = 0;
    }
    snprintf(desc, sizeof desc,
             "%s on %s (%d ranks), %s/%s, %s, count %ld, rcount %ld, sendbuf %d, recvbuf %d, recvcounts %d [%ld %ld %ld], displs %d, off %d",
             callnames[c], pl.commname, pl.p, pl.t->name, pl.rt->name, pl.o->name, pl.count, pl.rcount, pl.smode, pl.rmode,
             pl.cmode, pl.counts[0], pl.counts[1], pl.counts[2], pl.dmode, pl.off);
    if (nocheck && !uniform) {
        skipped++;
        return;
    }
    if (verbose) fprintf(stderr, "rank %d: %s: %s %#llx\n", wrank, desc, nd.bad ? "invalid, classes" : any ? "valid, others invalid" : "valid", (unsigned long long)nd.bad);
    int inplace = pl.smode == 2;
    long esz = pl.reducing ? pl.t->size : pl.rt->size; /* receive element */
    long sendin = pl.smode == 3 ? pl.off * esz : 0;    /* where a send buffer inside the receive buffer starts */
    struct gbuf rb = galloc(nd.recv + (pl.smode == 3 ? sendin + nd.send : 0)), sb = galloc(nd.send);
    void *sp = pl.smode == 3 ? (char *)gptr(&rb) + sendin : gptr(&sb);
    /* Inputs, for the values of a valid call. */
    if (!nd.bad) {
        if (pl.reducing) {
            void *src = inplace ? gptr(&rb) : sp;
            long m = (inplace ? nd.recv : nd.send) / pl.t->size;
            for (long i = 0; i < m; i++) fill(src, i, pl.t->k, pl.o->o, pl.me, i);
        } else if (inplace) {
            long at = c == ALLGATHERV ? pl.displs[pl.me] : pl.me * pl.rcount;
            block((char *)gptr(&rb) + at * esz, pl.rt->k, pl.me, c == ALLGATHERV ? pl.counts[pl.me] : pl.rcount);
        } else {
            block(sp, pl.t->k, pl.me, nd.sendcount);
        }
    }
    unsigned char *rbefore = malloc(rb.len + 1), *sbefore = malloc(sb.len + 1);
    memcpy(rbefore, gptr(&rb), rb.len);
    memcpy(sbefore, gptr(&sb), sb.len);
    void *rp = gptr(&rb);
    if (pl.smode == 1) sp = NULL;
    if (pl.smode == 2) sp = MPI_IN_PLACE;
    if (pl.rmode == 1) rp = NULL;
    if (pl.rmode == 2) rp = MPI_IN_PLACE;
    int icounts[8], idispls[8];
    MPI_Count ccounts[8];
    for (int q = 0; q < 8; q++) icounts[q] = (int)pl.counts[q], ccounts[q] = pl.counts[q], idispls[q] = (int)pl.displs[q];
    int *ic = pl.cmode == 0 ? icounts : pl.cmode == 1 ? NULL : (int *)MPI_IN_PLACE;
    MPI_Count *cc = pl.cmode == 0 ? ccounts : pl.cmode == 1 ? NULL : (MPI_Count *)MPI_IN_PLACE;
    int *id = pl.dmode == 2 ? NULL : pl.dmode == 4 ? (int *)MPI_IN_PLACE : idispls;
    MPI_Datatype t = pl.t->h, rt = pl.rt->h;
    MPI_Op op = pl.o->h;
    int rc;
    switch (c) {
    case ALLREDUCE: rc = MPI_Allreduce(sp, rp, (int)pl.count, t, op, pl.comm); break;
    case ALLREDUCE_C: rc = MPI_Allreduce_c(sp, rp, pl.count, t, op, pl.comm); break;
    case REDUCE_SCATTER: rc = MPI_Reduce_scatter(sp, rp, ic, t, op, pl.comm); break;
    case REDUCE_SCATTER_C: rc = MPI_Reduce_scatter_c(sp, rp, cc, t, op, pl.comm); break;
    case REDUCE_SCATTER_BLOCK: rc = MPI_Reduce_scatter_block(sp, rp, (int)pl.count, t, op, pl.comm); break;
    case REDUCE_SCATTER_BLOCK_C: rc = MPI_Reduce_scatter_block_c(sp, rp, pl.count, t, op, pl.comm); break;
    case ALLGATHER: rc = MPI_Allgather(sp, (int)pl.count, t, rp, (int)pl.rcount, rt, pl.comm); break;
    case ALLGATHER_C: rc = MPI_Allgather_c(sp, pl.count, t, rp, pl.rcount, rt, pl.comm); break;
    default: rc = MPI_Allgatherv(sp, (int)nd.sendcount, t, rp, ic, id, rt, pl.comm); break;
    }
    int cls = rc;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    if (nd.bad) {
        CHECK(rc != MPI_SUCCESS && cls < 64 && (nd.bad & bit(cls)), "class %d, want one of mask %#llx", cls,
              (unsigned long long)nd.bad);
    } else if (any && !nocheck) {
        CHECK(cls == MPI_ERR_OTHER, "class %d, want MPI_ERR_OTHER (another rank's arguments are invalid)", cls);
    } else if (rc != MPI_SUCCESS) {
        CHECK(0, "a valid call failed: class %d", cls);
    } else {
        const void *out = gptr(&rb);
        long bad = -1, got = 0, want = 0;
        int p = pl.p;
        if (pl.reducing) {
            enum kind k = pl.t->k;
            int e = elems(k);
            long m = c == ALLREDUCE || c == ALLREDUCE_C ? pl.count
                     : pl.vector                         ? pl.counts[pl.me]
                                                         : pl.count;
            long off = 0;
            if (pl.vector)
                for (int q = 0; q < pl.me; q++) off += pl.counts[q];
            else if (c != ALLREDUCE && c != ALLREDUCE_C)
                off = pl.count * pl.me;
            long mask = k == K_UCHAR || k == K_BYTE || k == K_CHAR ? 0xff : -1;
            for (long i = 0; i < m && bad < 0; i++)
                for (int j = 0; j < e && bad < 0; j++)
                    if ((got = get(out, i * e + j, k)) != (want = fold(k, pl.o->o, p, off + i, j) & mask)) bad = i;
        } else {
            unsigned char tmp[64];
            enum kind k = inplace ? pl.rt->k : pl.t->k;
            long sz = inplace ? pl.rt->size : pl.t->size;
            for (int q = 0; q < p && bad < 0; q++) {
                long m = c == ALLGATHERV ? pl.counts[q] : inplace ? pl.rcount : pl.count;
                long at = (c == ALLGATHERV ? pl.displs[q] * esz : q * m * sz);
                for (long i = 0; i < m && bad < 0; i++) {
                    fill(tmp, 0, k, O_SUM, q, i);
                    if (memcmp((const char *)out + at + i * sz, tmp, sz)) bad = at / sz + i;
                }
            }
        }
        CHECK(bad < 0, "element %ld is %ld, want %ld", bad, got, want);
    }
    /* Nothing outside what the call may write changed: the receive
     * buffer's used part (only if the call succeeded), nothing else. */
    long d = damaged(&rb, 0, rc == MPI_SUCCESS ? nd.recv : 0, rbefore);
    CHECK(d == LONG_MIN, "the receive buffer changed at byte %ld (the call may write %ld bytes)", d, nd.recv);
    d = damaged(&sb, 0, 0, sbefore);
    CHECK(d == LONG_MIN, "the send buffer changed at byte %ld", d);
    free(rb.mem), free(sb.mem), free(rbefore), free(sbefore);
}

/* readHex reads a corpus file: hexadecimal bytes, '#' comment lines. */
static int readHex(const char *path, struct input *in) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[512];
    in->n = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        for (char *s = line; *s && in->n < 64;) {
            unsigned v;
            int used;
            if (sscanf(s, " %2x%n", &v, &used) != 1) break;
            in->b[in->n++] = (unsigned char)v;
            s += used;
        }
    }
    fclose(f);
    return 1;
}

/* xorshift64*: the same sequence on every rank. */
static uint64_t rng_state;
static uint64_t rng(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

int main(int argc, char **argv) {
    long nrandom = 0;
    uint64_t seed = 1;
    int nocheck = 0, first = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-random") && i + 1 < argc) nrandom = atol(argv[++i]);
        else if (!strcmp(argv[i], "-seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-nocheck")) nocheck = 1;
        else if (!strcmp(argv[i], "-v")) verbose = 1;
        else {
            first = i;
            break;
        }
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    /* The handles: made first, then the freed ones, and nothing after,
     * so that no later object takes a freed handle's value. */
    MPI_Comm_dup(MPI_COMM_WORLD, &H.dup);
    MPI_Comm_set_errhandler(H.dup, MPI_ERRORS_RETURN);
    MPI_Datatype int3, unc, freed;
    MPI_Type_contiguous(3, MPI_INT, &int3);
    MPI_Type_commit(&int3);
    MPI_Type_contiguous(2, MPI_INT, &unc);
    MPI_Type_contiguous(2, MPI_INT, &freed);
    MPI_Type_commit(&freed);
    MPI_Op user, fop;
    MPI_Op_create(user_sum, 1, &user);
    MPI_Op_create(user_sum, 1, &fop);
    MPI_Comm fcomm;
    MPI_Comm_dup(MPI_COMM_WORLD, &fcomm);
    for (int i = 0; i < NTYPES; i++) {
        if (!strcmp(types[i].name, "contiguous(3, MPI_INT)")) types[i].h = int3;
        if (!strncmp(types[i].name, "uncommitted", 11)) types[i].h = unc;
        if (!strncmp(types[i].name, "freed", 5)) types[i].h = freed;
    }
    for (int i = 0; i < NOPS; i++) {
        if (opsl[i].o == O_USER) opsl[i].h = user;
        if (!strncmp(opsl[i].name, "freed", 5)) opsl[i].h = fop;
    }
    H.freed_comm = fcomm;
    MPI_Comm_free(&fcomm);
    MPI_Datatype f2 = freed;
    MPI_Type_free(&f2);
    MPI_Op f3 = fop;
    MPI_Op_free(&f3);

    long inputs = 0;
    for (int i = first; first && i < argc; i++) {
        struct input in;
        if (!readHex(argv[i], &in)) {
            if (wrank == 0) fprintf(stderr, "collfuzz: cannot read %s\n", argv[i]);
            failed++;
            continue;
        }
        run(&in, nocheck);
        inputs++;
    }
    for (long i = 0; i < nrandom; i++) {
        struct input in;
        rng_state = seed * 0x9E3779B97F4A7C15ULL + (uint64_t)i + 1;
        in.n = 32;
        for (int j = 0; j < in.n; j++) in.b[j] = (unsigned char)(rng() >> 56);
        run(&in, nocheck);
        inputs++;
    }
    MPI_Comm_free(&H.dup);
    MPI_Type_free(&int3);
    MPI_Type_free(&unc);
    MPI_Op_free(&user);
    /* Each rank judges its own calls: its line and its exit status are
     * its verdict, and the launcher's exit status combines the ranks',
     * so that no total rests on the collectives under test. */
    if (wrank == 0) {
        if (nocheck) printf("%ld inputs, %ld skipped (valid at some ranks only: they need GOCOLL_CHECK)\n", inputs, skipped);
        else printf("%ld inputs\n", inputs);
    }
    MPI_Finalize();
    printf("rank %d: %d passed, %d failed\n", wrank, passed, failed);
    fflush(stdout);
    return failed != 0;
}
