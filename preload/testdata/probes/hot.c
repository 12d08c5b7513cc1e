/*
 * hot.c: what the preload adds to a call the host runs, in cycles: each
 * collective on MPI_COMM_SELF with one element, in a hot loop (the
 * thread's memo of its last host calls matches every call but the
 * first), the mean of 1000 back-to-back calls (rdtsc; one tick is tens
 * of cycles on some VMs, too coarse to time one call), the minimum over
 * ROUNDS rounds. Runs of the same binary, native and under LD_PRELOAD,
 * interleaved, show the memo-hit path's cost (13-15 cycles on
 * 2026-12-04):
 *
 *   mpicc.openmpi -O2 -o hot hot.c
 *   mpirun.openmpi -np 1 [-x LD_PRELOAD=.../libgocoll-preload.so] ./hot 300
 *
 * TAG in the environment labels the lines. x86-64 only.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <x86intrin.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rounds = argc > 1 ? atoi(argv[1]) : 300;
    float s[4] = {1}, r[4];
    int counts[1] = {1};
    const char *names[4] = {"MPI_Allreduce", "MPI_Reduce_scatter_block", "MPI_Reduce_scatter", "MPI_Allgather"};
    for (int k = 0; k < 4; k++) {
        double best = 1e30;
        for (int j = -5; j < rounds; j++) {
            unsigned long long x = __rdtsc();
            for (int i = 0; i < 1000; i++) switch (k) {
                case 0: MPI_Allreduce(s, r, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_SELF); break;
                case 1: MPI_Reduce_scatter_block(s, r, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_SELF); break;
                case 2: MPI_Reduce_scatter(s, r, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_SELF); break;
                case 3: MPI_Allgather(s, 4, MPI_CHAR, r, 4, MPI_CHAR, MPI_COMM_SELF); break;
                }
            double c = (__rdtsc() - x) / 1000.0;
            if (j >= 0 && c < best) best = c;
        }
        printf("%-10s %-26s %6.1f cycles\n", getenv("TAG") ? getenv("TAG") : "-", names[k], best);
    }
    MPI_Finalize();
    return 0;
}
