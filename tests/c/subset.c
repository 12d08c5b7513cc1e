/*
 * subset: exercises every call of gocoll's exported MPI subset on any
 * number of ranks and checks each result against a reference the test
 * computes itself. Each rank judges its own checks: it prints one line per
 * failed check and `rank R: N passed, N failed`, and exits non-zero if any
 * of its checks failed; the launcher's exit status combines the ranks',
 * so that no verdict rests on gocoll's own collectives.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

/* A non-commutative op on pairs (m, c): the map x -> m*x + c, a then b. */
static void affine(void *in, void *inout, int *len, MPI_Datatype *dt) {
    int *a = in, *b = inout;
    (void)dt;
    for (int i = 0; i < *len; i++) {
        int bm = b[2 * i], bc = b[2 * i + 1];
        b[2 * i] = a[2 * i] * bm;
        b[2 * i + 1] = a[2 * i + 1] * bm + bc;
    }
}

static void test_environment(void) {
    int flag, v, sv, len;
    char name[MPI_MAX_PROCESSOR_NAME], lib[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Initialized(&flag);
    CHECK(flag == 1, "MPI_Initialized = %d", flag);
    MPI_Finalized(&flag);
    CHECK(flag == 0, "MPI_Finalized = %d before MPI_Finalize", flag);
    MPI_Query_thread(&v);
    CHECK(v >= MPI_THREAD_SINGLE && v <= MPI_THREAD_MULTIPLE, "MPI_Query_thread = %d", v);
    MPI_Get_version(&v, &sv);
    CHECK(v == MPI_VERSION && sv == MPI_SUBVERSION, "MPI_Get_version %d.%d", v, sv);
    MPI_Get_library_version(lib, &len);
    CHECK(len > 0 && strstr(lib, "gocoll") != NULL && (int)strlen(lib) == len, "library version \"%s\"", lib);
    MPI_Get_processor_name(name, &len);
    CHECK(len > 0 && (int)strlen(name) == len, "processor name \"%s\"", name);
    double t0 = MPI_Wtime(), t1 = MPI_Wtime();
    CHECK(t1 >= t0 && MPI_Wtick() > 0 && MPI_Wtick() < 1, "MPI_Wtime/MPI_Wtick");
    int s;
    MPI_Comm_size(MPI_COMM_SELF, &s);
    CHECK(s == 1, "size of MPI_COMM_SELF = %d", s);
}

static void test_errors(void) {
    MPI_Errhandler eh;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh);
    CHECK(eh == MPI_ERRORS_ARE_FATAL, "default error handler");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    double x = 1, y;
    int rc = MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_BAND, MPI_COMM_WORLD);
    int cls = -1, len;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_OP, "MPI_BAND on MPI_DOUBLE: class %d", cls);
    char msg[MPI_MAX_ERROR_STRING];
    MPI_Error_string(rc, msg, &len);
    CHECK(len > 0, "MPI_Error_string");
    rc = MPI_Allreduce(&x, &y, -1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CHECK(rc == MPI_ERR_COUNT, "negative count: %d", rc);
    rc = MPI_Allreduce(&x, &y, 1, (MPI_Datatype)0x12345, MPI_SUM, MPI_COMM_WORLD);
    CHECK(rc == MPI_ERR_TYPE, "bad datatype: %d", rc);
    rc = MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, (MPI_Comm)0x12345);
    CHECK(rc == MPI_ERR_COMM, "bad communicator: %d", rc);
    rc = MPI_Allreduce(NULL, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CHECK(rc == MPI_ERR_BUFFER, "NULL buffer: %d", rc);
    rc = MPI_Bcast(&x, 1, MPI_DOUBLE, size, MPI_COMM_WORLD);
    CHECK(rc == MPI_ERR_ROOT, "bad root: %d", rc);
    rc = MPI_Send(&x, 1, MPI_DOUBLE, 0, -5, MPI_COMM_WORLD);
    CHECK(rc == MPI_ERR_TAG, "bad tag: %d", rc);
    rc = MPI_Send(&x, 1, MPI_DOUBLE, size, 0, MPI_COMM_WORLD);
    CHECK(rc == MPI_ERR_RANK, "bad rank: %d", rc);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

static void test_comms(void) {
    MPI_Comm dup, half, none;
    int r, s, res;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_compare(MPI_COMM_WORLD, dup, &res);
    CHECK(res == MPI_CONGRUENT, "compare world/dup = %d", res);
    MPI_Comm_compare(dup, dup, &res);
    CHECK(res == MPI_IDENT, "compare dup/dup = %d", res);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
    MPI_Comm_rank(half, &r);
    MPI_Comm_size(half, &s);
    CHECK(s == (size + 1 - rank % 2) / 2, "split size %d", s);
    CHECK(r == (s - 1) - rank / 2, "split rank %d (keys reverse the order)", r);
    int one = 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, half);
    CHECK(sum == s, "allreduce on the split communicator: %d", sum);
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, dup);
    CHECK(sum == size, "allreduce on the dup: %d", sum);
    MPI_Comm_split(MPI_COMM_WORLD, MPI_UNDEFINED, 0, &none);
    CHECK(none == MPI_COMM_NULL, "MPI_UNDEFINED color gives MPI_COMM_NULL");
    MPI_Comm_free(&half);
    MPI_Comm_free(&dup);
    CHECK(half == MPI_COMM_NULL && dup == MPI_COMM_NULL, "MPI_Comm_free sets MPI_COMM_NULL");
    int ok = 1;
    for (int i = 0; i < 200; i++) { /* created and freed many times */
        MPI_Comm c = MPI_COMM_NULL;
        ok &= MPI_Comm_dup(MPI_COMM_WORLD, &c) == MPI_SUCCESS && c != MPI_COMM_NULL;
        ok &= MPI_Comm_rank(c, &r) == MPI_SUCCESS && r == rank && MPI_Comm_size(c, &s) == MPI_SUCCESS && s == size;
        ok &= MPI_Comm_compare(MPI_COMM_WORLD, c, &res) == MPI_SUCCESS && res == MPI_CONGRUENT;
        ok &= MPI_Comm_free(&c) == MPI_SUCCESS && c == MPI_COMM_NULL;
    }
    CHECK(ok, "200 dups of MPI_COMM_WORLD, each with its rank and size, freed to MPI_COMM_NULL");
}

static void test_types_ops(void) {
    MPI_Datatype pair;
    int sz;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    MPI_Type_size(pair, &sz);
    CHECK(sz == 8, "size of contiguous(2, MPI_INT) = %d", sz);
    MPI_Op op;
    int commute;
    MPI_Op_create(affine, 0, &op);
    MPI_Op_commutative(op, &commute);
    CHECK(commute == 0, "MPI_Op_commutative = %d", commute);
    MPI_Op_commutative(MPI_SUM, &commute);
    CHECK(commute == 1, "MPI_SUM commutative");
    int in[6], out[6], want[6];
    for (int i = 0; i < 3; i++) {
        in[2 * i] = rank + 2 + i;
        in[2 * i + 1] = 3 * rank + i;
        want[2 * i] = 2 + i;
        want[2 * i + 1] = i;
    }
    for (int q = 1; q < size; q++)
        for (int i = 0; i < 3; i++) {
            int m = q + 2 + i, c = 3 * q + i;
            want[2 * i + 1] = want[2 * i + 1] * m + c;
            want[2 * i] *= m;
        }
    MPI_Allreduce(in, out, 3, pair, op, MPI_COMM_WORLD);
    CHECK(memcmp(out, want, sizeof want) == 0, "user non-commutative op on a derived type");
    MPI_Reduce(in, out, 3, pair, op, size - 1, MPI_COMM_WORLD);
    if (rank == size - 1)
        CHECK(memcmp(out, want, sizeof want) == 0, "MPI_Reduce with a user op");
    MPI_Op_free(&op);
    MPI_Type_free(&pair);
    CHECK(op == MPI_OP_NULL && pair == MPI_DATATYPE_NULL, "free sets the null handles");
}

static void test_p2p(void) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int out[1000], in[1000];
    MPI_Status st;
    for (int i = 0; i < 1000; i++) out[i] = rank * 1000 + i;
    MPI_Sendrecv(out, 1000, MPI_INT, right, 7, in, 1000, MPI_INT, left, 7, MPI_COMM_WORLD, &st);
    int cnt;
    MPI_Get_count(&st, MPI_INT, &cnt);
    CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 7 && cnt == 1000 && in[999] == left * 1000 + 999, "sendrecv ring");
    if (size > 1) {
        if (rank == 0) {
            int got = 0, sum = 0;
            for (int i = 1; i < size; i++) {
                int v;
                MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
                CHECK(st.MPI_TAG == st.MPI_SOURCE + 100 && v == st.MPI_SOURCE, "any source/any tag");
                got++;
                sum += v;
            }
            CHECK(got == size - 1 && sum == size * (size - 1) / 2, "received from every rank");
        } else {
            MPI_Send(&rank, 1, MPI_INT, 0, rank + 100, MPI_COMM_WORLD);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD); /* the wildcard receives above are done */
    MPI_Request reqs[2];
    static double big_out[100000], big_in[100000];
    for (int i = 0; i < 100000; i++) big_out[i] = rank + i * 0.5;
    MPI_Irecv(big_in, 100000, MPI_DOUBLE, left, 9, MPI_COMM_WORLD, &reqs[0]);
    MPI_Isend(big_out, 100000, MPI_DOUBLE, right, 9, MPI_COMM_WORLD, &reqs[1]);
    int flag = 0;
    MPI_Test(&reqs[1], &flag, MPI_STATUS_IGNORE);
    MPI_Status sts[2];
    MPI_Waitall(2, reqs, sts);
    CHECK(reqs[0] == MPI_REQUEST_NULL && big_in[99999] == left + 99999 * 0.5, "isend/irecv/waitall of 800 kB");
    MPI_Request r;
    MPI_Irecv(in, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, &st);
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "receive from MPI_PROC_NULL");
}

/* now is CLOCK_MONOTONIC in seconds, one clock for every process on the
 * host (and in every network namespace), independent of gocoll. */
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* test_barrier: the last rank enters MPI_Barrier 50 ms after the others
 * and sends them the time it entered; no rank may leave the barrier
 * before then. */
static void test_barrier(void) {
    double entered = 0, left;
    if (rank == size - 1) {
        usleep(50000);
        entered = now();
    }
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    left = now();
    if (rank == size - 1) {
        for (int q = 0; q < size - 1; q++) MPI_Send(&entered, 1, MPI_DOUBLE, q, 11, MPI_COMM_WORLD);
    } else {
        MPI_Recv(&entered, 1, MPI_DOUBLE, size - 1, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    CHECK(rc == MPI_SUCCESS && left >= entered, "MPI_Barrier: left at %.6f, before the last rank entered at %.6f", left, entered);
}

static void test_collectives(void) {
    int n = 257;
    long *x = malloc(n * sizeof *x), *y = malloc(n * size * sizeof *y);
    for (int i = 0; i < n; i++) x[i] = rank + i;
    test_barrier();
    for (int root = 0; root < size; root++) {
        long b[3] = {0, 0, 0};
        if (rank == root) b[0] = 5, b[1] = root, b[2] = -1;
        MPI_Bcast(b, 3, MPI_LONG, root, MPI_COMM_WORLD);
        CHECK(b[0] == 5 && b[1] == root && b[2] == -1, "bcast from %d", root);
        long r[3];
        MPI_Reduce(b, r, 3, MPI_LONG, MPI_SUM, root, MPI_COMM_WORLD);
        if (rank == root) CHECK(r[0] == 5L * size && r[1] == (long)root * size && r[2] == -(long)size, "reduce to %d", root);
        int v = rank * 2, *all = malloc(size * sizeof *all);
        MPI_Gather(&v, 1, MPI_INT, all, 1, MPI_INT, root, MPI_COMM_WORLD);
        if (rank == root) {
            int ok = 1;
            for (int q = 0; q < size; q++) ok &= all[q] == 2 * q;
            CHECK(ok, "gather to %d", root);
        }
        free(all);
    }
    int ok = 1;
    MPI_Allreduce(x, y, n, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < n; i++) ok &= y[i] == (long)size * (size - 1) / 2 + (long)size * i;
    CHECK(ok, "allreduce");
    MPI_Allreduce_c(x, y, (MPI_Count)n, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    ok = 1;
    for (int i = 0; i < n; i++) ok &= y[i] == size - 1 + i;
    CHECK(ok, "allreduce_c");
    MPI_Allgather(x, n, MPI_LONG, y, n, MPI_LONG, MPI_COMM_WORLD);
    ok = 1;
    for (int q = 0; q < size; q++)
        for (int i = 0; i < n; i++) ok &= y[q * n + i] == q + i;
    CHECK(ok, "allgather");
    for (int i = 0; i < n * size; i++) y[i] = -7;
    MPI_Allgather_c(x, n, MPI_LONG, y, n, MPI_LONG, MPI_COMM_WORLD);
    ok = 1;
    for (int q = 0; q < size; q++)
        for (int i = 0; i < n; i++) ok &= y[q * n + i] == q + i;
    CHECK(ok, "allgather_c");
    int *counts = malloc(size * sizeof *counts), *displs = malloc(size * sizeof *displs), total = 0;
    for (int q = 0; q < size; q++) counts[q] = q % 3, displs[q] = total + q, total += counts[q] + q;
    for (int i = 0; i < total; i++) y[i] = -7;
    MPI_Allgatherv(x, counts[rank], MPI_LONG, y, counts, displs, MPI_LONG, MPI_COMM_WORLD);
    ok = 1;
    for (int q = 0; q < size; q++)
        for (int i = 0; i < counts[q]; i++) ok &= y[displs[q] + i] == q + i;
    CHECK(ok, "allgatherv with gaps between blocks");
    for (int i = 0; i < 2 * size; i++) y[i] = 1000L * rank + i;
    MPI_Reduce_scatter_block(y, x, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    ok = 1;
    for (int i = 0; i < 2; i++) ok &= x[i] == 1000L * size * (size - 1) / 2 + (long)size * (2 * rank + i);
    CHECK(ok, "reduce_scatter_block: %ld %ld", x[0], x[1]);
    for (int q = 0; q < size; q++) counts[q] = q + 1;
    long *z = malloc(size * (size + 1) / 2 * sizeof *z), mine[64];
    for (int i = 0; i < size * (size + 1) / 2; i++) z[i] = i;
    MPI_Reduce_scatter(z, mine, counts, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    int start = rank * (rank + 1) / 2;
    ok = 1;
    for (int i = 0; i <= rank; i++) ok &= mine[i] == (long)(start + i) * size;
    CHECK(ok, "reduce_scatter");
    MPI_Count ccounts[64];
    for (int q = 0; q < size; q++) ccounts[q] = q + 1;
    for (int i = 0; i <= rank; i++) mine[i] = -7;
    MPI_Reduce_scatter_c(z, mine, ccounts, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    ok = 1;
    for (int i = 0; i <= rank; i++) ok &= mine[i] == (long)(start + i) * size;
    CHECK(ok, "reduce_scatter_c");
    MPI_Reduce_scatter_block_c(z, mine, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    CHECK(mine[0] == (long)rank * size, "reduce_scatter_block_c");
    free(x); free(y); free(z); free(counts); free(displs);
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 64) MPI_Abort(MPI_COMM_WORLD, 2);
    test_environment();
    test_errors();
    test_comms();
    test_types_ops();
    test_p2p();
    test_collectives();
    MPI_Finalize();
    int fin = 0;
    MPI_Finalized(&fin);
    CHECK(fin == 1, "MPI_Finalized = %d after MPI_Finalize", fin);
    printf("rank %d: %d passed, %d failed\n", rank, passed, failed);
    fflush(stdout);
    return failed != 0;
}
