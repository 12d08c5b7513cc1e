/*
 * collbench: a latency benchmark of MPI_Allreduce, MPI_Reduce_scatter,
 * MPI_Reduce_scatter_block and MPI_Allgather, written once and built
 * against any MPI (gocoll's mpicc, mpicc.openmpi, mpicc.mpich), so that
 * the same source measures every library. It measures the way the MPI
 * micro-benchmark suite users run first does:
 *
 *   - an MPI_Barrier before every call, warm-up and timed alike, so that
 *     every call starts with the ranks as the barrier left them; only the
 *     call is timed;
 *   - 1000 timed calls (after 200 warm-up calls) for sizes up to 8 KiB,
 *     100 (after 10) above;
 *   - each rank's mean time per call, then the average, minimum and
 *     maximum of those over the ranks;
 *   - MPI_Allgather of MPI_CHAR, the size being what each rank
 *     contributes; the reductions (MPI_SUM) of MPI_FLOAT, the size being
 *     the whole vector; MPI_Reduce_scatter with a recvcounts array that
 *     splits the vector as evenly as it can, the first (n mod np) ranks
 *     getting one element more.
 *
 *   collbench [-c allreduce,reduce_scatter,reduce_scatter_block,allgather]
 *             [-m MIN[:MAX]] [-d MPI_TYPE] [-total] [-i ITERS] [-il ITERS]
 *             [-w WARMUP] [-wl WARMUP] [-check]
 *
 * Sizes are bytes, doubling from MIN to MAX (default 4 to 16 MiB, all
 * four collectives); a size is rounded down to whole elements (and, for
 * MPI_Reduce_scatter_block and -total MPI_Allgather, to a multiple of np
 * of them), and the line says the size measured; a size with no element
 * to send is skipped with a comment.
 * -d sets the datatype of every collective (the reductions need one MPI_SUM
 * is defined on); -total makes MPI_Allgather's size the whole output. -i
 * and -w are the timed and warm-up calls up to 8 KiB, -il and -wl above.
 *
 * Rank 0 prints comment lines (`# ...`) that say how it measured: once,
 * the pattern; per collective, the call, datatype, and whether the size
 * is per rank or total. Then one line per size:
 * `collective bytes avg_us min_us max_us`. With -check, every rank
 * verifies one more call at every size (values that make integer and
 * floating-point sums exact, every element and a guard after the
 * received data), rank 0 prints each MPI_Reduce_scatter's recvcounts
 * (`# reduce_scatter BYTES recvcounts C0 C1 ...`) and, at the end,
 * `check: PASS` or `check: FAIL` (and exits non-zero, as does a rank that
 * found a wrong element).
 */
#include <mpi.h>
#include <complex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sizes above LARGE bytes get fewer calls. 8 KiB is where the suite users
 * run first switches to its large-message counts, so a number here
 * averages as many calls as theirs at every size; above it a call costs
 * from microseconds to milliseconds, and 100 calls give a stable mean
 * without spending minutes on one size. */
#define LARGE 8192
#define GUARD 64 /* bytes after every receive buffer that no call may write */

static int rank, size;

/* The element types collbench can fill and check, one per C type. */
#define REAL_KINDS(X)                                                            \
    X(K_CHAR, char) X(K_SCHAR, signed char) X(K_UCHAR, unsigned char)            \
    X(K_SHORT, short) X(K_USHORT, unsigned short) X(K_INT, int)                  \
    X(K_UINT, unsigned) X(K_LONG, long) X(K_ULONG, unsigned long)                \
    X(K_LLONG, long long) X(K_ULLONG, unsigned long long) X(K_FLOAT, float)      \
    X(K_DOUBLE, double) X(K_LDOUBLE, long double) X(K_I8, int8_t)                \
    X(K_I16, int16_t) X(K_I32, int32_t) X(K_I64, int64_t) X(K_U8, uint8_t)       \
    X(K_U16, uint16_t) X(K_U32, uint32_t) X(K_U64, uint64_t) X(K_BOOL, _Bool)
#define COMPLEX_KINDS(X) X(K_CFLOAT, float _Complex) X(K_CDOUBLE, double _Complex)
#define ENUM(K, T) K,
enum kind { REAL_KINDS(ENUM) COMPLEX_KINDS(ENUM) };

struct dtype {
    const char *name;
    MPI_Datatype dt;
    enum kind kind;
    int bytes; /* sizeof the C type */
    int sum;   /* MPI_SUM is defined on it */
};

static struct dtype types[32];
static int ntypes;

static void add(const char *name, MPI_Datatype dt, enum kind k, int bytes, int sum) {
    types[ntypes++] = (struct dtype){name, dt, k, bytes, sum};
}

/* Built at run time: some MPIs' handles are not constant expressions. */
static void init_types(void) {
#define ADD(name, K, T, sum) add(#name, name, K, sizeof(T), sum)
    ADD(MPI_CHAR, K_CHAR, char, 0);
    ADD(MPI_SIGNED_CHAR, K_SCHAR, signed char, 1);
    ADD(MPI_UNSIGNED_CHAR, K_UCHAR, unsigned char, 1);
    ADD(MPI_BYTE, K_UCHAR, unsigned char, 0);
    ADD(MPI_SHORT, K_SHORT, short, 1);
    ADD(MPI_UNSIGNED_SHORT, K_USHORT, unsigned short, 1);
    ADD(MPI_INT, K_INT, int, 1);
    ADD(MPI_UNSIGNED, K_UINT, unsigned, 1);
    ADD(MPI_LONG, K_LONG, long, 1);
    ADD(MPI_UNSIGNED_LONG, K_ULONG, unsigned long, 1);
    ADD(MPI_LONG_LONG, K_LLONG, long long, 1);
    ADD(MPI_UNSIGNED_LONG_LONG, K_ULLONG, unsigned long long, 1);
    ADD(MPI_FLOAT, K_FLOAT, float, 1);
    ADD(MPI_DOUBLE, K_DOUBLE, double, 1);
    ADD(MPI_LONG_DOUBLE, K_LDOUBLE, long double, 1);
    ADD(MPI_INT8_T, K_I8, int8_t, 1);
    ADD(MPI_INT16_T, K_I16, int16_t, 1);
    ADD(MPI_INT32_T, K_I32, int32_t, 1);
    ADD(MPI_INT64_T, K_I64, int64_t, 1);
    ADD(MPI_UINT8_T, K_U8, uint8_t, 1);
    ADD(MPI_UINT16_T, K_U16, uint16_t, 1);
    ADD(MPI_UINT32_T, K_U32, uint32_t, 1);
    ADD(MPI_UINT64_T, K_U64, uint64_t, 1);
    ADD(MPI_C_BOOL, K_BOOL, _Bool, 0);
    ADD(MPI_C_FLOAT_COMPLEX, K_CFLOAT, float _Complex, 1);
    ADD(MPI_C_DOUBLE_COMPLEX, K_CDOUBLE, double _Complex, 1);
#undef ADD
}

static const struct dtype *lookup(const char *name) {
    for (int i = 0; i < ntypes; i++)
        if (!strcmp(types[i].name, name)) return &types[i];
    if (!strcmp(name, "MPI_LONG_LONG_INT")) return lookup("MPI_LONG_LONG");
    return NULL;
}

/* put stores v as element i of buf; same compares element i with v.
 * Booleans hold v's low bit, complex numbers v + v i. */
static void put(void *buf, long i, enum kind k, long long v) {
    if (k == K_BOOL) v &= 1;
    switch (k) {
#define PUT(K, T) case K: ((T *)buf)[i] = (T)v; break;
#define CPUT(K, T) case K: ((T *)buf)[i] = (T)v + (T)v * I; break;
        REAL_KINDS(PUT)
        COMPLEX_KINDS(CPUT)
#undef PUT
#undef CPUT
    }
}

static int same(const void *buf, long i, enum kind k, long long v) {
    if (k == K_BOOL) v &= 1;
    switch (k) {
#define SAME(K, T) case K: return ((const T *)buf)[i] == (T)v;
#define CSAME(K, T) case K: return ((const T *)buf)[i] == (T)v + (T)v * I;
        REAL_KINDS(SAME)
        COMPLEX_KINDS(CSAME)
#undef SAME
#undef CSAME
    }
    return 0;
}

/* Rank r's element i: for the reductions small, so that sums are exact in
 * every type; for MPI_Allgather different on every rank at every index. */
static long long xr(int r, long i) { return (r + i) % 5; }
static long long xg(int r, long i) { return (r * 37L + i) % 97 + 1; }

enum coll { ALLREDUCE, REDUCE_SCATTER, REDUCE_SCATTER_BLOCK, ALLGATHER };
static const char *coll_names[] = {"allreduce", "reduce_scatter", "reduce_scatter_block", "allgather"};
static const char *coll_calls[] = {"MPI_Allreduce", "MPI_Reduce_scatter", "MPI_Reduce_scatter_block", "MPI_Allgather"};

/* split sets counts to n elements split over the ranks as evenly as can
 * be: n / size each, and one more for each of the first n % size ranks. */
static void split(long n, int *counts) {
    for (int i = 0; i < size; i++) counts[i] = (int)(n / size + (i < n % size));
}

/* shape is one size of one collective: the elements each rank sends
 * (nin), receives (nout), the count argument (cnt), where its received
 * block starts in the vector (displ), and the bytes the line reports. 0
 * when the size holds no element to send. */
struct shape { long nin, nout, cnt, displ, bytes; };

static int shape(enum coll c, const struct dtype *t, long bytes, int total, int *counts, struct shape *s) {
    long e = bytes / t->bytes;
    memset(s, 0, sizeof *s);
    switch (c) {
    case ALLREDUCE:
        s->nin = s->nout = s->cnt = e;
        s->bytes = e * t->bytes;
        break;
    case REDUCE_SCATTER:
        split(e, counts);
        s->nin = e;
        s->nout = counts[rank];
        for (int i = 0; i < rank; i++) s->displ += counts[i];
        s->bytes = e * t->bytes;
        break;
    case REDUCE_SCATTER_BLOCK:
        s->cnt = s->nout = e / size;
        s->nin = s->cnt * size;
        s->displ = rank * s->cnt;
        s->bytes = s->nin * t->bytes;
        break;
    case ALLGATHER:
        s->nin = s->cnt = total ? e / size : e;
        s->nout = s->cnt * size;
        s->bytes = (total ? s->nout : s->cnt) * t->bytes;
        break;
    }
    return c == ALLREDUCE || c == REDUCE_SCATTER ? e > 0 : s->cnt > 0;
}

static void call(enum coll c, const struct dtype *t, const struct shape *s, const int *counts, void *in, void *out) {
    switch (c) {
    case ALLREDUCE:
        MPI_Allreduce(in, out, (int)s->cnt, t->dt, MPI_SUM, MPI_COMM_WORLD);
        break;
    case REDUCE_SCATTER:
        MPI_Reduce_scatter(in, out, counts, t->dt, MPI_SUM, MPI_COMM_WORLD);
        break;
    case REDUCE_SCATTER_BLOCK:
        MPI_Reduce_scatter_block(in, out, (int)s->cnt, t->dt, MPI_SUM, MPI_COMM_WORLD);
        break;
    case ALLGATHER:
        MPI_Allgather(in, (int)s->cnt, t->dt, out, (int)s->cnt, t->dt, MPI_COMM_WORLD);
        break;
    }
}

/* verify runs one more call into a poisoned buffer and returns the number
 * of wrong elements, a written guard counting as one. */
static long verify(enum coll c, const struct dtype *t, const struct shape *s, const int *counts, void *in, unsigned char *out) {
    memset(out, 0xa5, s->nout * t->bytes + GUARD);
    call(c, t, s, counts, in, out);
    long bad = 0;
    for (long j = 0; j < s->nout; j++) {
        long long want = 0;
        if (c == ALLGATHER)
            want = xg((int)(j / s->cnt), j % s->cnt);
        else
            for (int q = 0; q < size; q++) want += xr(q, s->displ + j);
        if (!same(out, j, t->kind, want)) bad++;
    }
    for (long b = 0; b < GUARD; b++)
        if (out[s->nout * t->bytes + b] != 0xa5) { bad++; break; }
    return bad;
}

struct opts {
    int iters, iters_large, warmup, warmup_large, total, check;
};

/* run times one collective at one size: the per-call seconds on this
 * rank, and adds the wrong elements of -check to *bad. */
static double run(enum coll c, const struct dtype *t, const struct shape *s, const int *counts, const struct opts *o, long *bad) {
    int large = s->bytes > LARGE;
    int iters = large ? o->iters_large : o->iters, warmup = large ? o->warmup_large : o->warmup;
    unsigned char *in = malloc(s->nin * t->bytes + 1), *out = malloc(s->nout * t->bytes + GUARD);
    for (long i = 0; i < s->nin; i++) put(in, i, t->kind, c == ALLGATHER ? xg(rank, i) : xr(rank, i));
    memset(out, 0, s->nout * t->bytes + GUARD);
    double sum = 0;
    for (int it = 0; it < warmup + iters; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        call(c, t, s, counts, in, out);
        double t1 = MPI_Wtime();
        if (it >= warmup) sum += t1 - t0;
    }
    if (o->check) *bad += verify(c, t, s, counts, in, out);
    free(in);
    free(out);
    return iters > 0 ? sum / iters : 0;
}

static void usage(void) {
    if (rank == 0)
        fprintf(stderr, "usage: collbench [-c allreduce,reduce_scatter,reduce_scatter_block,allgather] [-m MIN[:MAX]]\n"
                        "                 [-d MPI_TYPE] [-total] [-i ITERS] [-il ITERS] [-w WARMUP] [-wl WARMUP] [-check]\n");
}

/* fail prints msg (rank 0), finalizes and exits 2: every rank sees the
 * same arguments, so every rank gets here. */
static void fail(const char *msg, const char *arg) {
    if (rank == 0) fprintf(stderr, "collbench: %s%s\n", msg, arg);
    MPI_Finalize();
    exit(2);
}

int main(int argc, char **argv) {
    const char *colls = "allreduce,reduce_scatter,reduce_scatter_block,allgather", *dname = NULL;
    long lo = 4, hi = 16L << 20;
    struct opts o = {1000, 100, 200, 10, 0, 0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    init_types();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-total")) o.total = 1;
        else if (!strcmp(a, "-check")) o.check = 1;
        else if (!v) { usage(); fail("missing value after ", a); }
        else if (!strcmp(a, "-c")) colls = argv[++i];
        else if (!strcmp(a, "-d")) dname = argv[++i];
        else if (!strcmp(a, "-m")) {
            int k = sscanf(argv[++i], "%ld:%ld", &lo, &hi);
            if (k == 1) hi = lo;
            if (k < 1 || lo < 1 || hi < lo) fail("bad -m (want MIN[:MAX] bytes, 1 <= MIN <= MAX): ", v);
        } else if (!strcmp(a, "-i")) o.iters = atoi(argv[++i]);
        else if (!strcmp(a, "-il")) o.iters_large = atoi(argv[++i]);
        else if (!strcmp(a, "-w")) o.warmup = atoi(argv[++i]);
        else if (!strcmp(a, "-wl")) o.warmup_large = atoi(argv[++i]);
        else { usage(); fail("unknown argument ", a); }
    }
    if (o.iters < 1 || o.iters_large < 1 || o.warmup < 0 || o.warmup_large < 0)
        fail("want -i, -il >= 1 and -w, -wl >= 0", "");
    const struct dtype *dt = NULL;
    if (dname && !(dt = lookup(dname))) fail("unknown or unsupported datatype ", dname);
    for (int i = 0; i < ntypes; i++) {
        int n;
        MPI_Type_size(types[i].dt, &n);
        if (n != types[i].bytes) fail("MPI_Type_size disagrees with the C type's size: ", types[i].name);
    }

    enum coll list[16];
    int nlist = 0;
    char *names = strdup(colls);
    for (char *name = strtok(names, ","); name; name = strtok(NULL, ",")) {
        int c = 0;
        while (c < 4 && strcmp(name, coll_names[c])) c++;
        if (c == 4) fail("unknown collective (allreduce, reduce_scatter, reduce_scatter_block, allgather): ", name);
        if (nlist == 16) fail("too many collectives in -c ", colls);
        list[nlist++] = (enum coll)c;
        const struct dtype *t = dt ? dt : lookup(c == ALLGATHER ? "MPI_CHAR" : "MPI_FLOAT");
        if (c != ALLGATHER && !t->sum) fail("MPI_SUM is not defined on ", t->name);
    }
    free(names);

    if (rank == 0) {
        printf("# collbench: MPI_Barrier before every call, only the call timed; %d calls (after %d warm-up) up to %d bytes, "
               "%d (after %d) above; time per call: each rank's mean, then avg, min and max over %d ranks\n",
               o.iters, o.warmup, LARGE, o.iters_large, o.warmup_large, size);
        printf("# collective bytes avg_us min_us max_us\n");
    }
    int *counts = malloc(size * sizeof *counts);
    long bad = 0;
    for (int k = 0; k < nlist; k++) {
        enum coll c = list[k];
        const struct dtype *t = dt ? dt : lookup(c == ALLGATHER ? "MPI_CHAR" : "MPI_FLOAT");
        if (rank == 0) {
            printf("# %s: %s, %s, ", coll_names[c], coll_calls[c], t->name);
            if (c == ALLGATHER && !o.total)
                printf("size per-rank (bytes each rank contributes; the result is np times larger)\n");
            else if (c == ALLGATHER)
                printf("size total (bytes of the whole result; each rank contributes 1/np of it)\n");
            else if (c == REDUCE_SCATTER)
                printf("MPI_SUM, size total (bytes of the whole vector; recvcounts split it as evenly as can be, "
                       "the first n %% np ranks one element more)\n");
            else if (c == REDUCE_SCATTER_BLOCK)
                printf("MPI_SUM, size total (bytes of the whole vector: np x recvcount elements)\n");
            else
                printf("MPI_SUM, size total (bytes of the whole vector)\n");
        }
        for (long bytes = lo; bytes <= hi; bytes *= 2) {
            struct shape s;
            if (!shape(c, t, bytes, o.total, counts, &s)) {
                if (rank == 0) printf("# %s %ld: skipped, no whole %s for every rank\n", coll_names[c], bytes, t->name);
                continue;
            }
            if (rank == 0 && o.check && c == REDUCE_SCATTER) {
                printf("# reduce_scatter %ld recvcounts", s.bytes);
                for (int i = 0; i < size; i++) printf(" %d", counts[i]);
                printf("\n");
            }
            double tm = run(c, t, &s, counts, &o, &bad), sum, mn, mx;
            MPI_Reduce(&tm, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            MPI_Reduce(&tm, &mn, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
            MPI_Reduce(&tm, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            if (rank == 0) printf("%s %ld %.2f %.2f %.2f\n", coll_names[c], s.bytes, 1e6 * sum / size, 1e6 * mn, 1e6 * mx);
            fflush(stdout);
        }
    }
    long allbad = 0;
    MPI_Allreduce(&bad, &allbad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (o.check && rank == 0) printf("check: %s\n", allbad ? "FAIL" : "PASS");
    if (o.check && bad) fprintf(stderr, "collbench: rank %d: %ld wrong elements\n", rank, bad);
    free(counts);
    MPI_Finalize();
    return allbad != 0 || bad != 0; /* a rank's own failure, whatever the sum says */
}
