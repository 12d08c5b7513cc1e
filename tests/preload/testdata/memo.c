/*
 * memo.c: a remembered decision holds only for the communicator,
 * datatype and op it was made for. The preload keeps its decisions in C
 * (a communicator's cache, per collective and size class) and each
 * thread its last host calls (the memos, matched by communicator,
 * datatype, op and count); a call that differs in any of them must be
 * decided afresh. Run by tests/preload/memo_test.go at 2 ranks with a
 * tuning file that gives every MPI_Allreduce on one rank to gocoll
 * (ring) and on more to the host, and GOCOLL_PRELOAD_EXCLUDE keeping
 * MPI_SUM on MPI_FLOAT and MPI_MAX on MPI_INT from the host (so gocoll
 * runs them), each phase repeats a call whose predecessor was
 * remembered, changing one thing, and checks from the library's
 * counters (gocoll_test_counter) where its calls went and that each
 * result is right:
 *
 *   datatype  MPI_INT then MPI_FLOAT, same count, op and communicator
 *   op        MPI_SUM then MPI_MAX on MPI_INT
 *   comm      a one-rank communicator freed, a two-rank one made (its
 *             handle may be the freed one's), then a one-rank one again
 *
 * Every rank prints `rank R: N passed, N failed`; rank 0's line is the
 * last on stdout.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define N 6
#define COUNT 8

static int rank, size;
static long passed, failed;
static long long (*counter)(const char *);

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (cond) passed++;                                               \
        else {                                                            \
            failed++;                                                     \
            fprintf(stderr, "FAIL rank %d: ", rank);                      \
            fprintf(stderr, __VA_ARGS__);                                 \
            fprintf(stderr, "\n");                                        \
        }                                                                 \
    } while (0)

/* where: the calls the host ran, gocoll ran (in Go or in the engine's C
 * half), and the host calls that matched a thread's memo. */
struct where {
    long long host, gocoll, remembered;
};

static struct where now(void) {
    struct where w = {counter("MPI_Allreduce.host"),
                      counter("MPI_Allreduce.go") + counter("MPI_Allreduce.fast"),
                      counter("MPI_Allreduce.remembered")};
    return w;
}

/* calls makes N allreduces of COUNT elements on comm and checks each. */
static void calls(MPI_Comm comm, MPI_Datatype dt, MPI_Op op, const char *what) {
    int p;
    MPI_Comm_size(comm, &p);
    for (int i = 0; i < N; i++) {
        if (dt == MPI_INT) {
            int s[COUNT], r[COUNT];
            for (int k = 0; k < COUNT; k++) s[k] = rank + k + i;
            MPI_Allreduce(s, r, COUNT, dt, op, comm);
            for (int k = 0; k < COUNT; k++) {
                int want = op == MPI_SUM ? p * (k + i) + (p == 1 ? rank : p * (p - 1) / 2) : (p == 1 ? rank : p - 1) + k + i;
                CHECK(r[k] == want, "%s: call %d element %d: %d, want %d", what, i, k, r[k], want);
            }
        } else {
            float s[COUNT], r[COUNT];
            for (int k = 0; k < COUNT; k++) s[k] = (float)(rank + k + i);
            MPI_Allreduce(s, r, COUNT, dt, op, comm);
            for (int k = 0; k < COUNT; k++) {
                float want = (float)(p * (k + i) + (p == 1 ? rank : p * (p - 1) / 2));
                CHECK(r[k] == want, "%s: call %d element %d: %g, want %g", what, i, k, r[k], want);
            }
        }
    }
}

/* phase runs calls and checks where they went: all to the host
 * (remembered: how many of them matched a memo, -1 for any) or all to
 * gocoll. */
static void phase(MPI_Comm comm, MPI_Datatype dt, MPI_Op op, int host, int remembered, const char *what) {
    struct where a = now();
    calls(comm, dt, op, what);
    struct where b = now();
    long long h = b.host - a.host, g = b.gocoll - a.gocoll, m = b.remembered - a.remembered;
    if (host) {
        CHECK(h == N && g == 0, "%s: host ran %lld and gocoll %lld of %d calls, want all on the host", what, h, g, N);
        CHECK(remembered < 0 || m == remembered, "%s: %lld host calls remembered, want %d", what, m, remembered);
    } else {
        CHECK(g == N && h == 0, "%s: gocoll ran %lld and the host %lld of %d calls, want all in gocoll", what, g, h, N);
    }
    if (rank == 0) printf("memo: %s: host=%lld gocoll=%lld remembered=%lld\n", what, h, g, m);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    counter = (long long (*)(const char *))dlsym(RTLD_DEFAULT, "gocoll_test_counter");
    if (!counter || size < 2) {
        fprintf(stderr, "memo: needs libgocoll-preload.so and 2 or more ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    /* Datatype: the memo of MPI_INT's host calls must not take
     * MPI_FLOAT's (excluded: gocoll's), nor gocoll's MPI_FLOAT calls the
     * MPI_INT ones after (whose first is decided afresh: gocoll's first
     * call set the communicator up, which voids every memo). */
    phase(MPI_COMM_WORLD, MPI_INT, MPI_SUM, 1, N - 1, "datatype: MPI_INT MPI_SUM");
    phase(MPI_COMM_WORLD, MPI_FLOAT, MPI_SUM, 0, 0, "datatype: MPI_FLOAT MPI_SUM");
    phase(MPI_COMM_WORLD, MPI_INT, MPI_SUM, 1, N - 1, "datatype: MPI_INT MPI_SUM again");

    /* Op: MPI_MAX on MPI_INT is excluded. */
    phase(MPI_COMM_WORLD, MPI_INT, MPI_MAX, 0, 0, "op: MPI_INT MPI_MAX");
    phase(MPI_COMM_WORLD, MPI_INT, MPI_SUM, 1, N, "op: MPI_INT MPI_SUM again");

    /* Communicator: one rank (gocoll), freed; two ranks (the host), whose
     * handle may be the freed one's; freed; one rank again. */
    MPI_Comm one, two, again, was_one, was_two = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, rank, 0, &one);
    phase(one, MPI_INT, MPI_SUM, 0, 0, "comm: one rank");
    was_one = one;
    MPI_Comm_free(&one);
    MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, 0, &two);
    if (two != MPI_COMM_NULL) {
        if (rank == 0) printf("memo: comm: the two-rank communicator %s the freed one's handle\n", two == was_one ? "has" : "does not have");
        phase(two, MPI_INT, MPI_SUM, 1, N - 1, "comm: two ranks");
        was_two = two;
        MPI_Comm_free(&two);
    }
    MPI_Comm_split(MPI_COMM_WORLD, rank, 0, &again);
    if (rank == 0) printf("memo: comm: the new one-rank communicator %s the freed two-rank one's handle\n", again == was_two ? "has" : "does not have");
    phase(again, MPI_INT, MPI_SUM, 0, 0, "comm: one rank again");
    MPI_Comm_free(&again);
    phase(MPI_COMM_WORLD, MPI_INT, MPI_SUM, 1, -1, "comm: MPI_COMM_WORLD again");

    printf("rank %d: %ld passed, %ld failed\n", rank, passed, failed);
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("%ld passed, %ld failed\n", passed, failed);
    MPI_Finalize();
    return failed != 0;
}
