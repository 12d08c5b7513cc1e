/*
 * tune.c: run-time tuning routes every rank alike. N calls of one
 * MPI_Allreduce (COUNT floats, MPI_SUM, MPI_COMM_WORLD), each result
 * checked, then each rank says where its calls went, from the
 * library's counters (gocoll_test_counter):
 *
 *   tune: rank R: host=H gocoll=G
 *
 * on stdout (rank 0 last, after `N passed, N failed`). Run by
 * tests/preload/tune_test.go under the test library (-tags gocolltest)
 * with GOCOLL_TUNE_TEST's skewed times or delays: the test knows the
 * trials (GOCOLL_TUNE_CALLS + 1 of each candidate), so the counts say
 * which candidate won, and that every rank made the same trials and
 * took the same winner.
 *
 * With a third argument, dup, it then makes N more calls on a duplicate
 * of MPI_COMM_WORLD (the same shape: it takes the verdict without
 * trials) and prints their counts too (`tune: rank R: dup host=H
 * gocoll=G`).
 *
 *   tune COUNT N [dup]
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long long (*counter)(const char *) = (long long (*)(const char *))dlsym(RTLD_DEFAULT, "gocoll_test_counter");
    int count = argc > 1 ? atoi(argv[1]) : 16, n = argc > 2 ? atoi(argv[2]) : 100;
    if (!counter || count < 1 || n < 1) {
        fprintf(stderr, "usage: tune COUNT N, under libgocoll-preload.so\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    float *s = malloc(count * sizeof *s), *r = malloc(count * sizeof *r);
    long passed = 0, failed = 0;
    int dup = argc > 3 && strcmp(argv[3], "dup") == 0;
    MPI_Comm comm = MPI_COMM_WORLD;
    long long host0 = 0, gocoll0 = 0;
    for (int phase = 0; phase < 1 + dup; phase++) {
        if (phase == 1) MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        for (int i = 0; i < n; i++) {
            for (int k = 0; k < count; k++) s[k] = (float)(rank + k % 7 + i % 5);
            MPI_Allreduce(s, r, count, MPI_FLOAT, MPI_SUM, comm);
            for (int k = 0; k < count; k++) {
                float want = (float)(size * (k % 7 + i % 5) + size * (size - 1) / 2);
                if (r[k] == want) passed++;
                else if (failed++ < 5) fprintf(stderr, "FAIL rank %d: call %d element %d: %g, want %g\n", rank, i, k, r[k], want);
            }
        }
        long long host = counter("MPI_Allreduce.host"), gocoll = counter("MPI_Allreduce.go") + counter("MPI_Allreduce.fast");
        for (int q = size - 1; q >= 0; q--) {
            if (q == rank) {
                if (rank == 0 && phase == dup) printf("%ld passed, %ld failed\n", passed, failed);
                printf("tune: rank %d: %shost=%lld gocoll=%lld\n", rank, phase ? "dup " : "", host - host0, gocoll - gocoll0);
                fflush(stdout);
            }
            MPI_Barrier(MPI_COMM_WORLD);
        }
        host0 = host, gocoll0 = gocoll;
    }
    if (dup) MPI_Comm_free(&comm);
    free(s), free(r);
    MPI_Finalize();
    return failed != 0;
}
