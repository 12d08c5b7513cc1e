/*
 * paths.c: which path each call takes under LD_PRELOAD, read from
 * libgocoll-preload.so's counters (gocoll_test_counter, found with
 * dlsym: the program fails without the library). Built unchanged with
 * mpicc.openmpi and mpicc.mpich, run by tests/preload/paths_test.go with
 * the tuning file it writes:
 *
 *   every collective, up to 256 bytes: native (the host MPI)
 *   allreduce from 257 bytes:   ring, else recursive_doubling (non-commutative ops)
 *   reduce_scatter(_block):     ring, else pairwise
 *   allgather from 257 bytes:   shm, else native (ranks on several hosts)
 *
 * Each phase makes N calls of one kind and checks how many of them gocoll
 * ran and with which algorithm, how many went to the host MPI, how many
 * fell back from a forced algorithm, and how many were decided from the
 * preload's per-communicator decision cache (none under
 * GOCOLL_DEBUG=info, which bypasses it), how many of those host calls
 * matched the thread's last host call of the collective and went
 * straight to the host (remembered: a small call repeated does after its
 * first; a call on a new communicator, after a setup, or with a
 * user-defined op never does), and every result.
 *
 *   paths tuned    the tuner decides; with PRELOAD_TEST_HOSTS set, the
 *                  ranks are on emulated hosts and large allgathers go
 *                  to the host MPI, although the tuner, before the
 *                  communicator is set up, assumes one host
 *   paths forced   GOCOLL_<COLLECTIVE>_ALGORITHM names an algorithm per
 *                  collective (read here): it runs every call, by name;
 *                  if allreduce's is ring, non-commutative calls fall
 *                  back to the tuner's choice (GOCOLL_FALLBACK=silent)
 *   paths error    GOCOLL_ALLREDUCE_ALGORITHM=ring, GOCOLL_FALLBACK=error:
 *                  a non-commutative allreduce fails with MPI_ERR_ARG
 *                  through MPI_ERRORS_RETURN, and runs nowhere
 *
 * Every rank prints `rank R: N passed, N failed` and exits 1 on a failure
 * of its own; before MPI_Finalize each prints its counters' totals
 * (`paths: rank R: query: MPI_Allreduce go=G fallback=F host=H cached=C`)
 * on stderr, which the test compares with GOCOLL_REPORT's lines. Calls
 * the shared-memory engine's C half ran (the counters' fast) count here
 * as the shm calls gocoll ran that they are, in go and in shm; a line
 * of their own (`paths: rank R: engine: MPI_Allgather fast=F
 * remembered=M`) says how many, and how many of those matched the
 * thread's last calls and skipped the checks.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 5
#define SMALL 2   /* ints: 8 bytes, native */
#define LARGE 512 /* ints: 2048 bytes, gocoll */

static int wrank, wsize, debug, hosts;
static long passed, failed;
static long long (*counter)(const char *);

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (cond) passed++;                                                \
        else {                                                             \
            failed++;                                                      \
            fprintf(stderr, "FAIL rank %d: ", wrank);                      \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, "\n");                                         \
        }                                                                  \
    } while (0)

/* ---- the counters ---- */

enum { GO, ALG, FALLBACK, HOST, CACHED, REMEMBERED, NK };
static const char *knames[NK] = {"go", "alg", "fallback", "host", "cached", "remembered"};

struct snap {
    const char *call, *alg;
    long long v[NK];
};

static long long get(const char *call, const char *name) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", call, name);
    return counter(key);
}

/* A fast call is a small shm call the shared-memory engine's C half ran
 * without entering Go: a call gocoll ran with shm, counted apart. */
static struct snap snap(const char *call, const char *alg) {
    struct snap s = {call, alg, {0}};
    long long fast = get(call, "fast");
    s.v[GO] = get(call, "go") + fast;
    s.v[ALG] = alg ? get(call, alg) + (strcmp(alg, "shm") ? 0 : fast) : 0;
    s.v[FALLBACK] = get(call, "fallback");
    s.v[HOST] = get(call, "host");
    s.v[CACHED] = get(call, "cached");
    s.v[REMEMBERED] = get(call, "remembered");
    return s;
}

/* remembered checks what a phase's calls did to the counters since
 * before: go calls ran in gocoll, all with before.alg; fb fell back; host
 * went to the host MPI; cached were decided from the cache (none with
 * GOCOLL_DEBUG=info); rem of those were host calls that matched the
 * thread's last one (none with GOCOLL_DEBUG=info). moved is remembered
 * with rem 0. */
static void remembered(const char *phase, struct snap before, long go, long fb, long host, long cached, long rem) {
    struct snap after = snap(before.call, before.alg);
    long want[NK] = {go, before.alg ? go : 0, fb, host, debug ? 0 : cached, debug ? 0 : rem};
    for (int k = 0; k < NK; k++) {
        long long d = after.v[k] - before.v[k];
        CHECK(d == want[k], "%s: %s.%s moved by %lld, want %ld", phase, before.call,
              k == ALG ? (before.alg ? before.alg : "(none)") : knames[k], d, want[k]);
    }
}

static void moved(const char *phase, struct snap before, long go, long fb, long host, long cached) {
    remembered(phase, before, go, fb, host, cached, 0);
}

/* ---- the calls, each checking its result ---- */

static void noncommutative(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    /* Keep the left operand, combined with the right: (a, b) -> a * 3 + b
     * on ints, which is not commutative. */
    int *a = in, *b = inout;
    for (int i = 0; i < *len; i++) b[i] = a[i] * 3 + b[i];
}

static MPI_Op nc_op;

/* allreduce makes one MPI_Allreduce of n ints; with nc the
 * non-commutative op (reduced in rank order). It returns the call's rc. */
static int allreduce(MPI_Comm comm, int n, int nc, int check) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *in = malloc(sizeof(int) * n), *out = malloc(sizeof(int) * n);
    for (int i = 0; i < n; i++) in[i] = rank + i % 7, out[i] = -1;
    int rc = MPI_Allreduce(in, out, n, MPI_INT, nc ? nc_op : MPI_SUM, comm);
    if (check) {
        int bad = -1;
        for (int i = 0; i < n && bad < 0; i++) {
            int want = 0;
            if (nc) {
                want = i % 7; /* rank 0's */
                for (int q = 1; q < size; q++) want = want * 3 + q + i % 7;
            } else {
                for (int q = 0; q < size; q++) want += q + i % 7;
            }
            if (out[i] != want) bad = i;
        }
        CHECK(rc == MPI_SUCCESS && bad < 0, "MPI_Allreduce n=%d nc=%d: rc %d, element %d wrong", n, nc, rc, bad);
    }
    free(in), free(out);
    return rc;
}

static void allgather(MPI_Comm comm, int n) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *in = malloc(sizeof(int) * n), *out = malloc(sizeof(int) * n * size);
    for (int i = 0; i < n; i++) in[i] = rank * 1000 + i;
    int rc = MPI_Allgather(in, n, MPI_INT, out, n, MPI_INT, comm), bad = -1;
    for (int i = 0; i < n * size && bad < 0; i++)
        if (out[i] != (i / n) * 1000 + i % n) bad = i;
    CHECK(rc == MPI_SUCCESS && bad < 0, "MPI_Allgather n=%d: rc %d, element %d wrong", n, rc, bad);
    free(in), free(out);
}

/* reduce_scatter makes one MPI_Reduce_scatter_block (block) or
 * MPI_Reduce_scatter of n ints per rank, summing. */
static void reduce_scatter(MPI_Comm comm, int n, int block) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *in = malloc(sizeof(int) * n * size), *out = malloc(sizeof(int) * n), *counts = malloc(sizeof(int) * size);
    for (int i = 0; i < n * size; i++) in[i] = rank + i;
    for (int q = 0; q < size; q++) counts[q] = n;
    int rc = block ? MPI_Reduce_scatter_block(in, out, n, MPI_INT, MPI_SUM, comm)
                   : MPI_Reduce_scatter(in, out, counts, MPI_INT, MPI_SUM, comm);
    int bad = -1;
    for (int i = 0; i < n && bad < 0; i++)
        if (out[i] != size * (size - 1) / 2 + size * (rank * n + i)) bad = i;
    CHECK(rc == MPI_SUCCESS && bad < 0, "%s n=%d: rc %d, element %d wrong",
          block ? "MPI_Reduce_scatter_block" : "MPI_Reduce_scatter", n, rc, bad);
    free(in), free(out), free(counts);
}

/* A derived datatype: the host's, decided before the cache. */
static void sum2(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    for (int i = 0; i < 2 * *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

static void derived(MPI_Comm comm) {
    MPI_Datatype two;
    MPI_Op op;
    MPI_Type_contiguous(2, MPI_INT, &two);
    MPI_Type_commit(&two);
    MPI_Op_create(sum2, 1, &op);
    int in[4] = {wrank, 1, 2, 3}, out[4];
    int rc = MPI_Allreduce(in, out, 2, two, op, comm);
    CHECK(rc == MPI_SUCCESS && out[0] == wsize * (wsize - 1) / 2 && out[3] == 3 * wsize, "derived datatype: rc %d", rc);
    MPI_Op_free(&op);
    MPI_Type_free(&two);
}

/* ---- the modes ---- */

static const char *forced(const char *coll) {
    char var[64];
    snprintf(var, sizeof var, "GOCOLL_%s_ALGORITHM", coll);
    const char *v = getenv(var);
    return v && *v ? v : NULL;
}

/* tuned: the tuning file decides. */
static void tuned(void) {
    struct snap b;
    MPI_Comm first, d;

    /* A communicator whose first call is a large allgather: before the
     * setup the tuner assumes one host and says shm; gocoll sets the
     * communicator up, forgets what the cache held and asks again. On one
     * host shm runs every call; on several (emulated) hosts the tuner now
     * says native, for this call too, and the cache holds native from the
     * second call on. Either way the first two calls ask the tuner. */
    MPI_Comm_dup(MPI_COMM_WORLD, &first);
    b = snap("MPI_Allgather", "shm");
    for (int i = 0; i < N; i++) allgather(first, LARGE);
    if (hosts) remembered("large allgather, first calls, emulated hosts", b, 0, 0, N, N - 2, N - 2);
    else moved("large allgather, first calls", b, N, 0, 0, N - 2);
    MPI_Comm_free(&first);

    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    /* Before the setup: the host's calls, from the cache after the first,
     * each the thread's last host call again. */
    b = snap("MPI_Allreduce", NULL);
    for (int i = 0; i < N; i++) allreduce(d, SMALL, 0, 1);
    remembered("small allreduce before setup", b, 0, 0, N, N - 1, N - 1);
    /* The first large call sets d up, which empties its cache: the second
     * asks the tuner again, the others are cached. */
    b = snap("MPI_Allreduce", "ring");
    for (int i = 0; i < N; i++) allreduce(d, LARGE, 0, 1);
    moved("large allreduce, setting up", b, N, 0, 0, N - 2);
    /* The small calls again: the setup emptied the cache, so the first
     * asks the tuner once more, although it is the thread's last host
     * call (the setup voids what threads remember). */
    b = snap("MPI_Allreduce", NULL);
    for (int i = 0; i < N; i++) allreduce(d, SMALL, 0, 1);
    remembered("small allreduce after setup", b, 0, 0, N, N - 1, N - 1);
    /* Non-commutative: ring cannot run it, the next rule's algorithm does
     * (no forced algorithm: no fallback). */
    b = snap("MPI_Allreduce", "recursive_doubling");
    for (int i = 0; i < N; i++) allreduce(d, LARGE, 1, 1);
    moved("large non-commutative allreduce", b, N, 0, 0, N - 1);
    /* Derived datatypes go to the host before the cache is consulted. */
    b = snap("MPI_Allreduce", NULL);
    for (int i = 0; i < 2; i++) derived(d);
    moved("derived datatype", b, 0, 0, 2, 0);

    b = snap("MPI_Allgather", "shm");
    for (int i = 0; i < N; i++) allgather(d, LARGE);
    if (hosts) remembered("large allgather, emulated hosts", b, 0, 0, N, N - 1, N - 1);
    else moved("large allgather", b, N, 0, 0, N - 1);
    b = snap("MPI_Allgather", NULL);
    for (int i = 0; i < N; i++) allgather(d, SMALL);
    remembered("small allgather", b, 0, 0, N, N - 1, N - 1);

    for (int block = 0; block < 2; block++) {
        const char *call = block ? "MPI_Reduce_scatter_block" : "MPI_Reduce_scatter";
        b = snap(call, "ring");
        for (int i = 0; i < N; i++) reduce_scatter(d, LARGE, block);
        moved(block ? "large reduce_scatter_block" : "large reduce_scatter", b, N, 0, 0, N - 1);
        b = snap(call, NULL);
        for (int i = 0; i < N; i++) reduce_scatter(d, 1, block);
        remembered(block ? "small reduce_scatter_block" : "small reduce_scatter", b, 0, 0, N, N - 1, N - 1);
    }
    MPI_Comm_free(&d);

    /* Communicators freed and made again, whose handles the host MPI
     * reuses (both do): each new one is a new communicator to gocoll,
     * whatever the preload remembers of the last one a call was made on.
     * Its first small call asks the tuner (nothing cached), its first
     * large one sets it up and runs in gocoll. */
    b = snap("MPI_Allreduce", "ring");
    int reused = 0;
    MPI_Comm prev = MPI_COMM_NULL;
    for (int i = 0; i < N; i++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &d);
        reused += d == prev;
        allreduce(d, SMALL, 0, 1);
        allreduce(d, LARGE, 0, 1);
        prev = d;
        MPI_Comm_free(&d);
    }
    moved("communicators freed and made again", b, N, 0, N, 0);
    if (wrank == 0) fprintf(stderr, "paths: %d of %d new communicators had the freed one's handle\n", reused, N - 1);

    /* Two small sizes in turn, 8 and 32 bytes: each keeps its decision
     * in the cache, so only the first call of each asks the tuner, and
     * the thread remembers both. */
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    b = snap("MPI_Allreduce", NULL);
    for (int i = 0; i < N; i++) {
        allreduce(d, SMALL, 0, 1);
        allreduce(d, 4 * SMALL, 0, 1);
    }
    remembered("two small sizes in turn", b, 0, 0, 2 * N, 2 * N - 2, 2 * N - 2);
    MPI_Comm_free(&d);
}

/* forced: every call of a collective runs its forced algorithm, small
 * ones too (which the tuner gives the host), by name. */
static void forced_mode(void) {
    const char *ar = forced("ALLREDUCE"), *ag = forced("ALLGATHER"), *rs = forced("REDUCE_SCATTER"),
               *rsb = forced("REDUCE_SCATTER_BLOCK");
    CHECK(ar && ag && rs && rsb, "paths forced: set GOCOLL_<COLLECTIVE>_ALGORITHM for the four collectives");
    if (!(ar && ag && rs && rsb)) return;
    struct snap b;
    MPI_Comm d;
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    /* The first call sets d up and empties the cache. */
    b = snap("MPI_Allreduce", ar);
    for (int i = 0; i < N; i++) allreduce(d, SMALL, 0, 1);
    moved("forced small allreduce", b, N, 0, 0, N - 2);
    b = snap("MPI_Allreduce", ar);
    for (int i = 0; i < N; i++) allreduce(d, LARGE, 0, 1);
    moved("forced large allreduce", b, N, 0, 0, N - 1);
    if (!strcmp(ar, "ring")) {
        /* ring needs a commutative op: the tuner's choice runs instead,
         * gocoll's for a large call, the host's for a small one. */
        b = snap("MPI_Allreduce", "recursive_doubling");
        for (int i = 0; i < N; i++) allreduce(d, LARGE, 1, 1);
        moved("forced ring, large non-commutative allreduce", b, N, N, 0, N - 1);
        b = snap("MPI_Allreduce", NULL);
        for (int i = 0; i < N; i++) allreduce(d, SMALL, 1, 1);
        moved("forced ring, small non-commutative allreduce", b, 0, N, N, N - 1);
    }
    b = snap("MPI_Allgather", ag);
    for (int i = 0; i < N; i++) allgather(d, LARGE);
    moved("forced large allgather", b, N, 0, 0, N - 1);
    b = snap("MPI_Allgather", ag);
    for (int i = 0; i < N; i++) allgather(d, SMALL);
    moved("forced small allgather", b, N, 0, 0, N - 1);
    for (int block = 0; block < 2; block++) {
        const char *call = block ? "MPI_Reduce_scatter_block" : "MPI_Reduce_scatter", *alg = block ? rsb : rs;
        b = snap(call, alg);
        for (int i = 0; i < N; i++) reduce_scatter(d, LARGE, block);
        moved(block ? "forced large reduce_scatter_block" : "forced large reduce_scatter", b, N, 0, 0, N - 1);
        b = snap(call, alg);
        for (int i = 0; i < N; i++) reduce_scatter(d, 1, block);
        moved(block ? "forced small reduce_scatter_block" : "forced small reduce_scatter", b, N, 0, 0, N - 1);
    }
    MPI_Comm_free(&d);
}

/* error: GOCOLL_ALLREDUCE_ALGORITHM=ring with GOCOLL_FALLBACK=error. */
static void error_mode(void) {
    struct snap b;
    MPI_Comm d;
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN);
    b = snap("MPI_Allreduce", "ring");
    for (int i = 0; i < N; i++) allreduce(d, LARGE, 0, 1);
    moved("forced ring, commutative", b, N, 0, 0, N - 2);
    /* ring cannot run a non-commutative op: each call fails, through the
     * communicator's error handler, and nothing runs it. */
    b = snap("MPI_Allreduce", NULL);
    for (int i = 0; i < N; i++) {
        int rc = allreduce(d, LARGE, 1, 0), cls = -1;
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_ARG, "forced ring, non-commutative, GOCOLL_FALLBACK=error: rc %d (class %d), want MPI_ERR_ARG", rc, cls);
    }
    moved("forced ring, non-commutative, refused", b, 0, 0, 0, 0);
    /* The communicator still works. */
    b = snap("MPI_Allreduce", "ring");
    for (int i = 0; i < N; i++) allreduce(d, LARGE, 0, 1);
    moved("forced ring, commutative, after the refusals", b, N, 0, 0, N);
    MPI_Comm_free(&d);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "tuned";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    const char *d = getenv("GOCOLL_DEBUG");
    debug = d && !strcasecmp(d, "info");
    hosts = getenv("PRELOAD_TEST_HOSTS") != NULL;
    counter = (long long (*)(const char *))dlsym(RTLD_DEFAULT, "gocoll_test_counter");
    CHECK(counter != NULL, "gocoll_test_counter not found: run with libgocoll-preload.so preloaded");
    if (counter) {
        CHECK(counter("MPI_Allreduce.nosuch") == -1 && counter("MPI_Alltoall.go") == -1 && counter("") == -1,
              "gocoll_test_counter: unknown keys are not -1");
        CHECK(counter("MPI_Allreduce.rabenseifner") == 0 && counter("MPI_Allgather.fallback") == 0,
              "gocoll_test_counter: counters not zero before any call");
        MPI_Op_create(noncommutative, 0, &nc_op);
        if (!strcmp(mode, "tuned")) tuned();
        else if (!strcmp(mode, "forced")) forced_mode();
        else if (!strcmp(mode, "error")) error_mode();
        else CHECK(0, "unknown mode %s", mode);
        MPI_Op_free(&nc_op);
        static const char *calls[] = {"MPI_Allreduce", "MPI_Reduce_scatter", "MPI_Reduce_scatter_block", "MPI_Allgather"};
        for (int i = 0; i < 4; i++)
        {
            fprintf(stderr, "paths: rank %d: query: %s go=%lld fallback=%lld host=%lld cached=%lld\n", wrank, calls[i],
                    get(calls[i], "go") + get(calls[i], "fast"), get(calls[i], "fallback"), get(calls[i], "host"),
                    get(calls[i], "cached"));
            fprintf(stderr, "paths: rank %d: engine: %s fast=%lld remembered=%lld\n", wrank, calls[i],
                    get(calls[i], "fast"), get(calls[i], "fast_remembered"));
        }
    }
    /* Each rank's own verdict; the host MPI's MPI_Reduce (not one of
     * gocoll's collectives) sums them for rank 0's line. */
    long mine[2] = {passed, failed}, all[2] = {0, 0};
    MPI_Reduce(mine, all, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    printf("rank %d: %ld passed, %ld failed\n", wrank, passed, failed);
    if (wrank == 0) printf("%ld passed, %ld failed\n", all[0], all[1]);
    fflush(stdout);
    MPI_Finalize();
    return failed ? 1 : 0;
}
