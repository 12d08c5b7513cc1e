/*
 * lat.c: the per-call latency of one collective in the pattern MPI suites
 * time (an MPI_Barrier before every call, only the call timed), as a
 * distribution: rank 0's min, p25, median and mean over the calls, in ns
 * (rdtsc, calibrated). Medians of back-to-back runs, native and under
 * LD_PRELOAD, show what the preload adds to a call the host runs, which
 * collbench's means over 1000 calls hide in this VM's noise:
 *
 *   mpicc.openmpi -O2 -o lat lat.c
 *   mpirun.openmpi -np 2 [-x LD_PRELOAD=.../libgocoll-preload.so] ./lat a 4 20000
 *
 * Arguments: the collective (a MPI_Allreduce of MPI_FLOAT sums, g
 * MPI_Allgather of MPI_CHAR, r MPI_Reduce_scatter with recvcounts), the
 * size in bytes (allgather: per rank), the number of timed calls (after
 * 200 untimed). TAG in the environment labels the line. x86-64 only.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    char coll = argc > 1 ? argv[1][0] : 'a';
    int bytes = argc > 2 ? atoi(argv[2]) : 4, n = argc > 3 ? atoi(argv[3]) : 20000;
    int rank, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (n < 1 || bytes < 1 || (coll != 'a' && coll != 'g' && coll != 'r')) {
        if (rank == 0) fprintf(stderr, "usage: lat a|g|r BYTES CALLS\n");
        MPI_Finalize();
        return 2;
    }
    char *s = calloc(1, (size_t)bytes * np + 64), *r = calloc(1, (size_t)bytes * np + 64);
    int cnt = bytes / 4 > 0 ? bytes / 4 : 1, *counts = malloc(np * sizeof(int));
    for (int i = 0; i < np; i++) counts[i] = cnt / np > 0 ? cnt / np : 1;
    double *t = malloc(n * sizeof *t), a = ns(), sum = 0;
    unsigned long long c0 = __rdtsc();
    while (ns() - a < 2e7) {
    }
    double ghz = (__rdtsc() - c0) / (ns() - a);
    for (int i = -200; i < n; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        unsigned long long x = __rdtsc();
        if (coll == 'a') MPI_Allreduce(s, r, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        else if (coll == 'g') MPI_Allgather(s, bytes, MPI_CHAR, r, bytes, MPI_CHAR, MPI_COMM_WORLD);
        else MPI_Reduce_scatter(s, r, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        unsigned long long y = __rdtsc();
        if (i >= 0) sum += t[i] = (y - x) / ghz;
    }
    qsort(t, n, sizeof *t, cmp);
    if (rank == 0)
        printf("%-10s %c %7d B: min %6.0f p25 %6.0f median %6.0f mean %7.0f ns\n", getenv("TAG") ? getenv("TAG") : "-",
               coll, bytes, t[0], t[n / 4], t[n / 2], sum / n);
    free(s), free(r), free(counts), free(t);
    MPI_Finalize();
    return 0;
}
