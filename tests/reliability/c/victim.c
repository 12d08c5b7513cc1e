/*
 * victim: runs one collective in a loop, checking every result, until a
 * test kills, stops or ends one of its ranks; the others must then fail
 * on their own, quickly, with a message naming the collective, the
 * communicator and the peer.
 *
 *   victim -coll NAME -count N [-exit RANK] [-comm world|dup|split] [-ignore-term] [-path KEY]
 *
 * NAME is allreduce, reduce_scatter, reduce_scatter_block, allgather,
 * allgatherv, bcast (the root going round) or barrier; N elements of
 * MPI_INT per rank (per block for the scattering and gathering calls).
 * Every rank prints
 * `rank R pid P job J comm-rank C path N` once the first call has worked,
 * N being gocoll's path counter KEY (gocoll_test_counter, e.g.
 * MPI_Allreduce.fast: the test knows which path the job took; -2 where
 * the library has no such hook, as a host MPI), then loops for at
 * most 60 seconds. With -exit RANK, that rank calls exit(3) in the
 * middle of the loop (after about 0.3 s), without MPI_Finalize.
 *
 * The default error handler is kept (MPI_ERRORS_ARE_FATAL): a survivor
 * prints gocoll's own message and ends the job. With -ignore-term the
 * ranks ignore SIGTERM, so that gocollrun, which terminates the job when
 * a rank dies, cannot end a survivor before it has noticed the failure
 * itself: the test then sees every survivor's own message. A wrong result
 * prints `rank R: WRONG ...` and exits 2: a failure must never look like
 * an answer.
 */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dlfcn.h>

static int rank, size, wrank; /* rank in the communicator tested, in MPI_COMM_WORLD */

static void die_wrong(const char *what, long i, long got, long want) {
    printf("rank %d: WRONG %s: element %ld is %ld, want %ld\n", wrank, what, i, got, want);
    fflush(stdout);
    exit(2);
}

int main(int argc, char **argv) {
    const char *coll = "allreduce", *commname = "world", *path = "MPI_Allreduce.go";
    long n = 16;
    int exit_rank = -1, ignore_term = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-coll") && i + 1 < argc) coll = argv[++i];
        else if (!strcmp(argv[i], "-count") && i + 1 < argc) n = atol(argv[++i]);
        else if (!strcmp(argv[i], "-exit") && i + 1 < argc) exit_rank = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-comm") && i + 1 < argc) commname = argv[++i];
        else if (!strcmp(argv[i], "-ignore-term")) ignore_term = 1;
        else if (!strcmp(argv[i], "-path") && i + 1 < argc) path = argv[++i];
        else {
            fprintf(stderr, "victim: unknown argument %s\n", argv[i]);
            return 64;
        }
    }
    if (ignore_term) signal(SIGTERM, SIG_IGN);
    MPI_Init(&argc, &argv);
    MPI_Comm comm = MPI_COMM_WORLD;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    if (!strcmp(commname, "dup")) MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    else if (!strcmp(commname, "split")) MPI_Comm_split(MPI_COMM_WORLD, 0, -wrank, &comm); /* the ranks reversed */
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *in = malloc(sizeof(int) * (n * size + 1)), *out = malloc(sizeof(int) * (n * size + 1));
    int *counts = malloc(sizeof(int) * size), *displs = malloc(sizeof(int) * size);
    for (int q = 0; q < size; q++) counts[q] = (int)n, displs[q] = (int)(q * n);
    const char *job = getenv("GOCOLL_JOB_ID");
    double start = 0;
    for (long it = 0;; it++) {
        for (long i = 0; i < n * size; i++) in[i] = (int)(rank + i + it);
        int rc = MPI_SUCCESS;
        long sumr = (long)size * (size - 1) / 2;
        if (!strcmp(coll, "allreduce")) {
            rc = MPI_Allreduce(in, out, (int)n, MPI_INT, MPI_SUM, comm);
            for (long i = 0; i < n; i++)
                if (out[i] != sumr + size * (i + it)) die_wrong(coll, i, out[i], sumr + size * (i + it));
        } else if (!strcmp(coll, "reduce_scatter_block")) {
            rc = MPI_Reduce_scatter_block(in, out, (int)n, MPI_INT, MPI_SUM, comm);
            for (long i = 0; i < n; i++) {
                long want = sumr + size * (rank * n + i + it);
                if (out[i] != want) die_wrong(coll, i, out[i], want);
            }
        } else if (!strcmp(coll, "reduce_scatter")) {
            rc = MPI_Reduce_scatter(in, out, counts, MPI_INT, MPI_SUM, comm);
            for (long i = 0; i < n; i++) {
                long want = sumr + size * (rank * n + i + it);
                if (out[i] != want) die_wrong(coll, i, out[i], want);
            }
        } else if (!strcmp(coll, "allgather") || !strcmp(coll, "allgatherv")) {
            if (coll[9] == 'v') rc = MPI_Allgatherv(in, (int)n, MPI_INT, out, counts, displs, MPI_INT, comm);
            else rc = MPI_Allgather(in, (int)n, MPI_INT, out, (int)n, MPI_INT, comm);
            for (int q = 0; q < size; q++)
                for (long i = 0; i < n; i++)
                    if (out[q * n + i] != q + i + it) die_wrong(coll, q * n + i, out[q * n + i], q + i + it);
        } else if (!strcmp(coll, "bcast")) {
            int root = (int)(it % size);
            if (rank != root)
                for (long i = 0; i < n; i++) in[i] = -1;
            rc = MPI_Bcast(in, (int)n, MPI_INT, root, comm);
            for (long i = 0; i < n; i++)
                if (in[i] != root + i + it) die_wrong(coll, i, in[i], root + i + it);
        } else if (!strcmp(coll, "barrier")) {
            rc = MPI_Barrier(comm);
        } else {
            fprintf(stderr, "victim: unknown collective %s\n", coll);
            return 64;
        }
        if (rc != MPI_SUCCESS) { /* only with MPI_ERRORS_RETURN, never set here */
            printf("rank %d: %s returned %d\n", wrank, coll, rc);
            return 1;
        }
        if (it == 0) {
            long long (*counter)(const char *) = (long long (*)(const char *))dlsym(RTLD_DEFAULT, "gocoll_test_counter");
            printf("rank %d pid %d job %s comm-rank %d path %lld\n", wrank, (int)getpid(), job ? job : "-", rank,
                   counter ? counter(path) : -2);
            fflush(stdout);
            start = MPI_Wtime();
        }
        double t = MPI_Wtime() - start;
        if (wrank == exit_rank && t > 0.3) {
            printf("rank %d: exiting in the middle of the job\n", wrank);
            fflush(stdout);
            exit(3);
        }
        if (t > 60) break;
    }
    printf("rank %d: done\n", wrank);
    MPI_Finalize();
    return 0;
}
