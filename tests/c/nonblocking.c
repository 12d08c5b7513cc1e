/*
 * nonblocking: the nonblocking (MPI_Iallreduce, MPI_Ireduce_scatter,
 * MPI_Ireduce_scatter_block, MPI_Iallgather and their _c forms) and
 * persistent (the *_init and *_init_c forms, MPI_Start, MPI_Startall,
 * MPI_Request_free) collectives, completed by every completion call
 * (MPI_Wait, Waitall, Waitany, Test, Testall, Testany), at any number of
 * ranks: in place and not, counts 0, 1, odd and 1<<20, several in flight
 * on one communicator and on several (dup, split), mixed with blocking
 * collectives and point-to-point in one Waitall array, user ops
 * (commutative and not), and bad arguments under MPI_ERRORS_RETURN.
 * Data are small integers (as int or double), so every result is exact
 * and checked against a fold computed here.
 *
 * Standard MPI: it builds with gocoll's mpicc, MPICH's and Open MPI's
 * (4.1, an MPI-3.1 library: the persistent collectives are its MPIX_
 * extension and the _c forms are left out there). Each rank judges its
 * own checks: it prints one line per failed check and `rank R: N passed,
 * N failed`, and exits non-zero if any of its checks failed.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if MPI_VERSION < 4
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif
#if !defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
#error "persistent collectives need MPI 4 (or Open MPI's pcollreq extension)"
#endif
#define MPI_Allreduce_init MPIX_Allreduce_init
#define MPI_Reduce_scatter_init MPIX_Reduce_scatter_init
#define MPI_Reduce_scatter_block_init MPIX_Reduce_scatter_block_init
#define MPI_Allgather_init MPIX_Allgather_init
#define LARGE_COUNT 0
#else
#define LARGE_COUNT 1
#endif

#include "check.h"

/* value is rank r's element i in round k: a small integer, exact as a
 * double and in any sum of eight of them. */
static int value(int r, long i, int k) { return (int)((r * 7 + i * 3 + k * 5) % 101) - 50; }

/* sum and max fold value over the ranks of a communicator of n ranks
 * whose world ranks are first, first+step, ... */
static int fold(long i, int k, int first, int step, int n, int max) {
    int acc = value(first, i, k);
    for (int q = 1; q < n; q++) {
        int v = value(first + q * step, i, k);
        acc = max ? (v > acc ? v : acc) : acc + v;
    }
    return acc;
}

/* Time limit of a Test loop: a request that never completes under MPI_Test
 * is a failure (progress only in MPI_Wait), not a hang. */
#define SPIN_SECONDS 20.0

/* spin calls MPI_Test on *req until it completes and returns whether it
 * did within SPIN_SECONDS; then (or on failure, after MPI_Wait) *req is
 * MPI_REQUEST_NULL for a nonblocking request, inactive for a persistent one. */
static int spin(MPI_Request *req, const char *what) {
    int flag = 0;
    double end = MPI_Wtime() + SPIN_SECONDS;
    while (!flag && MPI_Wtime() < end)
        if (MPI_Test(req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
    CHECK(flag, "%s: MPI_Test did not complete it in %.0f s", what, SPIN_SECONDS);
    if (!flag) MPI_Wait(req, MPI_STATUS_IGNORE);
    return flag;
}

/* ---- each nonblocking collective, in place and not, both count forms ---- */

static const long counts[] = {0, 1, 7, 1001};
#define NCOUNTS (int)(sizeof counts / sizeof counts[0])

static void iallreduce(void) {
    for (int c = 0; c < NCOUNTS; c++)
        for (int form = 0; form < 2 + LARGE_COUNT; form++) { /* 0: plain, 1: in place, 2: _c */
            long n = counts[c];
            int k = c + form;
            int *si = malloc((n + 1) * sizeof(int)), *ri = malloc((n + 1) * sizeof(int));
            double *sd = malloc((n + 1) * sizeof(double)), *rd = malloc((n + 1) * sizeof(double));
            for (long i = 0; i < n; i++) si[i] = value(rank, i, k), sd[i] = value(rank, i, k + 1);
            ri[n] = -7, rd[n] = -7; /* past the end: untouched */
            MPI_Request req[2];
            if (form == 1) {
                memcpy(ri, si, n * sizeof(int)), memcpy(rd, sd, n * sizeof(double));
                OK(MPI_Iallreduce(MPI_IN_PLACE, ri, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[0]));
                OK(MPI_Iallreduce(MPI_IN_PLACE, rd, (int)n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &req[1]));
            } else if (form == 0) {
                OK(MPI_Iallreduce(si, ri, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[0]));
                OK(MPI_Iallreduce(sd, rd, (int)n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &req[1]));
            } else {
#if LARGE_COUNT
                OK(MPI_Iallreduce_c(si, ri, (MPI_Count)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[0]));
                OK(MPI_Iallreduce_c(sd, rd, (MPI_Count)n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &req[1]));
#endif
            }
            OK(MPI_Wait(&req[0], MPI_STATUS_IGNORE));
            OK(MPI_Wait(&req[1], MPI_STATUS_IGNORE));
            CHECK(req[0] == MPI_REQUEST_NULL && req[1] == MPI_REQUEST_NULL, "iallreduce: MPI_Wait left the request set");
            int ok = ri[n] == -7 && rd[n] == -7;
            for (long i = 0; i < n; i++)
                ok &= ri[i] == fold(i, k, 0, 1, size, 0) && rd[i] == fold(i, k + 1, 0, 1, size, 1);
            CHECK(ok, "iallreduce form %d count %ld: wrong result", form, n);
            free(si), free(ri), free(sd), free(rd);
        }
}

static void ireduce_scatter(void) {
    /* counts of every rank: zeros, ones, odd; shape 3 all zero */
    for (int shape = 0; shape < 4; shape++)
        for (int form = 0; form < 2 + LARGE_COUNT; form++) {
            int *cnts = malloc(size * sizeof(int)), total = 0, at = 0;
            MPI_Count *ccnts = malloc(size * sizeof(MPI_Count));
            for (int q = 0; q < size; q++) {
                cnts[q] = shape == 0 ? (q * 5 + 1) % 4 : shape == 1 ? 1 : shape == 2 ? 2 * q + 3 : 0;
                ccnts[q] = cnts[q];
                if (q < rank) at += cnts[q];
                total += cnts[q];
            }
            int k = shape * 3 + form;
            int *in = malloc((total + 1) * sizeof(int)), *out = malloc((total + 1) * sizeof(int));
            for (int i = 0; i < total; i++) in[i] = value(rank, i, k);
            out[cnts[rank]] = -7;
            MPI_Request req;
            if (form == 0) {
                OK(MPI_Ireduce_scatter(in, out, cnts, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req));
            } else if (form == 1) {
                memcpy(out, in, total * sizeof(int));
                out[total] = -7;
                OK(MPI_Ireduce_scatter(MPI_IN_PLACE, out, cnts, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req));
            } else {
#if LARGE_COUNT
                OK(MPI_Ireduce_scatter_c(in, out, ccnts, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req));
#endif
            }
            /* complete by a Test loop */
            spin(&req, "ireduce_scatter");
            CHECK(req == MPI_REQUEST_NULL, "ireduce_scatter: a completed MPI_Test left the request set");
            int ok = form == 1 ? out[total] == -7 : out[cnts[rank]] == -7;
            for (int i = 0; i < cnts[rank]; i++) ok &= out[i] == fold(at + i, k, 0, 1, size, 0);
            CHECK(ok, "ireduce_scatter shape %d form %d: wrong block", shape, form);
            free(cnts), free(ccnts), free(in), free(out);
        }
}

static void ireduce_scatter_block(void) {
    const int blocks[] = {0, 1, 5, 300};
    for (int b = 0; b < 4; b++)
        for (int form = 0; form < 2 + LARGE_COUNT; form++) {
            int blk = blocks[b], k = b * 3 + form;
            long total = (long)blk * size;
            double *in = malloc((total + 1) * sizeof(double)), *out = malloc((total + 1) * sizeof(double));
            for (long i = 0; i < total; i++) in[i] = value(rank, i, k);
            MPI_Request req;
            if (form == 0) {
                out[blk] = -7;
                OK(MPI_Ireduce_scatter_block(in, out, blk, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req));
            } else if (form == 1) {
                memcpy(out, in, total * sizeof(double));
                out[total] = -7;
                OK(MPI_Ireduce_scatter_block(MPI_IN_PLACE, out, blk, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req));
            } else {
                out[blk] = -7;
#if LARGE_COUNT
                OK(MPI_Ireduce_scatter_block_c(in, out, (MPI_Count)blk, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req));
#endif
            }
            MPI_Status st;
            OK(MPI_Waitall(1, &req, &st));
            int ok = form == 1 ? out[total] == -7 : out[blk] == -7;
            for (int i = 0; i < blk; i++) ok &= out[i] == fold((long)rank * blk + i, k, 0, 1, size, 0);
            CHECK(ok, "ireduce_scatter_block block %d form %d: wrong block", blk, form);
            free(in), free(out);
        }
}

static void iallgather(void) {
    for (int c = 0; c < NCOUNTS; c++)
        for (int form = 0; form < 2 + LARGE_COUNT; form++) {
            long n = counts[c];
            int k = c * 3 + form;
            int *mine = malloc((n + 1) * sizeof(int)), *all = malloc((n * size + 1) * sizeof(int));
            for (long i = 0; i < n; i++) mine[i] = value(rank, i, k);
            for (long i = 0; i <= n * size; i++) all[i] = -7;
            MPI_Request req;
            if (form == 0) {
                OK(MPI_Iallgather(mine, (int)n, MPI_INT, all, (int)n, MPI_INT, MPI_COMM_WORLD, &req));
            } else if (form == 1) {
                memcpy(all + rank * n, mine, n * sizeof(int));
                OK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, (int)n, MPI_INT, MPI_COMM_WORLD, &req));
            } else {
#if LARGE_COUNT
                OK(MPI_Iallgather_c(mine, (MPI_Count)n, MPI_INT, all, (MPI_Count)n, MPI_INT, MPI_COMM_WORLD, &req));
#endif
            }
            spin(&req, "iallgather");
            int ok = all[n * size] == -7;
            for (int r = 0; r < size; r++)
                for (long i = 0; i < n; i++) ok &= all[r * n + i] == value(r, i, k);
            CHECK(ok, "iallgather form %d count %ld: wrong result", form, n);
            free(mine), free(all);
        }
}

/* ---- several in flight, on several communicators, with point-to-point ---- */

static void in_flight(void) {
    MPI_Comm dup, half;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half));
    int hsize, hrank;
    MPI_Comm_size(half, &hsize);
    MPI_Comm_rank(half, &hrank);
    enum { N = 37 };
    for (int round = 0; round < 3; round++) {
        int k = 10 * round;
        int a[N], ar[N], b[N], br[N], g[N], *gall = malloc(N * size * sizeof(int));
        int *hin = malloc(N * hsize * sizeof(int)), hout[N], blocking[N], bout[N];
        int *cnts = malloc(size * sizeof(int)), *rsin, rsout[3] = {-7, -7, -7};
        int sendv = value(rank, 0, k + 9), recvv = -7, total = 0, at = 0;
        for (int q = 0; q < size; q++) {
            cnts[q] = q % 3;
            if (q < rank) at += cnts[q];
            total += cnts[q];
        }
        rsin = malloc((total + 1) * sizeof(int));
        for (int i = 0; i < total; i++) rsin[i] = value(rank, i, k + 5);
        for (int i = 0; i < N; i++) {
            a[i] = value(rank, i, k), b[i] = value(rank, i, k + 1), g[i] = value(rank, i, k + 2);
            blocking[i] = value(rank, i, k + 3);
        }
        for (long i = 0; i < (long)N * hsize; i++) hin[i] = value(rank, i, k + 4);
        /* started in the same order on every rank, per communicator */
        MPI_Request req[7];
        OK(MPI_Iallreduce(a, ar, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[0]));
        OK(MPI_Iallgather(g, N, MPI_INT, gall, N, MPI_INT, dup, &req[1]));
        OK(MPI_Ireduce_scatter_block(hin, hout, N, MPI_INT, MPI_MAX, half, &req[2]));
        OK(MPI_Iallreduce(b, br, N, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req[3]));
        OK(MPI_Ireduce_scatter(rsin, rsout, cnts, MPI_INT, MPI_SUM, dup, &req[4]));
        /* point-to-point around a ring, in the same array */
        OK(MPI_Irecv(&recvv, 1, MPI_INT, (rank + size - 1) % size, 77, MPI_COMM_WORLD, &req[5]));
        OK(MPI_Isend(&sendv, 1, MPI_INT, (rank + 1) % size, 77, MPI_COMM_WORLD, &req[6]));
        /* a blocking collective on each communicator while they are in flight */
        OK(MPI_Allreduce(blocking, bout, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        int ok = 1;
        for (int i = 0; i < N; i++) ok &= bout[i] == fold(i, k + 3, 0, 1, size, 0);
        CHECK(ok, "blocking allreduce among nonblocking ones, round %d", round);
        int hb = hrank, hbout = -1;
        OK(MPI_Allreduce(&hb, &hbout, 1, MPI_INT, MPI_SUM, half));
        CHECK(hbout == hsize * (hsize - 1) / 2, "blocking allreduce on the split communicator: %d", hbout);
        /* completed in another order than started, differently per round */
        MPI_Request order[8];
        for (int j = 0; j < 7; j++) order[j] = req[(j * (round + 2) + 3) % 7]; /* 2, 3, 4 are prime to 7 */
        order[7] = MPI_REQUEST_NULL;
        if (round == 1) order[7] = order[0], order[0] = MPI_REQUEST_NULL;
        MPI_Status st[8];
        OK(MPI_Waitall(8, order, st));
        ok = 1;
        for (int j = 0; j < 8; j++) ok &= order[j] == MPI_REQUEST_NULL;
        CHECK(ok, "MPI_Waitall left requests set");
        ok = 1;
        for (int i = 0; i < N; i++) ok &= ar[i] == fold(i, k, 0, 1, size, 0) && br[i] == fold(i, k + 1, 0, 1, size, 1);
        CHECK(ok, "two iallreduce in flight on one communicator, round %d", round);
        ok = 1;
        for (int r = 0; r < size; r++)
            for (int i = 0; i < N; i++) ok &= gall[r * N + i] == value(r, i, k + 2);
        CHECK(ok, "iallgather on a dup, round %d", round);
        ok = 1;
        for (int i = 0; i < N; i++) ok &= hout[i] == fold((long)hrank * N + i, k + 4, rank % 2, 2, hsize, 1);
        CHECK(ok, "ireduce_scatter_block on a split, round %d", round);
        ok = rsout[cnts[rank]] == -7;
        for (int i = 0; i < cnts[rank]; i++) ok &= rsout[i] == fold(at + i, k + 5, 0, 1, size, 0);
        CHECK(ok, "ireduce_scatter on a dup, round %d", round);
        CHECK(recvv == value((rank + size - 1) % size, 0, k + 9), "irecv in the array: %d", recvv);
        free(gall), free(hin), free(cnts), free(rsin);
    }
    MPI_Comm_free(&dup);
    MPI_Comm_free(&half);
}

/* ---- completion calls: Test, Testall, Waitany, Testany ---- */

static void completion(void) {
    enum { N = 513 };
    int in[4][N], out[4][N];
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < N; i++) in[j][i] = value(rank, i, 40 + j);
    int check[4];

    /* MPI_Test and MPI_Wait on MPI_REQUEST_NULL return at once */
    MPI_Request null = MPI_REQUEST_NULL;
    int flag = 0;
    OK(MPI_Test(&null, &flag, MPI_STATUS_IGNORE));
    CHECK(flag, "MPI_Test of MPI_REQUEST_NULL: flag false");
    OK(MPI_Wait(&null, MPI_STATUS_IGNORE));

    /* Testall over four, one of them MPI_REQUEST_NULL, spun until all done */
    MPI_Request req[4];
    for (int j = 0; j < 4; j++)
        if (j == 2) req[j] = MPI_REQUEST_NULL;
        else OK(MPI_Iallreduce(in[j], out[j], N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[j]));
    flag = 0;
    double end = MPI_Wtime() + SPIN_SECONDS;
    MPI_Status st[4];
    while (!flag && MPI_Wtime() < end)
        if (MPI_Testall(4, req, &flag, st) != MPI_SUCCESS) break;
    CHECK(flag, "MPI_Testall did not complete in %.0f s", SPIN_SECONDS);
    if (!flag) MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
    int ok = 1;
    for (int j = 0; j < 4; j++) {
        ok &= req[j] == MPI_REQUEST_NULL;
        for (int i = 0; i < N && j != 2; i++) ok &= out[j][i] == fold(i, 40 + j, 0, 1, size, 0);
    }
    CHECK(ok, "MPI_Testall: wrong results or requests left set");
    OK(MPI_Testall(4, req, &flag, MPI_STATUSES_IGNORE));
    CHECK(flag, "MPI_Testall of MPI_REQUEST_NULLs: flag false");
    OK(MPI_Testall(0, NULL, &flag, MPI_STATUSES_IGNORE));
    CHECK(flag, "MPI_Testall of none: flag false");

    /* Waitany: each index once (0-based), then MPI_UNDEFINED */
    for (int j = 0; j < 4; j++) {
        check[j] = 0;
        if (j == 1) req[j] = MPI_REQUEST_NULL;
        else OK(MPI_Iallreduce(in[j], out[j], N, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req[j]));
    }
    for (int done = 0; done < 3; done++) {
        int idx = -1;
        OK(MPI_Waitany(4, req, &idx, MPI_STATUS_IGNORE));
        if (idx < 0 || idx >= 4 || idx == 1 || check[idx]) {
            CHECK(0, "MPI_Waitany: index %d", idx);
            break;
        }
        check[idx] = 1;
        CHECK(req[idx] == MPI_REQUEST_NULL, "MPI_Waitany left request %d set", idx);
        ok = 1;
        for (int i = 0; i < N; i++) ok &= out[idx][i] == fold(i, 40 + idx, 0, 1, size, 1);
        CHECK(ok, "MPI_Waitany: request %d's result", idx);
    }
    int idx = -1;
    OK(MPI_Waitany(4, req, &idx, MPI_STATUS_IGNORE));
    CHECK(idx == MPI_UNDEFINED, "MPI_Waitany of MPI_REQUEST_NULLs: index %d, want MPI_UNDEFINED", idx);
    idx = -1;
    OK(MPI_Waitany(0, NULL, &idx, MPI_STATUS_IGNORE));
    CHECK(idx == MPI_UNDEFINED, "MPI_Waitany of none: index %d", idx);

    /* Testany: spun; flag with an index per completion, then flag with MPI_UNDEFINED */
    for (int j = 0; j < 4; j++) {
        check[j] = 0;
        if (j == 3) req[j] = MPI_REQUEST_NULL;
        else OK(MPI_Iallgather(in[j], 1, MPI_INT, out[j], 1, MPI_INT, MPI_COMM_WORLD, &req[j]));
    }
    int got = 0, pending = -1; /* pending: the index MPI_Testany gave without a completion */
    end = MPI_Wtime() + SPIN_SECONDS;
    while (got < 3 && MPI_Wtime() < end) {
        flag = 0, idx = -1;
        if (MPI_Testany(4, req, &idx, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
        if (!flag) {
            if (idx != MPI_UNDEFINED) pending = idx;
            continue;
        }
        if (idx < 0 || idx >= 3 || check[idx]) {
            CHECK(0, "MPI_Testany: flag with index %d", idx);
            break;
        }
        check[idx] = 1, got++;
        CHECK(req[idx] == MPI_REQUEST_NULL, "MPI_Testany left request %d set", idx);
        ok = 1;
        for (int r = 0; r < size; r++) ok &= out[idx][r] == value(r, 0, 40 + idx);
        CHECK(ok, "MPI_Testany: request %d's result", idx);
    }
    CHECK(got == 3, "MPI_Testany completed %d of 3 in %.0f s", got, SPIN_SECONDS);
    CHECK(pending == -1, "MPI_Testany without completion: index %d, want MPI_UNDEFINED", pending);
    if (got < 3) MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
    flag = 0, idx = -1;
    OK(MPI_Testany(4, req, &idx, &flag, MPI_STATUS_IGNORE));
    CHECK(flag && idx == MPI_UNDEFINED, "MPI_Testany of MPI_REQUEST_NULLs: flag %d index %d", flag, idx);
}

/* ---- persistent ---- */

static void persistent(void) {
    enum { N = 301, ROUNDS = 5 };
    int a[N + 1] = {0}, ar[N + 1], ip[N + 1], blk = 3;
    int *cnts = malloc(size * sizeof(int)), total = 0, at = 0;
    for (int q = 0; q < size; q++) {
        cnts[q] = (q * 2 + 1) % 4;
        if (q < rank) at += cnts[q];
        total += cnts[q];
    }
    int *rsin = malloc((total + 1) * sizeof(int)), rsout[4];
    double *rbin = malloc(blk * size * sizeof(double)), rbout[3];
    double g[2], *gall = malloc(2 * size * sizeof(double));
    MPI_Request req[5];
    OK(MPI_Allreduce_init(a, ar, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &req[0]));
    OK(MPI_Reduce_scatter_init(rsin, rsout, cnts, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &req[1]));
    OK(MPI_Reduce_scatter_block_init(rbin, rbout, blk, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, MPI_INFO_NULL, &req[2]));
    OK(MPI_Allgather_init(g, 2, MPI_DOUBLE, gall, 2, MPI_DOUBLE, MPI_COMM_WORLD, MPI_INFO_NULL, &req[3]));
    OK(MPI_Allreduce_init(MPI_IN_PLACE, ip, N, MPI_INT, MPI_MAX, MPI_COMM_WORLD, MPI_INFO_NULL, &req[4]));
    int ok = 1;
    for (int j = 0; j < 5; j++) ok &= req[j] != MPI_REQUEST_NULL;
    CHECK(ok, "an *_init returned MPI_REQUEST_NULL");

    /* one never started is freed */
    MPI_Request unused;
    OK(MPI_Allreduce_init(a, ar, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &unused));
    OK(MPI_Request_free(&unused));
    CHECK(unused == MPI_REQUEST_NULL, "MPI_Request_free of a never-started request left it set");

    int flag = 0;
    for (int round = 0; round < ROUNDS; round++) {
        /* new buffer contents each round: the request reads them at MPI_Start */
        int k = 50 + round;
        for (int i = 0; i < N; i++) a[i] = value(rank, i, k), ip[i] = value(rank, i, k + 1);
        a[N] = ar[N] = ip[N] = -7;
        for (int i = 0; i < total; i++) rsin[i] = value(rank, i, k + 2);
        for (int i = 0; i < blk * size; i++) rbin[i] = value(rank, i, k + 3);
        g[0] = value(rank, 0, k + 4), g[1] = value(rank, 1, k + 4);
        if (round % 2 == 0) {
            OK(MPI_Startall(5, req));
        } else {
            for (int j = 4; j >= 0; j -= 2) OK(MPI_Start(&req[j])); /* 4, 2, 0: same order on every rank */
            OK(MPI_Start(&req[1]));
            OK(MPI_Start(&req[3]));
        }
        if (round == 1) {
            /* a Test loop on a persistent request: it stays, inactive */
            spin(&req[0], "persistent allreduce");
            CHECK(req[0] != MPI_REQUEST_NULL, "MPI_Test freed a persistent request");
            OK(MPI_Wait(&req[0], MPI_STATUS_IGNORE)); /* inactive: at once */
            OK(MPI_Test(&req[0], &flag, MPI_STATUS_IGNORE));
            CHECK(flag, "MPI_Test of an inactive persistent request: flag false");
        }
        MPI_Request order[5] = {req[3], req[1], req[4], req[0], req[2]};
        OK(MPI_Waitall(5, order, MPI_STATUSES_IGNORE));
        ok = 1;
        for (int j = 0; j < 5; j++) ok &= order[j] != MPI_REQUEST_NULL;
        CHECK(ok, "MPI_Waitall freed persistent requests, round %d", round);
        ok = ar[N] == -7 && ip[N] == -7;
        for (int i = 0; i < N; i++) ok &= ar[i] == fold(i, k, 0, 1, size, 0) && ip[i] == fold(i, k + 1, 0, 1, size, 1);
        CHECK(ok, "persistent allreduce (and in place), round %d", round);
        ok = 1;
        for (int i = 0; i < cnts[rank]; i++) ok &= rsout[i] == fold(at + i, k + 2, 0, 1, size, 0);
        CHECK(ok, "persistent reduce_scatter, round %d", round);
        ok = 1;
        for (int i = 0; i < blk; i++) ok &= rbout[i] == fold((long)rank * blk + i, k + 3, 0, 1, size, 1);
        CHECK(ok, "persistent reduce_scatter_block, round %d", round);
        ok = 1;
        for (int r = 0; r < size; r++) ok &= gall[2 * r] == value(r, 0, k + 4) && gall[2 * r + 1] == value(r, 1, k + 4);
        CHECK(ok, "persistent allgather, round %d", round);
    }
    for (int j = 0; j < 5; j++) {
        OK(MPI_Request_free(&req[j]));
        CHECK(req[j] == MPI_REQUEST_NULL, "MPI_Request_free left request %d set", j);
    }

#if LARGE_COUNT
    /* the _init_c forms, started three times */
    MPI_Count *ccnts = malloc(size * sizeof(MPI_Count));
    for (int q = 0; q < size; q++) ccnts[q] = cnts[q];
    OK(MPI_Allreduce_init_c(a, ar, (MPI_Count)N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &req[0]));
    OK(MPI_Reduce_scatter_init_c(rsin, rsout, ccnts, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &req[1]));
    OK(MPI_Reduce_scatter_block_init_c(rbin, rbout, (MPI_Count)blk, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, MPI_INFO_NULL, &req[2]));
    OK(MPI_Allgather_init_c(g, 2, MPI_DOUBLE, gall, 2, MPI_DOUBLE, MPI_COMM_WORLD, MPI_INFO_NULL, &req[3]));
    for (int round = 0; round < 3; round++) {
        int k = 60 + round;
        for (int i = 0; i < N; i++) a[i] = value(rank, i, k);
        for (int i = 0; i < total; i++) rsin[i] = value(rank, i, k + 2);
        for (int i = 0; i < blk * size; i++) rbin[i] = value(rank, i, k + 3);
        g[0] = value(rank, 0, k + 4), g[1] = value(rank, 1, k + 4);
        OK(MPI_Startall(4, req));
        OK(MPI_Waitall(4, req, MPI_STATUSES_IGNORE));
        ok = 1;
        for (int i = 0; i < N; i++) ok &= ar[i] == fold(i, k, 0, 1, size, 0);
        for (int i = 0; i < cnts[rank]; i++) ok &= rsout[i] == fold(at + i, k + 2, 0, 1, size, 0);
        for (int i = 0; i < blk; i++) ok &= rbout[i] == fold((long)rank * blk + i, k + 3, 0, 1, size, 1);
        for (int r = 0; r < size; r++) ok &= gall[2 * r] == value(r, 0, k + 4) && gall[2 * r + 1] == value(r, 1, k + 4);
        CHECK(ok, "the _init_c forms, round %d", round);
    }
    for (int j = 0; j < 4; j++) OK(MPI_Request_free(&req[j]));
    free(ccnts);
#endif
    free(cnts), free(rsin), free(rbin), free(gall);
}

/* ---- user ops, large counts ---- */

/* sum as a user op, declared commutative */
static void usersum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

/* Pairs (m, c) are the maps x -> m*x + c mod P; inout = in then inout:
 * associative, not commutative. */
#define P 1000003
static void affine(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    int *a = in, *b = inout;
    for (int i = 0; i < *len; i++) {
        long long m = (long long)a[2 * i] * b[2 * i] % P;
        long long c = ((long long)b[2 * i] * a[2 * i + 1] + b[2 * i + 1]) % P;
        b[2 * i] = (int)m, b[2 * i + 1] = (int)c;
    }
}

static void user_ops(void) {
    enum { N = 29 };
    MPI_Op sum, aff;
    MPI_Datatype pair;
    OK(MPI_Op_create(usersum, 1, &sum));
    OK(MPI_Op_create(affine, 0, &aff));
    OK(MPI_Type_contiguous(2, MPI_INT, &pair));
    OK(MPI_Type_commit(&pair));
    int in[N], out[N], pin[2 * N], pout[2 * N];
    for (int i = 0; i < N; i++) {
        in[i] = value(rank, i, 70);
        pin[2 * i] = 2 + (rank * 13 + i) % 97;
        pin[2 * i + 1] = (rank * 31 + i * 7) % 101;
    }
    MPI_Request req[2];
    OK(MPI_Iallreduce(in, out, N, MPI_INT, sum, MPI_COMM_WORLD, &req[0]));
    OK(MPI_Iallreduce(pin, pout, N, pair, aff, MPI_COMM_WORLD, &req[1]));
    OK(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
    int ok = 1;
    for (int i = 0; i < N; i++) ok &= out[i] == fold(i, 70, 0, 1, size, 0);
    CHECK(ok, "iallreduce with a commutative user op");
    ok = 1;
    for (int i = 0; i < N; i++) {
        /* rank 0's map first, then rank 1's, ... */
        long long m = 1, c = 0;
        for (int r = 0; r < size; r++) {
            long long rm = 2 + (r * 13 + i) % 97, rc = (r * 31 + i * 7) % 101;
            m = m * rm % P, c = (rm * c + rc) % P;
        }
        ok &= pout[2 * i] == m && pout[2 * i + 1] == c;
    }
    CHECK(ok, "iallreduce with a non-commutative user op: not in rank order");
    MPI_Type_free(&pair);
    MPI_Op_free(&sum);
    MPI_Op_free(&aff);
}

static void large(void) {
    const long n = 1L << 20;
    double *in = malloc(n * sizeof(double)), *out = malloc(n * sizeof(double));
    for (long i = 0; i < n; i++) in[i] = value(rank, i, 80);
    MPI_Request req;
    OK(MPI_Iallreduce(in, out, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req));
    spin(&req, "iallreduce of 1<<20 doubles");
    int ok = 1;
    /* value repeats with period 101 in i */
    double want[101];
    for (int i = 0; i < 101; i++) want[i] = fold(i, 80, 0, 1, size, 0);
    for (long i = 0; i < n; i++) ok &= out[i] == want[i % 101];
    CHECK(ok, "iallreduce of 1<<20 doubles");
    free(in), free(out);
}

/* ---- bad arguments ---- */

static void errors(void) {
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    int x = 1, y;
    MPI_Request req;
    CHECK(MPI_Ireduce_scatter_block(&x, &y, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD, &req) != MPI_SUCCESS,
          "ireduce_scatter_block with MPI_OP_NULL: success");
    CHECK(MPI_Iallreduce(&x, &y, 1, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD, &req) != MPI_SUCCESS,
          "iallreduce of MPI_DATATYPE_NULL: success");
    CHECK(MPI_Reduce_scatter_block_init(&x, &y, -2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &req) != MPI_SUCCESS,
          "reduce_scatter_block_init of count -2: success");
    CHECK(MPI_Start(NULL) != MPI_SUCCESS, "MPI_Start(NULL): success");
    CHECK(MPI_Startall(1, NULL) != MPI_SUCCESS, "MPI_Startall of a NULL array: success");
    req = MPI_REQUEST_NULL;
    CHECK(MPI_Start(&req) != MPI_SUCCESS, "MPI_Start of MPI_REQUEST_NULL: success");
    CHECK(MPI_Request_free(&req) != MPI_SUCCESS, "MPI_Request_free of MPI_REQUEST_NULL: success");
#if !defined(OPEN_MPI)
    /* Open MPI 4.1 checks none of these: it crashes, or starts an active request again */
    CHECK(MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, NULL) != MPI_SUCCESS, "iallreduce with a NULL request: success");
    CHECK(MPI_Allreduce_init(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, NULL) != MPI_SUCCESS,
          "allreduce_init with a NULL request: success");
    CHECK(MPI_Iallgather(&x, 1, MPI_INT, &y, 1, MPI_INT, MPI_COMM_NULL, &req) != MPI_SUCCESS, "iallgather on MPI_COMM_NULL: success");
    /* starting an active request: refused, and the running call unharmed */
    OK(MPI_Allreduce_init(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &req));
    OK(MPI_Start(&req));
    CHECK(MPI_Start(&req) != MPI_SUCCESS, "MPI_Start of an active request: success");
    OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK(y == size, "allreduce after a refused MPI_Start: %d, want %d", y, size);
    OK(MPI_Request_free(&req));
#endif
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL));
}

/* ---- MPI's progress rule: a rank blocked in another call still moves its requests ---- */

/* Rank 0 starts an allreduce, then blocks (in a receive, then in a
 * collective on another communicator) on rank 1, which first waits for
 * that allreduce: rank 0's blocking calls must move it. */
static void progress_rule(void) {
    enum { N = 1 << 16 };
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    double *in = malloc(N * sizeof(double)), *out = malloc(N * sizeof(double));
    for (int round = 0; round < 2; round++) {
        for (long i = 0; i < N; i++) in[i] = value(rank, i, round), out[i] = -1;
        MPI_Request req;
        OK(MPI_Iallreduce(in, out, N, MPI_DOUBLE, MPI_SUM, dup, &req));
        int token = 1000 + round, got = -1, x = rank, sum = -1;
        if (rank == 0 && size > 1) {
            if (round == 0) OK(MPI_Recv(&got, 1, MPI_INT, 1, 78, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            else OK(MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
            OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
        } else {
            OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
            if (rank == 1 && round == 0) OK(MPI_Send(&token, 1, MPI_INT, 0, 78, MPI_COMM_WORLD));
            if (round == 1) OK(MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        }
        int ok = 1;
        for (long i = 0; i < N; i++) ok &= out[i] == fold(i, round, 0, 1, size, 0);
        CHECK(ok, "iallreduce moved by a rank blocked in %s", round == 0 ? "MPI_Recv" : "MPI_Allreduce");
        if (rank == 0 && size > 1 && round == 0) CHECK(got == token, "MPI_Recv got %d", got);
        if (round == 1) CHECK(sum == size * (size - 1) / 2, "MPI_Allreduce after the request: %d", sum);
    }
    free(in), free(out);
    MPI_Comm_free(&dup);
}

int main(int argc, char **argv) {
    /* MPI_THREAD_MULTIPLE: under LD_PRELOAD, GOCOLL_PROGRESS_THREAD=1
     * needs it (the tests set it over MPICH) */
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    iallreduce();
    ireduce_scatter();
    ireduce_scatter_block();
    iallgather();
    in_flight();
    progress_rule();
    completion();
    persistent();
    user_ops();
    large();
    errors();
    printf("rank %d: %d passed, %d failed\n", rank, passed, failed);
    MPI_Finalize();
    return failed != 0;
}
