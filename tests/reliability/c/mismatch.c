/*
 * mismatch: with GOCOLL_CHECK=1, collectives whose arguments disagree
 * between ranks fail on every rank (instead of hanging or corrupting
 * memory), and the communicator still works afterwards.
 *
 *   mismatch            every case below with MPI_ERRORS_RETURN; each
 *                       rank prints its own `rank R: N passed, N failed`
 *                       and exits non-zero if any of its checks failed
 *   mismatch -fatal C   case C alone with MPI_ERRORS_ARE_FATAL: gocoll
 *                       prints the mismatch and ends the job
 *   mismatch -deadlock  the last rank calls MPI_Allreduce on a dup of
 *                       MPI_COMM_WORLD, the others on MPI_COMM_WORLD: no
 *                       message matches, which no signature check can
 *                       see; every rank must still fail within the
 *                       timeout (MPI_ERRORS_ARE_FATAL)
 *
 * In each case the last rank makes the odd call, the others the same
 * reference call; every rank must get an error, of class MPI_ERR_OTHER
 * (the mismatch), except a rank whose own arguments are invalid, which
 * gets its own class. Then an allreduce on the same communicator must
 * give the right answer.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, passed, failed;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (cond) passed++;                                                \
        else {                                                             \
            failed++;                                                      \
            fprintf(stderr, "rank %d: FAIL ", rank);                       \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, "\n");                                         \
        }                                                                  \
    } while (0)

#define N 10
static int in[4 * N * 64], out[4 * N * 64], counts[64], displs[64];

static void user_sum(void *a, void *b, int *len, MPI_Datatype *dt) {
    (void)dt;
    for (int i = 0; i < *len; i++) ((int *)b)[i] += ((int *)a)[i];
}

/* run makes case c's call: the reference one, or the odd one on the
 * last rank. It returns the MPI return code and sets *own to the class
 * the odd rank must get (MPI_ERR_OTHER unless its arguments are invalid). */
static int run(const char *c, MPI_Comm comm, int *own) {
    int odd = rank == size - 1;
    *own = MPI_ERR_OTHER;
    for (int q = 0; q < size; q++) counts[q] = N, displs[q] = q * N;
    if (!strcmp(c, "count"))
        return MPI_Allreduce(in, out, odd ? N - 1 : N, MPI_INT, MPI_SUM, comm);
    if (!strcmp(c, "op"))
        return MPI_Allreduce(in, out, N, MPI_INT, odd ? MPI_MAX : MPI_SUM, comm);
    if (!strcmp(c, "user-op")) {
        MPI_Op op;
        MPI_Op_create(user_sum, 1, &op);
        int rc = MPI_Allreduce(in, out, N, MPI_INT, odd ? op : MPI_SUM, comm);
        MPI_Op_free(&op);
        return rc;
    }
    if (!strcmp(c, "datatype")) /* same size, other type: would go unnoticed */
        return MPI_Allreduce(in, out, N, odd ? MPI_FLOAT : MPI_INT, MPI_SUM, comm);
    if (!strcmp(c, "collective"))
        return odd ? MPI_Allgather(in, N, MPI_INT, out, N, MPI_INT, comm)
                   : MPI_Allreduce(in, out, N, MPI_INT, MPI_SUM, comm);
    if (!strcmp(c, "barrier"))
        return odd ? MPI_Barrier(comm) : MPI_Allreduce(in, out, N, MPI_INT, MPI_SUM, comm);
    if (!strcmp(c, "in-place"))
        return MPI_Allreduce(odd ? MPI_IN_PLACE : in, out, N, MPI_INT, MPI_SUM, comm);
    if (!strcmp(c, "bcast-root"))
        return MPI_Bcast(out, N, MPI_INT, odd ? 1 % size : 0, comm);
    if (!strcmp(c, "reduce-root"))
        return MPI_Reduce(in, out, N, MPI_INT, MPI_SUM, odd ? 1 % size : 0, comm);
    if (!strcmp(c, "rsb-count"))
        return MPI_Reduce_scatter_block(in, out, odd ? N + 1 : N, MPI_INT, MPI_SUM, comm);
    if (!strcmp(c, "rs-recvcounts")) { /* same total, other split */
        if (odd && size > 1) counts[0]++, counts[1]--;
        if (odd && size == 1) counts[0]++;
        return MPI_Reduce_scatter(in, out, counts, MPI_INT, MPI_SUM, comm);
    }
    if (!strcmp(c, "allgatherv-recvcounts")) {
        if (odd) counts[0]++;
        for (int q = 1; q < size; q++) displs[q] = displs[q - 1] + counts[q - 1];
        return MPI_Allgatherv(in, counts[rank], MPI_INT, out, counts, displs, MPI_INT, comm);
    }
    if (!strcmp(c, "invalid-count")) {
        if (odd) *own = MPI_ERR_COUNT;
        return MPI_Allreduce(in, out, odd ? -1 : N, MPI_INT, MPI_SUM, comm);
    }
    if (!strcmp(c, "invalid-op")) {
        if (odd) *own = MPI_ERR_OP;
        return MPI_Allreduce(in, out, N, MPI_INT, odd ? MPI_LAND + 0x1000 : MPI_SUM, comm);
    }
    fprintf(stderr, "mismatch: unknown case %s\n", c);
    exit(64);
}

static const char *cases[] = {"count", "op", "user-op", "datatype", "collective", "barrier", "in-place",
                              "bcast-root", "reduce-root", "rsb-count", "rs-recvcounts",
                              "allgatherv-recvcounts", "invalid-count", "invalid-op"};

/* works checks that comm still gives right answers. */
static void works(MPI_Comm comm, const char *after) {
    int x = rank + 1, sum = 0, rc = MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, comm);
    CHECK(rc == MPI_SUCCESS && sum == size * (size + 1) / 2, "allreduce after %s: rc %d, sum %d", after, rc, sum);
}

int main(int argc, char **argv) {
    const char *fatal = NULL;
    int deadlock = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-fatal") && i + 1 < argc) fatal = argv[++i];
        else if (!strcmp(argv[i], "-deadlock")) deadlock = 1;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < (int)(sizeof in / sizeof *in); i++) in[i] = rank + i;
    if (deadlock) {
        MPI_Comm dup;
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        printf("rank %d: calling\n", rank);
        fflush(stdout);
        MPI_Allreduce(in, out, 1000, MPI_INT, MPI_SUM, rank == size - 1 ? dup : MPI_COMM_WORLD);
        printf("rank %d: still running after a deadlock\n", rank);
        MPI_Finalize();
        return 1;
    }
    if (fatal) {
        int own;
        run(fatal, MPI_COMM_WORLD, &own);
        printf("rank %d: still running after a mismatched %s\n", rank, fatal);
        MPI_Finalize();
        return 1;
    }
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm comms[2] = {MPI_COMM_WORLD, dup};
    for (int k = 0; k < 2; k++) {
        MPI_Comm_set_errhandler(comms[k], MPI_ERRORS_RETURN);
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            int own, cls = -1;
            int rc = run(cases[i], comms[k], &own);
            MPI_Error_class(rc, &cls);
            int want = rank == size - 1 ? own : MPI_ERR_OTHER;
            CHECK(rc != MPI_SUCCESS && cls == want, "%s on %s: class %d, want %d", cases[i], k ? "a dup" : "MPI_COMM_WORLD", cls, want);
            works(comms[k], cases[i]);
        }
    }
    MPI_Comm_free(&dup);
    MPI_Finalize();
    printf("rank %d: %d passed, %d failed\n", rank, passed, failed);
    fflush(stdout);
    return failed != 0;
}
