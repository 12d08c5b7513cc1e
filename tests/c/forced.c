/*
 * forced: with GOCOLL_FALLBACK=error, a forced algorithm runs every call
 * it can run and the others fail, through the C ABI.
 *
 *   forced CALL:ALG:C:N ...   CALL is allreduce, reduce_scatter,
 *                             reduce_scatter_block or allgather; ALG the
 *                             algorithm its GOCOLL_*_ALGORITHM forces; C
 *                             (N) is 1 if ALG can run the call with a
 *                             commutative (non-commutative) op, else 0
 *   forced fatal              a non-commutative MPI_Allreduce under
 *                             MPI_ERRORS_ARE_FATAL: the job must end
 *
 * Each call is larger than the C fast path takes, so gocoll's Go half
 * decides it. A call ALG can run must succeed with the right result and
 * count once in gocoll's counters for ALG and for go (gocoll_test_counter);
 * one it cannot must return MPI_ERR_ARG (MPI_ERRORS_RETURN) and run
 * nothing: no algorithm's call counted, no fallback. Every rank prints
 * its own `N passed, N failed` and exits non-zero on a failure.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gocoll_counters.h"

#include "check.h"

#define N 3000 /* ints per block: 12000 bytes */

static long long counter(const char *call, const char *what) {
    char key[96];
    snprintf(key, sizeof key, "%s.%s", call, what);
    return gocoll_test_counter(key);
}

/* keep_left: x0 op x1 = x0, so the result is rank 0's input. */
static void keep_left(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    memcpy(inout, in, *len * sizeof(int));
}

static int input(int r, long i) { return (r + 1) * 1000 + (int)(i % 7); }

/* want returns element i of the result of op over all ranks' inputs. */
static int want(int commutative, long i) {
    if (!commutative) return input(0, i);
    int s = 0;
    for (int r = 0; r < size; r++) s += input(r, i);
    return s;
}

/* run makes one call of name with op and returns its code; ok says
 * whether its result is right (on success). */
static int run(const char *name, MPI_Op op, int commutative, int *ok) {
    long total = (long)N * size;
    int *in = malloc(total * sizeof(int)), *out = malloc(total * sizeof(int)), *counts = calloc(size, sizeof(int));
    int rc = MPI_ERR_OTHER;
    *ok = 1;
    if (!strcmp(name, "allgather")) {
        for (long i = 0; i < N; i++) in[i] = input(rank, i);
        rc = MPI_Allgather(in, N, MPI_INT, out, N, MPI_INT, MPI_COMM_WORLD);
        for (long i = 0; i < total; i++) *ok &= out[i] == input(i / N, i % N);
    } else if (!strcmp(name, "allreduce")) {
        for (long i = 0; i < N; i++) in[i] = input(rank, i);
        rc = MPI_Allreduce(in, out, N, MPI_INT, op, MPI_COMM_WORLD);
        for (long i = 0; i < N; i++) *ok &= out[i] == want(commutative, i);
    } else {
        long off = 0, mine = 0;
        for (int r = 0; r < size; r++) {
            counts[r] = N - r; /* irregular for reduce_scatter */
            if (!strcmp(name, "reduce_scatter_block")) counts[r] = N;
            if (r < rank) off += counts[r];
        }
        mine = counts[rank];
        long all = off;
        for (int r = rank; r < size; r++) all += counts[r];
        for (long i = 0; i < all; i++) in[i] = input(rank, i);
        if (!strcmp(name, "reduce_scatter"))
            rc = MPI_Reduce_scatter(in, out, counts, MPI_INT, op, MPI_COMM_WORLD);
        else
            rc = MPI_Reduce_scatter_block(in, out, N, MPI_INT, op, MPI_COMM_WORLD);
        for (long i = 0; i < mine; i++) *ok &= out[i] == want(commutative, off + i);
    }
    free(in), free(out), free(counts);
    return rc;
}

static const char *mpiname(const char *name) {
    if (!strcmp(name, "allreduce")) return "MPI_Allreduce";
    if (!strcmp(name, "reduce_scatter")) return "MPI_Reduce_scatter";
    if (!strcmp(name, "reduce_scatter_block")) return "MPI_Reduce_scatter_block";
    return "MPI_Allgather";
}

/* check makes one call and checks its outcome and counters. */
static void check(const char *name, const char *alg, MPI_Op op, int commutative, int can) {
    const char *call = mpiname(name);
    long long go0 = counter(call, "go"), alg0 = counter(call, alg), fb0 = counter(call, "fallback");
    long long fast0 = counter(call, "fast");
    CHECK(go0 >= 0 && alg0 >= 0 && fb0 >= 0 && fast0 >= 0, "%s: gocoll_test_counter knows %s.go, .%s, .fallback and .fast",
          call, call, alg);
    int ok, rc = run(name, op, commutative, &ok), class = -1;
    MPI_Error_class(rc, &class);
    long long dgo = counter(call, "go") - go0, dalg = counter(call, alg) - alg0, dfb = counter(call, "fallback") - fb0;
    long long dfast = counter(call, "fast") - fast0;
    /* Forced shm may run in the engine's C half (the fast path, up to
     * GOCOLL_SHM_MAX bytes): the same engine, counted as fast instead. */
    if (!strcmp(alg, "shm") && dfast == 1 && dgo == 0 && dalg == 0) dalg = dgo = 1, dfast = 0;
    const char *kind = commutative ? "MPI_SUM" : "a non-commutative op";
    if (can) {
        CHECK(rc == MPI_SUCCESS && ok, "%s with %s, forced %s: code %d, result %s", call, kind, alg, rc, ok ? "right" : "wrong");
        CHECK(dalg == 1 && dgo == 1 && dfb == 0 && dfast == 0,
              "%s with %s, forced %s: counted %s %lld, go %lld, fallback %lld, fast %lld; want 1, 1, 0, 0", call, kind, alg, alg,
              dalg, dgo, dfb, dfast);
    } else {
        CHECK(class == MPI_ERR_ARG, "%s with %s, forced %s, which cannot run it: code %d (class %d), want MPI_ERR_ARG", call, kind, alg, rc, class);
        CHECK(dgo == 0 && dfb == 0 && dfast == 0, "%s with %s, refused: counted go %lld, fallback %lld, fast %lld; want nothing run",
              call, kind, dgo, dfb, dfast);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Op left;
    MPI_Op_create(keep_left, 0, &left);
    if (argc == 2 && !strcmp(argv[1], "fatal")) {
        int ok;
        run("allreduce", left, 0, &ok); /* the default handler ends the job */
        printf("rank %d: the refused call returned\n", rank);
        MPI_Finalize();
        return 1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (int i = 1; i < argc; i++) {
        char name[64], alg[64];
        int c, n;
        if (sscanf(argv[i], "%63[a-z_]:%63[a-z_]:%d:%d", name, alg, &c, &n) != 4) {
            CHECK(0, "bad argument %s", argv[i]);
            continue;
        }
        check(name, alg, MPI_SUM, 1, c);
        if (strcmp(name, "allgather")) check(name, alg, left, 0, n);
    }
    MPI_Op_free(&left);
    printf("%d passed, %d failed\n", passed, failed);
    MPI_Finalize();
    return failed != 0;
}
