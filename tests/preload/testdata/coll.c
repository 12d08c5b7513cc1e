/*
 * coll.c: the LD_PRELOAD test program. Built unchanged with mpicc.openmpi
 * and mpicc.mpich, run under each MPI with libgocoll-preload.so
 * preloaded (tests/preload/preload_test.go). It checks every result
 * against a naive reference computed here, never against the host MPI,
 * and prints `N passed, N failed`.
 *
 * It also prints, from rank 0, how many calls (summed over ranks) it
 * expects gocoll to take (`expect gocoll=N host=M noncommutative=K`):
 * the test counts the GOCOLL_DEBUG=info lines against it, to prove that
 * gocoll ran the calls it should and handed the others to the host.
 *
 *   coll [-churn N] [-threads] [-fault] [-quick]
 *
 * -churn N     free and recreate a communicator N times (default 10)
 * -threads     call the collectives from a second thread
 *              (MPI_THREAD_SERIALIZED); default MPI_THREAD_FUNNELED
 * -fault       the test sets GOCOLL_PRELOAD_FAULT=3: the third call gocoll
 *              runs panics inside Go, which must come back as an MPI
 *              error through MPI_ERRORS_RETURN, after which calls work
 * -quick       fewer datatypes and counts (for runs where the host MPI
 *              takes most calls: MPICH busy-polls, slow when oversubscribed)
 */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <complex.h>

static int wrank, wsize, quick;
static long passed, failed;
static long expect_gocoll, expect_host, noncommutative;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (cond) passed++;                                                \
        else {                                                             \
            failed++;                                                      \
            if (failed <= 20) {                                            \
                fprintf(stderr, "FAIL rank %d: ", wrank);                  \
                fprintf(stderr, __VA_ARGS__);                              \
                fprintf(stderr, "\n");                                     \
            }                                                              \
        }                                                                  \
    } while (0)

/* ---- element kinds, their values and the reference ops ---- */

enum kind { K_INT, K_LONG, K_UNSIGNED, K_SHORT, K_UCHAR, K_LLONG, K_INT8, K_UINT64, K_FLOAT,
            K_DOUBLE, K_CDOUBLE, K_BOOL, K_2INT, K_DOUBLE_INT, K_AFFINE };
enum op { O_SUM, O_PROD, O_MAX, O_MIN, O_LAND, O_LOR, O_LXOR, O_BAND, O_BOR, O_BXOR, O_MAXLOC,
          O_MINLOC, O_USER_SUM, O_USER_AFFINE };

typedef struct { int v, i; } pair2int;
typedef struct { double v; int i; } pairdi;
typedef struct { uint32_t m, c; } affine; /* x -> m*x + c */

static size_t ksize(enum kind k) {
    switch (k) {
    case K_INT: return sizeof(int);
    case K_LONG: return sizeof(long);
    case K_UNSIGNED: return sizeof(unsigned);
    case K_SHORT: return sizeof(short);
    case K_UCHAR: return 1;
    case K_LLONG: return sizeof(long long);
    case K_INT8: return 1;
    case K_UINT64: return 8;
    case K_FLOAT: return sizeof(float);
    case K_DOUBLE: return sizeof(double);
    case K_CDOUBLE: return sizeof(double complex);
    case K_BOOL: return sizeof(_Bool);
    case K_2INT: return sizeof(pair2int);
    case K_DOUBLE_INT: return sizeof(pairdi);
    case K_AFFINE: return sizeof(affine);
    }
    return 0;
}

static MPI_Datatype ktype(enum kind k) {
    switch (k) {
    case K_INT: return MPI_INT;
    case K_LONG: return MPI_LONG;
    case K_UNSIGNED: return MPI_UNSIGNED;
    case K_SHORT: return MPI_SHORT;
    case K_UCHAR: return MPI_UNSIGNED_CHAR;
    case K_LLONG: return MPI_LONG_LONG;
    case K_INT8: return MPI_INT8_T;
    case K_UINT64: return MPI_UINT64_T;
    case K_FLOAT: return MPI_FLOAT;
    case K_DOUBLE: return MPI_DOUBLE;
    case K_CDOUBLE: return MPI_C_DOUBLE_COMPLEX;
    case K_BOOL: return MPI_C_BOOL;
    case K_2INT: return MPI_2INT;
    case K_DOUBLE_INT: return MPI_DOUBLE_INT;
    case K_AFFINE: return MPI_2INT;
    }
    return MPI_DATATYPE_NULL;
}

static const char *kname(enum kind k) {
    static const char *n[] = {"int", "long", "unsigned", "short", "unsigned char", "long long", "int8", "uint64",
                              "float", "double", "double complex", "bool", "2int", "double_int", "affine"};
    return n[k];
}

static const char *oname(enum op o) {
    static const char *n[] = {"SUM", "PROD", "MAX", "MIN", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR",
                              "MAXLOC", "MINLOC", "user sum", "user affine (non-commutative)"};
    return n[o];
}

/* A small integer that depends on the rank and the index: values stay
 * exact in every type and clear of the host MPIs' known bugs (unsigned
 * MIN/MAX compared as signed, 8-bit SUM saturation), which fallbacks and
 * native choices would bring back. */
static long val(int r, long i, enum op o) {
    if (o == O_PROD) return 1 + (r + i) % 2;
    if (o == O_LAND || o == O_LOR || o == O_LXOR) return ((r * 3 + i) % 4) != 0;
    if (o == O_BAND || o == O_BOR || o == O_BXOR) return ((r + 1) * 37 + i * 11) % 128;
    return ((r + 1) * (i % 13 + 1) + i) % 11;
}

static int is_signed(enum kind k) { return k == K_INT || k == K_LONG || k == K_SHORT || k == K_LLONG || k == K_INT8 || k == K_FLOAT || k == K_DOUBLE; }

/* fill writes element i of rank r's vector. */
static void fill(void *buf, long idx, enum kind k, enum op o, int r, long i) {
    long v = val(r, i, o);
    if (is_signed(k) && (o == O_SUM || o == O_MAX || o == O_MIN)) v -= 5;
    char *p = (char *)buf + idx * ksize(k);
    switch (k) {
    case K_INT: *(int *)p = (int)v; break;
    case K_LONG: *(long *)p = v; break;
    case K_UNSIGNED: *(unsigned *)p = (unsigned)v; break;
    case K_SHORT: *(short *)p = (short)v; break;
    case K_UCHAR: *(unsigned char *)p = (unsigned char)v; break;
    case K_LLONG: *(long long *)p = v; break;
    case K_INT8: *(int8_t *)p = (int8_t)v; break;
    case K_UINT64: *(uint64_t *)p = (uint64_t)v << 40 | (uint64_t)v; break;
    case K_FLOAT: *(float *)p = (float)v; break;
    case K_DOUBLE: *(double *)p = (double)v; break;
    case K_CDOUBLE: *(double complex *)p = (double)v + I * (double)((v * 3) % 7); break;
    case K_BOOL: *(_Bool *)p = v != 0; break;
    case K_2INT: ((pair2int *)p)->v = (int)((r * i + i) % 4), ((pair2int *)p)->i = r; break;
    case K_DOUBLE_INT: ((pairdi *)p)->v = (double)((r * i + 2 * i) % 3), ((pairdi *)p)->i = r; break;
    case K_AFFINE: ((affine *)p)->m = (uint32_t)(2 * r + 1 + i % 5), ((affine *)p)->c = (uint32_t)(r + 7 * i); break;
    }
}

/* combine sets *a = *a op *b for one element (a is the left operand). */
static void combine(void *a, const void *b, enum kind k, enum op o) {
#define ARITH(T)                                                                        \
    do {                                                                                \
        T *x = a;                                                                       \
        const T *y = b;                                                                 \
        switch (o) {                                                                    \
        case O_SUM: case O_USER_SUM: *x = *x + *y; break;                               \
        case O_PROD: *x = *x * *y; break;                                               \
        case O_MAX: *x = *x > *y ? *x : *y; break;                                      \
        case O_MIN: *x = *x < *y ? *x : *y; break;                                      \
        case O_LAND: *x = (*x != 0) && (*y != 0); break;                                \
        case O_LOR: *x = (*x != 0) || (*y != 0); break;                                 \
        case O_LXOR: *x = (*x != 0) != (*y != 0); break;                                \
        default: break;                                                                 \
        }                                                                               \
    } while (0)
#define BITS(T)                                                                         \
    do {                                                                                \
        T *x = a;                                                                       \
        const T *y = b;                                                                 \
        if (o == O_BAND) *x &= *y;                                                      \
        else if (o == O_BOR) *x |= *y;                                                  \
        else if (o == O_BXOR) *x ^= *y;                                                 \
        else ARITH(T);                                                                  \
    } while (0)
    switch (k) {
    case K_INT: BITS(int); break;
    case K_LONG: BITS(long); break;
    case K_UNSIGNED: BITS(unsigned); break;
    case K_SHORT: BITS(short); break;
    case K_UCHAR: BITS(unsigned char); break;
    case K_LLONG: BITS(long long); break;
    case K_INT8: BITS(int8_t); break;
    case K_UINT64: BITS(uint64_t); break;
    case K_FLOAT: ARITH(float); break;
    case K_DOUBLE: ARITH(double); break;
    case K_CDOUBLE: { double complex *x = a; const double complex *y = b; *x = o == O_PROD ? *x * *y : *x + *y; break; }
    case K_BOOL: { _Bool *x = a; const _Bool *y = b;
        if (o == O_LAND) *x = *x && *y; else if (o == O_LOR) *x = *x || *y; else *x = *x != *y; break; }
    case K_2INT: { pair2int *x = a; const pair2int *y = b;
        int better = o == O_MAXLOC ? y->v > x->v : y->v < x->v;
        if (better || (y->v == x->v && y->i < x->i)) *x = *y;
        break; }
    case K_DOUBLE_INT: { pairdi *x = a; const pairdi *y = b;
        int better = o == O_MAXLOC ? y->v > x->v : y->v < x->v;
        if (better || (y->v == x->v && y->i < x->i)) x->v = y->v, x->i = y->i;
        break; }
    case K_AFFINE: { affine *x = a; const affine *y = b; /* x then y */
        affine z = {x->m * y->m, x->c * y->m + y->c}; *x = z; break; }
    }
#undef ARITH
#undef BITS
}

static int same(const void *a, const void *b, enum kind k) {
    if (k == K_DOUBLE_INT) {
        const pairdi *x = a, *y = b;
        return x->v == y->v && x->i == y->i;
    }
    if (k == K_BOOL) return (*(const _Bool *)a != 0) == (*(const _Bool *)b != 0);
    return memcmp(a, b, ksize(k)) == 0;
}

/* expected computes element i of the reduction over the ranks of comm
 * (world ranks in comm order). */
static void expected(void *out, enum kind k, enum op o, const int *members, int p, long i) {
    char tmp[64];
    fill(out, 0, k, o, members[0], i);
    for (int q = 1; q < p; q++) {
        fill(tmp, 0, k, o, members[q], i);
        combine(out, tmp, k, o);
    }
}

/* ---- user-defined ops ---- */

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

static void user_affine(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    affine *a = in, *b = inout;
    for (int i = 0; i < *len; i++) {
        affine z = {a[i].m * b[i].m, a[i].c * b[i].m + b[i].c};
        b[i] = z;
    }
}

static MPI_Op op_user_sum, op_user_affine;

static MPI_Op mpiop(enum op o) {
    switch (o) {
    case O_SUM: return MPI_SUM;
    case O_PROD: return MPI_PROD;
    case O_MAX: return MPI_MAX;
    case O_MIN: return MPI_MIN;
    case O_LAND: return MPI_LAND;
    case O_LOR: return MPI_LOR;
    case O_LXOR: return MPI_LXOR;
    case O_BAND: return MPI_BAND;
    case O_BOR: return MPI_BOR;
    case O_BXOR: return MPI_BXOR;
    case O_MAXLOC: return MPI_MAXLOC;
    case O_MINLOC: return MPI_MINLOC;
    case O_USER_SUM: return op_user_sum;
    case O_USER_AFFINE: return op_user_affine;
    }
    return MPI_OP_NULL;
}

/* The (datatype, op) pairs that matter. */
static const struct { enum kind k; enum op o; } pairs[] = {
    {K_INT, O_SUM}, {K_INT, O_PROD}, {K_INT, O_MAX}, {K_INT, O_MIN}, {K_INT, O_BAND}, {K_INT, O_BXOR},
    {K_INT, O_LAND}, {K_INT, O_LOR}, {K_LONG, O_SUM}, {K_LONG, O_MIN}, {K_UNSIGNED, O_SUM}, {K_UNSIGNED, O_MAX},
    {K_SHORT, O_SUM}, {K_UCHAR, O_BOR}, {K_LLONG, O_SUM}, {K_INT8, O_SUM}, {K_UINT64, O_BXOR},
    {K_FLOAT, O_SUM}, {K_FLOAT, O_MAX}, {K_DOUBLE, O_SUM}, {K_DOUBLE, O_PROD}, {K_DOUBLE, O_MIN},
    {K_CDOUBLE, O_SUM}, {K_BOOL, O_LXOR}, {K_2INT, O_MAXLOC}, {K_2INT, O_MINLOC}, {K_DOUBLE_INT, O_MAXLOC},
    {K_INT, O_USER_SUM}, {K_AFFINE, O_USER_AFFINE},
};
#define NPAIRS (int)(sizeof pairs / sizeof pairs[0])

/* ---- the collectives under test ---- */

struct comm {
    MPI_Comm c;
    const char *name;
    int rank, size;
    int *members; /* world rank of each rank */
    int host;     /* 1: every call goes to the host MPI (intercommunicator) */
};

static void describe(struct comm *c, MPI_Comm comm, const char *name) {
    c->c = comm, c->name = name, c->host = 0;
    MPI_Comm_rank(comm, &c->rank);
    MPI_Comm_size(comm, &c->size);
    c->members = malloc(sizeof(int) * c->size);
    MPI_Allgather(&wrank, 1, MPI_INT, c->members, 1, MPI_INT, comm);
    expect_gocoll++;
}

static void count_call(struct comm *c, enum op o) {
    if (c->host) expect_host++;
    else expect_gocoll++;
    if (o == O_USER_AFFINE) noncommutative++;
}

static void *zalloc(size_t n) { return calloc(n ? n : 1, 1); }

static void test_allreduce(struct comm *c, enum kind k, enum op o, long n, int inplace) {
    size_t es = ksize(k);
    char *in = zalloc(n * es), *out = zalloc(n * es), want[64];
    for (long i = 0; i < n; i++) fill(inplace ? out : in, i, k, o, wrank, i);
    count_call(c, o);
    int rc = MPI_Allreduce(inplace ? MPI_IN_PLACE : in, out, (int)n, ktype(k), mpiop(o), c->c);
    long bad = -1;
    for (long i = 0; i < n && bad < 0; i++) {
        expected(want, k, o, c->members, c->size, i);
        if (!same(out + i * es, want, k)) bad = i;
    }
    CHECK(rc == MPI_SUCCESS && bad < 0, "MPI_Allreduce %s %s %s n=%ld inplace=%d: rc %d, element %ld wrong",
          c->name, kname(k), oname(o), n, inplace, rc, bad);
    free(in), free(out);
}

static void test_reduce_scatter_block(struct comm *c, enum kind k, enum op o, long n, int inplace) {
    size_t es = ksize(k);
    long total = n * c->size;
    char *in = zalloc(total * es), *out = zalloc(total * es), want[64];
    for (long i = 0; i < total; i++) fill(inplace ? out : in, i, k, o, wrank, i);
    count_call(c, o);
    int rc = MPI_Reduce_scatter_block(inplace ? MPI_IN_PLACE : in, out, (int)n, ktype(k), mpiop(o), c->c);
    long bad = -1;
    for (long i = 0; i < n && bad < 0; i++) {
        expected(want, k, o, c->members, c->size, c->rank * n + i);
        if (!same(out + i * es, want, k)) bad = i;
    }
    CHECK(rc == MPI_SUCCESS && bad < 0, "MPI_Reduce_scatter_block %s %s %s n=%ld inplace=%d: rc %d, element %ld wrong",
          c->name, kname(k), oname(o), n, inplace, rc, bad);
    free(in), free(out);
}

static void test_reduce_scatter(struct comm *c, enum kind k, enum op o, long n, int inplace) {
    size_t es = ksize(k);
    int *counts = malloc(sizeof(int) * c->size);
    long total = 0, before = 0;
    for (int q = 0; q < c->size; q++) {
        counts[q] = q % 3 == 1 ? 0 : (int)(n + q); /* irregular, with zeros */
        if (q < c->rank) before += counts[q];
        total += counts[q];
    }
    char *in = zalloc(total * es), *out = zalloc(total * es), want[64];
    for (long i = 0; i < total; i++) fill(inplace ? out : in, i, k, o, wrank, i);
    count_call(c, o);
    int rc = MPI_Reduce_scatter(inplace ? MPI_IN_PLACE : in, out, counts, ktype(k), mpiop(o), c->c);
    long bad = -1;
    for (long i = 0; i < counts[c->rank] && bad < 0; i++) {
        expected(want, k, o, c->members, c->size, before + i);
        if (!same(out + i * es, want, k)) bad = i;
    }
    CHECK(rc == MPI_SUCCESS && bad < 0, "MPI_Reduce_scatter %s %s %s n=%ld inplace=%d: rc %d, element %ld wrong",
          c->name, kname(k), oname(o), n, inplace, rc, bad);
    free(in), free(out), free(counts);
}

static void test_allgather(struct comm *c, enum kind k, long n, int inplace) {
    size_t es = ksize(k);
    char *in = zalloc(n * es), *out = zalloc(n * c->size * es), want[64];
    for (long i = 0; i < n; i++) fill(inplace ? out + c->rank * n * es : in, i, k, O_SUM, wrank, i);
    count_call(c, O_SUM);
    int rc = MPI_Allgather(inplace ? MPI_IN_PLACE : in, (int)n, ktype(k), out, (int)n, ktype(k), c->c);
    long bad = -1;
    for (int q = 0; q < c->size && bad < 0; q++)
        for (long i = 0; i < n && bad < 0; i++) {
            fill(want, 0, k, O_SUM, c->members[q], i);
            if (!same(out + (q * n + i) * es, want, k)) bad = q * n + i;
        }
    CHECK(rc == MPI_SUCCESS && bad < 0, "MPI_Allgather %s %s n=%ld inplace=%d: rc %d, element %ld wrong",
          c->name, kname(k), n, inplace, rc, bad);
    free(in), free(out);
}

#if MPI_VERSION >= 4
/* The MPI-4 large-count forms (MPICH), with ordinary counts. */
static void test_large_count(struct comm *c) {
    long n = c->size + 1;
    double *in = malloc(sizeof(double) * n * c->size), *out = malloc(sizeof(double) * n * c->size);
    MPI_Count *counts = malloc(sizeof(MPI_Count) * c->size);
    for (long i = 0; i < n * c->size; i++) in[i] = wrank + i;
    double sumr = 0;
    for (int q = 0; q < c->size; q++) sumr += c->members[q], counts[q] = n;
    int ok = 1;
    expect_gocoll += 4;
    ok &= MPI_Allreduce_c(in, out, n, MPI_DOUBLE, MPI_SUM, c->c) == MPI_SUCCESS;
    for (long i = 0; i < n; i++) ok &= out[i] == sumr + c->size * (double)i;
    ok &= MPI_Reduce_scatter_block_c(in, out, n, MPI_DOUBLE, MPI_SUM, c->c) == MPI_SUCCESS;
    for (long i = 0; i < n; i++) ok &= out[i] == sumr + c->size * (double)(c->rank * n + i);
    ok &= MPI_Reduce_scatter_c(in, out, counts, MPI_DOUBLE, MPI_SUM, c->c) == MPI_SUCCESS;
    for (long i = 0; i < n; i++) ok &= out[i] == sumr + c->size * (double)(c->rank * n + i);
    ok &= MPI_Allgather_c(in, n, MPI_DOUBLE, out, n, MPI_DOUBLE, c->c) == MPI_SUCCESS;
    for (int q = 0; q < c->size; q++)
        for (long i = 0; i < n; i++) ok &= out[q * n + i] == c->members[q] + i;
    CHECK(ok, "large-count (_c) collectives on %s", c->name);
    free(in), free(out), free(counts);
}
#endif

static void test_comm(struct comm *c) {
    long ns[] = {0, 1, c->size - 1, c->size + 1, 1003};
    for (int j = 0; j < 5; j++) {
        if (j == 2 && c->size - 1 <= 1) continue; /* same as an earlier count */
        if (quick && (j == 0 || j == 2)) continue;
        for (int inplace = 0; inplace < 2; inplace++) {
            for (int pi = 0; pi < NPAIRS; pi += quick ? 5 : 1) {
                test_allreduce(c, pairs[pi].k, pairs[pi].o, ns[j], inplace);
                test_reduce_scatter_block(c, pairs[pi].k, pairs[pi].o, ns[j], inplace);
                test_reduce_scatter(c, pairs[pi].k, pairs[pi].o, ns[j], inplace);
            }
            for (enum kind k = K_INT; k <= K_DOUBLE_INT; k += 3) test_allgather(c, k, ns[j], inplace);
        }
    }
#if MPI_VERSION >= 4
    test_large_count(c);
#endif
}

/* Sums elements of two ints (predefined ops take predefined types only). */
static void user_sum2(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    for (int i = 0; i < 2 * *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

/* A derived datatype goes to the host, and the answer is right. */
static void test_derived(void) {
    MPI_Datatype two;
    MPI_Op sum2;
    MPI_Type_contiguous(2, MPI_INT, &two);
    MPI_Type_commit(&two);
    MPI_Op_create(user_sum2, 1, &sum2);
    int in[6], out[6];
    for (int i = 0; i < 6; i++) in[i] = wrank + i;
    expect_host += 2;
    int rc = MPI_Allreduce(in, out, 3, two, sum2, MPI_COMM_WORLD);
    int ok = rc == MPI_SUCCESS;
    for (int i = 0; i < 6; i++) ok &= out[i] == wsize * (wsize - 1) / 2 + wsize * i;
    int *all = malloc(sizeof(int) * 6 * wsize);
    rc = MPI_Allgather(in, 3, two, all, 6, MPI_INT, MPI_COMM_WORLD);
    ok &= rc == MPI_SUCCESS;
    for (int q = 0; q < wsize; q++)
        for (int i = 0; i < 6; i++) ok &= all[q * 6 + i] == q + i;
    CHECK(ok, "derived datatype (host MPI)");
    free(all);
    MPI_Op_free(&sum2);
    MPI_Type_free(&two);
}

/* An intercommunicator goes to the host: each group gets the other's sum. */
static void test_inter(void) {
    if (wsize < 2) return;
    MPI_Comm half, inter;
    int color = wrank % 2;
    MPI_Comm_split(MPI_COMM_WORLD, color, wrank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - color, 99, &inter);
    int in[3] = {wrank, 1, 2 * wrank}, out[3];
    expect_host += 2;
    int rc = MPI_Allreduce(in, out, 3, MPI_INT, MPI_SUM, inter);
    int other = 0, nother = 0;
    for (int q = 0; q < wsize; q++)
        if (q % 2 != color) other += q, nother++;
    int ok = rc == MPI_SUCCESS && out[0] == other && out[1] == nother && out[2] == 2 * other;
    int rsize;
    MPI_Comm_remote_size(inter, &rsize);
    int *all = malloc(sizeof(int) * rsize);
    rc = MPI_Allgather(&wrank, 1, MPI_INT, all, 1, MPI_INT, inter);
    ok &= rc == MPI_SUCCESS;
    for (int q = 0; q < rsize; q++) ok &= all[q] == 2 * q + (1 - color);
    CHECK(ok, "intercommunicator (host MPI)");
    free(all);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
}

/* User point-to-point traffic with wildcards, pending across collectives,
 * is never disturbed by gocoll's messages. */
static void test_p2p_interleaved(void) {
    if (wsize < 2) return;
    int right = (wrank + 1) % wsize, left = (wrank + wsize - 1) % wsize;
    int early[2] = {-1, -1}, late[2] = {-1, -1}, msg1[2] = {wrank, 1000 + wrank}, msg2[2] = {wrank, 2000 + wrank};
    MPI_Request rq[2];
    MPI_Status st[2];
    /* A wildcard receive posted before the collectives... */
    MPI_Irecv(early, 2, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rq[0]);
    /* ...and a message sent before them, received after. */
    MPI_Isend(msg1, 2, MPI_INT, right, 17, MPI_COMM_WORLD, &rq[1]);
    double x[5000], y[5000];
    for (int i = 0; i < 5000; i++) x[i] = i;
    int ok = 1;
    for (int it = 0; it < 4; it++) {
        for (long n = 1; n <= 5000; n *= 10) {
            expect_gocoll += 2;
            ok &= MPI_Allreduce(x, y, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS;
            for (long i = 0; i < n; i++) ok &= y[i] == wsize * x[i];
            ok &= MPI_Allgather(x, (int)(n < 1000 ? n : 1000), MPI_DOUBLE, y, (int)(n < 1000 ? n : 1000), MPI_DOUBLE,
                                MPI_COMM_WORLD) == MPI_SUCCESS;
        }
    }
    MPI_Waitall(2, rq, st);
    ok &= early[0] == left && early[1] == 1000 + left && st[0].MPI_SOURCE == left && st[0].MPI_TAG == 17;
    /* Now the other way: collectives while a message waits unexpected. */
    MPI_Send(msg2, 2, MPI_INT, right, 18, MPI_COMM_WORLD);
    for (int it = 0; it < 3; it++) {
        expect_gocoll++;
        ok &= MPI_Allreduce(x, y, 1000, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD) == MPI_SUCCESS;
    }
    MPI_Recv(late, 2, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st[0]);
    ok &= late[0] == left && late[1] == 2000 + left && st[0].MPI_SOURCE == left && st[0].MPI_TAG == 18;
    CHECK(ok, "point-to-point with MPI_ANY_SOURCE/MPI_ANY_TAG interleaved with collectives");
}

/* Free and recreate communicators: gocoll frees its duplicate each time. */
static void test_churn(int n) {
    int ok = 1;
    for (int it = 0; it < n; it++) {
        MPI_Comm d;
        if (it % 2) MPI_Comm_dup(MPI_COMM_WORLD, &d);
        else MPI_Comm_split(MPI_COMM_WORLD, 0, -wrank, &d);
        int x = wrank + it, y = -1;
        expect_gocoll++;
        ok &= MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, d) == MPI_SUCCESS;
        ok &= y == wsize * (wsize - 1) / 2 + wsize * it;
        MPI_Comm_free(&d);
    }
    CHECK(ok, "%d communicators freed and recreated", n);
}

/* GOCOLL_PRELOAD_FAULT=3: a panic in Go becomes an MPI error. */
static void test_fault(void) {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int x[64], y[64], cls = -1;
    for (int i = 0; i < 64; i++) x[i] = i;
    int rc[5];
    for (int i = 0; i < 5; i++) {
        expect_gocoll++;
        rc[i] = MPI_Allreduce(x, y, 64, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Error_class(rc[2], &cls);
    /* The fault breaks the call on every rank alike (all panic at their
     * third call): later calls work again. */
    CHECK(rc[0] == 0 && rc[1] == 0 && cls == MPI_ERR_INTERN && rc[3] == 0 && rc[4] == 0,
          "a panic in gocoll returns MPI_ERR_INTERN (%d %d %d(class %d) %d %d)", rc[0], rc[1], rc[2], cls, rc[3], rc[4]);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

struct args { int churn; };

static void *body(void *p) {
    struct args *a = p;
    struct comm world, split, dup;
    describe(&world, MPI_COMM_WORLD, "world");
    test_comm(&world);
    /* Reordered ranks: two halves, each in reverse order. */
    MPI_Comm s, d;
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, -wrank, &s);
    describe(&split, s, "split");
    test_comm(&split);
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    describe(&dup, d, "dup");
    test_comm(&dup);
    test_derived();
    test_inter();
    test_p2p_interleaved();
    test_churn(a->churn);
    MPI_Comm_free(&s);
    MPI_Comm_free(&d);
    free(world.members), free(split.members), free(dup.members);
    return NULL;
}

int main(int argc, char **argv) {
    struct args a = {10};
    int threads = 0, fault = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-churn") && i + 1 < argc) a.churn = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-threads")) threads = 1;
        else if (!strcmp(argv[i], "-fault")) fault = 1;
        else if (!strcmp(argv[i], "-quick")) quick = 1;
    }
    int want = threads ? MPI_THREAD_SERIALIZED : MPI_THREAD_FUNNELED, provided;
    MPI_Init_thread(&argc, &argv, want, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    CHECK(provided >= want, "thread level %d provided, %d wanted", provided, want);
    MPI_Op_create(user_sum, 1, &op_user_sum);
    MPI_Op_create(user_affine, 0, &op_user_affine);
    if (fault) {
        test_fault();
    } else if (threads) {
        /* MPI_THREAD_SERIALIZED: another thread makes the calls, while
         * this one waits. */
        pthread_t t;
        pthread_create(&t, NULL, body, &a);
        pthread_join(t, NULL);
    } else {
        body(&a);
    }
    MPI_Op_free(&op_user_sum);
    MPI_Op_free(&op_user_affine);
    long mine[5] = {passed, failed, expect_gocoll, expect_host, noncommutative}, all[5];
    MPI_Reduce(mine, all, 5, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (wrank == 0) {
        printf("expect gocoll=%ld host=%ld noncommutative=%ld\n", all[2], all[3], all[4]);
        printf("%ld passed, %ld failed\n", all[0], all[1]);
    }
    MPI_Finalize();
    return failed != 0; /* each rank's own verdict, whatever the sum says */
}
