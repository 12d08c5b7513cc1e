/*
 * fastpath: small collectives of every type and op the C fast path takes
 * (fast.c, on the shared-memory engine's C half), in place and not, at
 * sizes on both sides of its limit, mixed with larger calls that go
 * through Go, each checked against a fold of every rank's input computed
 * here; MPI_Reduce_scatter with counts (uneven, zero) and MPI_Allgather of
 * one- and two-byte types also against the same call through Go (a
 * contiguous datatype of one element, which the fast path leaves to Go),
 * byte for byte, and MPI_Bcast from every root. gocoll's path counters
 * (gocoll_test_counter) say where each call ran: small calls on the fast
 * path without entering Go, wherever the fast path is on (more than one
 * rank, the collective's algorithm auto or shm), and in Go where it is off
 * or must decline (large, a user op); every call counted exactly once.
 * Prints `N passed, N failed`.
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "gocoll_counters.h"

#include "check.h"

/* value returns rank r's element i as a double; each type converts it. */
static double value(int r, long i, int op) {
    if (op == 1) return ((r + i) % 3) - 1 ? 2.0 : -1.0;        /* PROD: +-1, 2: exact */
    if (op >= 2 && (i % 17) == 3) return (r % 2) ? -0.0 : 0.0; /* MAX/MIN: signed zeros */
    return (double)((r * 37 + i * 11) % 23) - 11;              /* SUM/MAX/MIN: small ints */
}

static const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN};
static const char *opnames[] = {"SUM", "PROD", "MAX", "MIN"};

#define FOLD(T, U, EXPR)                                                          \
    for (long i = 0; i < n; i++) {                                                \
        T acc = (T)value(0, i, o);                                                \
        for (int r = 1; r < size; r++) {                                          \
            T x = acc, y = (T)value(r, i, o);                                     \
            (void)sizeof(U);                                                      \
            acc = EXPR;                                                           \
        }                                                                         \
        ((T *)want)[i] = acc;                                                     \
    }

static double gmax(double a, double b) {
    if (isnan(a) || isnan(b)) return NAN;
    if (a > b) return a;
    if (b > a) return b;
    return signbit(a) && signbit(b) ? a : (signbit(a) ? b : a);
}
static double gmin(double a, double b) {
    if (isnan(a) || isnan(b)) return NAN;
    if (a < b) return a;
    if (b < a) return b;
    return signbit(a) ? a : b;
}

/* expect computes the fold of all ranks' inputs for type kind k. */
static void expect(int k, int o, long n, void *want) {
    switch (k) {
    case 0: /* int32 */
        if (o == 0) { FOLD(int32_t, uint32_t, (int32_t)((uint32_t)x + (uint32_t)y)) }
        else if (o == 1) { FOLD(int32_t, uint32_t, (int32_t)((uint32_t)x * (uint32_t)y)) }
        else if (o == 2) { FOLD(int32_t, uint32_t, x > y ? x : y) }
        else { FOLD(int32_t, uint32_t, x < y ? x : y) }
        break;
    case 1: /* uint64, values offset by 2^63 so that signed compares would be wrong */
        for (long i = 0; i < n; i++) {
            uint64_t acc = (uint64_t)(int64_t)value(0, i, o) + (o >= 2 ? (1ull << 63) : 0);
            for (int r = 1; r < size; r++) {
                uint64_t y = (uint64_t)(int64_t)value(r, i, o) + (o >= 2 ? (1ull << 63) : 0);
                acc = o == 0 ? acc + y : o == 1 ? acc * y : o == 2 ? (acc > y ? acc : y) : (acc < y ? acc : y);
            }
            ((uint64_t *)want)[i] = acc;
        }
        break;
    case 2: /* float */
        for (long i = 0; i < n; i++) {
            float acc = (float)value(0, i, o);
            for (int r = 1; r < size; r++) {
                float y = (float)value(r, i, o);
                acc = o == 0 ? acc + y : o == 1 ? acc * y : o == 2 ? (float)gmax(acc, y) : (float)gmin(acc, y);
            }
            ((float *)want)[i] = acc;
        }
        break;
    case 3: /* double */
        for (long i = 0; i < n; i++) {
            double acc = value(0, i, o);
            for (int r = 1; r < size; r++) {
                double y = value(r, i, o);
                acc = o == 0 ? acc + y : o == 1 ? acc * y : o == 2 ? gmax(acc, y) : gmin(acc, y);
            }
            ((double *)want)[i] = acc;
        }
        break;
    }
}

static void fill(int k, int o, long n, void *buf) {
    for (long i = 0; i < n; i++) {
        double v = value(rank, i, o);
        switch (k) {
        case 0: ((int32_t *)buf)[i] = (int32_t)v; break;
        case 1: ((uint64_t *)buf)[i] = (uint64_t)(int64_t)v + (o >= 2 ? (1ull << 63) : 0); break;
        case 2: ((float *)buf)[i] = (float)v; break;
        case 3: ((double *)buf)[i] = v; break;
        }
    }
}

/* counter reads one of gocoll's path counters, "<call>.<counter>". */
static long long counter(const char *call, const char *what) {
    char key[96];
    snprintf(key, sizeof key, "%s.%s", call, what);
    return gocoll_test_counter(key);
}

/* fast_on says whether the fast path takes small calls of a collective
 * whose algorithm variable is var (NULL: MPI_Barrier): with more than one
 * rank (a shared segment), unless another algorithm than shm is forced. */
static int fast_on(const char *var) {
    if (size < 2) return 0;
    const char *v = var ? getenv(var) : NULL;
    return !v || !*v || !strcasecmp(v, "auto") || !strcasecmp(v, "shm");
}

/* expect_path checks that the calls of call since the counts fast0 and
 * go0 all ran on one path: n calls on the fast path and none in Go, or
 * n in Go and none on the fast path. */
static void expect_path(const char *call, const char *what, long long fast0, long long go0, int n, int fast) {
    long long df = counter(call, "fast") - fast0, dg = counter(call, "go") - go0;
    if (fast)
        CHECK(df == n && dg == 0, "%s: %d small calls: fast path %lld, Go %lld; want all on the fast path, none in Go", what, n, df, dg);
    else
        CHECK(df == 0 && dg == n, "%s: %d calls: fast path %lld, Go %lld; want all in Go", what, n, df, dg);
}

/* viago returns a datatype of one element of t that the fast path leaves
 * to Go (it knows predefined handles only). */
static MPI_Datatype viago(MPI_Datatype t) {
    MPI_Datatype d;
    MPI_Type_contiguous(1, t, &d);
    MPI_Type_commit(&d);
    return d;
}

/* newcalls: MPI_Reduce_scatter with counts, MPI_Bcast from every root,
 * MPI_Allgather of MPI_CHAR, MPI_SHORT and MPI_BYTE, each against the
 * same call through Go and a fold computed here. */
static void newcalls(void) {
    /* reduce_scatter: uneven counts with zeros, all on one rank, equal */
    int shapes = 4;
    for (int sh = 0; sh < shapes; sh++) {
        int *cnts = malloc(size * sizeof(int)), total = 0;
        for (int q = 0; q < size; q++) {
            cnts[q] = sh == 0 ? (q * 5 + 1) % 4 : sh == 1 ? (q == size - 1 ? 9 : 0) : sh == 2 ? 3 : 1 + (q % 2) * (q + 6);
            total += cnts[q];
        }
        const MPI_Datatype rtypes[] = {MPI_INT, MPI_FLOAT, MPI_DOUBLE, MPI_SHORT, MPI_UNSIGNED_CHAR};
        const int rsizes[] = {4, 4, 8, 2, 1};
        for (int t = 0; t < 5; t++)
            for (int o = 0; o < 4; o++) {
                if (total == 0) continue;
                char *in = malloc(total * 8), *out = malloc(total * 8 + 8), *viaout = malloc(total * 8 + 8);
                for (long i = 0; i < total; i++) {
                    double v = value(rank, i, o);
                    switch (t) {
                    case 0: ((int *)in)[i] = (int)v; break;
                    case 1: ((float *)in)[i] = (float)v; break;
                    case 2: ((double *)in)[i] = v; break;
                    case 3: ((short *)in)[i] = (short)(v * 300); break;
                    case 4: ((unsigned char *)in)[i] = (unsigned char)(int)(v * 7); break;
                    }
                }
                long mine = (long)cnts[rank] * rsizes[t];
                memset(out, 0x5a, mine + 8);
                memset(viaout, 0x5a, mine + 8);
                MPI_Datatype d = viago(rtypes[t]);
                MPI_Reduce_scatter(in, out, cnts, rtypes[t], ops[o], MPI_COMM_WORLD);
                MPI_Reduce_scatter(in, viaout, cnts, d, ops[o], MPI_COMM_WORLD);
                CHECK(!memcmp(out, viaout, mine + 8), "reduce_scatter shape %d type %d %s: differs from Go's", sh, t, opnames[o]);
                if (t == 0) {
                    int at = 0, ok = 1;
                    for (int q = 0; q < rank; q++) at += cnts[q];
                    for (int i = 0; i < cnts[rank]; i++) {
                        int acc = (int)value(0, at + i, o);
                        for (int r = 1; r < size; r++) {
                            int y = (int)value(r, at + i, o);
                            acc = o == 0 ? acc + y : o == 1 ? acc * y : o == 2 ? (acc > y ? acc : y) : (acc < y ? acc : y);
                        }
                        ok &= ((int *)out)[i] == acc;
                    }
                    CHECK(ok, "reduce_scatter shape %d MPI_INT %s: wrong block", sh, opnames[o]);
                }
                /* in place: the input in recvbuf, the block lands at its start */
                memcpy(viaout, in, (long)total * rsizes[t]);
                MPI_Reduce_scatter(MPI_IN_PLACE, viaout, cnts, rtypes[t], ops[o], MPI_COMM_WORLD);
                CHECK(!memcmp(out, viaout, mine), "in-place reduce_scatter shape %d type %d %s", sh, t, opnames[o]);
                MPI_Type_free(&d);
                free(in), free(out), free(viaout);
            }
        free(cnts);
    }
    /* bcast from every root, predefined and through a derived type */
    for (int root = 0; root < size; root++)
        for (int n = 1; n <= 4000; n *= 7) {
            unsigned char *b = malloc(n);
            for (int i = 0; i < n; i++) b[i] = rank == root ? (unsigned char)(i * 13 + root) : 0xee;
            MPI_Bcast(b, n, MPI_BYTE, root, MPI_COMM_WORLD);
            int ok = 1;
            for (int i = 0; i < n; i++) ok &= b[i] == (unsigned char)(i * 13 + root);
            CHECK(ok, "bcast of %d bytes from %d", n, root);
            if (n % 2 == 0 || n == 1) {
                short *h = malloc(n * sizeof(short));
                MPI_Datatype d = viago(MPI_SHORT);
                for (int i = 0; i < n; i++) h[i] = rank == root ? (short)(i * 31 - root) : -1;
                /* the root describes the buffer as MPI_SHORTs, the others through a derived type */
                MPI_Bcast(h, n, rank == root ? MPI_SHORT : d, root, MPI_COMM_WORLD);
                ok = 1;
                for (int i = 0; i < n; i++) ok &= h[i] == (short)(i * 31 - root);
                CHECK(ok, "bcast of %d shorts from %d, mixed datatypes", n, root);
                MPI_Type_free(&d);
                free(h);
            }
            free(b);
        }
    /* allgather of one- and two-byte types, in place and not, against Go */
    const MPI_Datatype gtypes[] = {MPI_CHAR, MPI_SHORT, MPI_BYTE, MPI_UNSIGNED_SHORT};
    const int gsizes[] = {1, 2, 1, 2};
    for (int t = 0; t < 4; t++)
        for (int n = 1; n <= 1000; n = n * 3 + 1) {
            long bytes = (long)n * gsizes[t];
            char *mine = malloc(bytes), *all = malloc(bytes * size), *viaall = malloc(bytes * size);
            for (long i = 0; i < bytes; i++) mine[i] = (char)(rank * 41 + i * 7);
            MPI_Datatype d = viago(gtypes[t]);
            MPI_Allgather(mine, n, gtypes[t], all, n, gtypes[t], MPI_COMM_WORLD);
            MPI_Allgather(mine, n, d, viaall, n, d, MPI_COMM_WORLD);
            int ok = !memcmp(all, viaall, bytes * size);
            for (int r = 0; r < size; r++)
                for (long i = 0; i < bytes; i++) ok &= all[r * bytes + i] == (char)(r * 41 + i * 7);
            CHECK(ok, "allgather type %d n=%d", t, n);
            memset(all, 0, bytes * size);
            memcpy(all + rank * bytes, mine, bytes);
            MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, n, gtypes[t], MPI_COMM_WORLD);
            CHECK(!memcmp(all, viaall, bytes * size), "in-place allgather type %d n=%d", t, n);
            MPI_Type_free(&d);
            free(mine), free(all), free(viaall);
        }
}

static void keep_left(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    memcpy(inout, in, *len * sizeof(int));
}

/* paths: where small calls, large calls and user-op calls run. */
static void paths(void) {
    enum { K = 50 };
    long long f, g;
    int ai[4] = {rank, 1, 2, 3}, ao[4], *big = calloc(40000, sizeof(int)), *bigout = malloc(40000 * sizeof(int));
    double d = rank, *all = malloc(size * sizeof *all);

    f = counter("MPI_Allreduce", "fast"), g = counter("MPI_Allreduce", "go");
    for (int i = 0; i < K; i++) MPI_Allreduce(ai, ao, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    expect_path("MPI_Allreduce", "allreduce of 4 ints", f, g, K, fast_on("GOCOLL_ALLREDUCE_ALGORITHM"));

    f = counter("MPI_Reduce_scatter_block", "fast"), g = counter("MPI_Reduce_scatter_block", "go");
    int *rs = calloc(size, sizeof(int)), r1;
    for (int i = 0; i < K; i++) MPI_Reduce_scatter_block(rs, &r1, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    expect_path("MPI_Reduce_scatter_block", "reduce_scatter_block of 1 int each", f, g, K, fast_on("GOCOLL_REDUCE_SCATTER_BLOCK_ALGORITHM"));

    f = counter("MPI_Allgather", "fast"), g = counter("MPI_Allgather", "go");
    for (int i = 0; i < K; i++) MPI_Allgather(&d, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, MPI_COMM_WORLD);
    expect_path("MPI_Allgather", "allgather of 1 double", f, g, K, fast_on("GOCOLL_ALLGATHER_ALGORITHM"));

    f = counter("MPI_Reduce_scatter", "fast"), g = counter("MPI_Reduce_scatter", "go");
    int *cnts = malloc(size * sizeof(int)), *rin = calloc(2 * size, sizeof(int)), rout[2];
    for (int q = 0; q < size; q++) cnts[q] = q % 2 ? 2 : 0;
    /* a rank that receives nothing may pass a NULL recvbuf, and still meets the others there */
    for (int i = 0; i < K; i++) MPI_Reduce_scatter(rin, cnts[rank] ? rout : NULL, cnts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    expect_path("MPI_Reduce_scatter", "reduce_scatter of 0 (recvbuf NULL) or 2 ints each", f, g, K, fast_on("GOCOLL_REDUCE_SCATTER_ALGORITHM"));
    free(cnts), free(rin);

    f = counter("MPI_Bcast", "fast"), g = counter("MPI_Bcast", "go");
    for (int i = 0; i < K; i++) MPI_Bcast(ai, 4, MPI_INT, i % size, MPI_COMM_WORLD);
    expect_path("MPI_Bcast", "bcast of 4 ints", f, g, K, fast_on("GOCOLL_BCAST_ALGORITHM"));

    char c = (char)rank, *call = malloc(size);
    f = counter("MPI_Allgather", "fast"), g = counter("MPI_Allgather", "go");
    for (int i = 0; i < K; i++) MPI_Allgather(&c, 1, MPI_CHAR, call, 1, MPI_CHAR, MPI_COMM_WORLD);
    expect_path("MPI_Allgather", "allgather of 1 MPI_CHAR", f, g, K, fast_on("GOCOLL_ALLGATHER_ALGORITHM"));
    free(call);

    f = counter("MPI_Barrier", "fast"), g = counter("MPI_Barrier", "go");
    for (int i = 0; i < K; i++) MPI_Barrier(MPI_COMM_WORLD);
    expect_path("MPI_Barrier", "barrier", f, g, K, fast_on(NULL));

    /* Calls the fast path must decline go to Go, under every setting. */
    f = counter("MPI_Allreduce", "fast"), g = counter("MPI_Allreduce", "go");
    MPI_Allreduce(big, bigout, 40000, MPI_INT, MPI_SUM, MPI_COMM_WORLD); /* 160000 bytes: over its limit (128 KiB) */
    expect_path("MPI_Allreduce", "allreduce of 160000 bytes", f, g, 1, 0);
    MPI_Op left;
    MPI_Op_create(keep_left, 0, &left);
    f = counter("MPI_Allreduce", "fast"), g = counter("MPI_Allreduce", "go");
    MPI_Allreduce(ai, ao, 1, MPI_INT, left, MPI_COMM_WORLD); /* a user op */
    expect_path("MPI_Allreduce", "allreduce with a user op", f, g, 1, 0);
    CHECK(ao[0] == 0, "allreduce with keep-left: %d, want rank 0's 0", ao[0]);
    MPI_Op_free(&left);
    free(big), free(bigout), free(all), free(rs);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const MPI_Datatype types[4][3] = {{MPI_INT, MPI_INT32_T, MPI_INTEGER},
                                      {MPI_UNSIGNED_LONG, MPI_UINT64_T, MPI_UNSIGNED_LONG_LONG},
                                      {MPI_FLOAT, MPI_REAL, MPI_REAL4},
                                      {MPI_DOUBLE, MPI_DOUBLE_PRECISION, MPI_REAL8}};
    const int sizes[4] = {4, 8, 4, 8};
    CHECK(counter("MPI_Allreduce", "fast") >= 0 && counter("MPI_Barrier", "go") >= 0 && counter("MPI_Allreduce", "ring") >= 0 &&
              counter("MPI_Allreduce", "nope") == -1 && counter("MPI_Nope", "go") == -1,
          "gocoll_test_counter: valid keys count, unknown ones are -1");
    paths();
    newcalls();
    /* Every call of the loops below runs on exactly one path. */
    long long ar0 = counter("MPI_Allreduce", "fast") + counter("MPI_Allreduce", "go");
    long long rsb0 = counter("MPI_Reduce_scatter_block", "fast") + counter("MPI_Reduce_scatter_block", "go");
    long long ar = 0, rsb = 0;
    /* around the fast path's limit (128 KiB: 16384 and 32768 elements) */
    const long counts[] = {1, 2, 7, 100, 511, 512, 1024, 1025, 5000, 16384, 16385, 32768, 32769};
    for (int k = 0; k < 4; k++)
        for (int t = 0; t < 3; t++)
            for (int o = 0; o < 4; o++)
                for (unsigned c = 0; c < sizeof counts / sizeof counts[0]; c++) {
                    long n = counts[c];
                    size_t bytes = n * sizes[k];
                    char *in = malloc(bytes * size), *out = malloc(bytes * size), *want = malloc(bytes * size);
                    fill(k, o, n, in);
                    expect(k, o, n, want);
                    MPI_Allreduce(in, out, n, types[k][t], ops[o], MPI_COMM_WORLD);
                    CHECK(!memcmp(out, want, bytes), "allreduce kind %d type %d %s n=%ld", k, t, opnames[o], n);
                    memcpy(out, in, bytes);
                    MPI_Allreduce(MPI_IN_PLACE, out, n, types[k][t], ops[o], MPI_COMM_WORLD);
                    ar += 2;
                    CHECK(!memcmp(out, want, bytes), "in-place allreduce kind %d %s n=%ld", k, opnames[o], n);
                    /* reduce_scatter_block: n/size elements each */
                    long blk = n / size;
                    if (blk > 0) {
                        char *all = malloc(bytes * size), *wantall = malloc(bytes * size);
                        for (long j = 0; j < size; j++) memcpy(all + j * blk * sizes[k], in + j * blk * sizes[k], blk * sizes[k]);
                        MPI_Reduce_scatter_block(all, out, blk, types[k][t], ops[o], MPI_COMM_WORLD);
                        rsb++;
                        memcpy(wantall, want, bytes);
                        CHECK(!memcmp(out, wantall + rank * blk * sizes[k], blk * sizes[k]), "reduce_scatter_block kind %d %s blk=%ld", k, opnames[o], blk);
                        free(all);
                        free(wantall);
                    }
                    free(in); free(out); free(want);
                }
    long long dar = counter("MPI_Allreduce", "fast") + counter("MPI_Allreduce", "go") - ar0;
    long long drsb = counter("MPI_Reduce_scatter_block", "fast") + counter("MPI_Reduce_scatter_block", "go") - rsb0;
    CHECK(dar == ar && drsb == rsb, "%lld allreduce and %lld reduce_scatter_block calls counted (fast + go), %lld and %lld made",
          dar, drsb, ar, rsb);
    /* allgather of small blocks, in place and not */
    for (long n = 1; n <= 1000; n *= 10) {
        double *mine = malloc(n * sizeof *mine), *all = malloc(n * size * sizeof *all);
        for (long i = 0; i < n; i++) mine[i] = rank * 1000 + i;
        MPI_Allgather(mine, n, MPI_DOUBLE, all, n, MPI_DOUBLE, MPI_COMM_WORLD);
        int ok = 1;
        for (int r = 0; r < size; r++) for (long i = 0; i < n; i++) ok &= all[r * n + i] == r * 1000 + i;
        CHECK(ok, "allgather n=%ld", n);
        for (long i = 0; i < n * size; i++) all[i] = -1;
        memcpy(all + rank * n, mine, n * sizeof *mine);
        MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, n, MPI_DOUBLE, MPI_COMM_WORLD);
        ok = 1;
        for (int r = 0; r < size; r++) for (long i = 0; i < n; i++) ok &= all[r * n + i] == r * 1000 + i;
        CHECK(ok, "in-place allgather n=%ld", n);
        free(mine); free(all);
    }
    /* barriers back to back, and on a split communicator */
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    for (int i = 0; i < 1000; i++) { MPI_Barrier(MPI_COMM_WORLD); MPI_Barrier(half); }
    int x = rank, s;
    MPI_Allreduce(&x, &s, 1, MPI_INT, MPI_SUM, half);
    int hs;
    MPI_Comm_size(half, &hs);
    int want = 0;
    for (int r = rank % 2; r < size; r += 2) want += r;
    CHECK(s == want && hs == (size + 1 - rank % 2) / 2, "allreduce on a split communicator: %d, want %d", s, want);
    MPI_Comm_free(&half);
    int mine[2] = {passed, failed}, tot[2];
    MPI_Reduce(mine, tot, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%d passed, %d failed\n", tot[0], tot[1]);
    MPI_Finalize();
    return failed != 0;
}
