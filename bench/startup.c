/* Start-up cost: MPI_Init to the end of the first collective, on every
 * rank. Prints the slowest rank's time (it includes waiting for the last
 * rank to be started) and the fastest (the last rank to start: close to
 * the start-up protocol's own cost once every rank is there).
 *
 *   build/bin/mpicc -O2 -o /tmp/startup bench/startup.c
 *   GOCOLL_DEBUG=info build/bin/gocollrun -n 16 /tmp/startup
 *
 * GOCOLL_DEBUG=info also prints each rank's traffic to its launcher
 * (bench/startup.sh runs the whole series). */
#include <mpi.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    double t0 = now();
    MPI_Init(&argc, &argv);
    double t1 = now();
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double one = 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double t2 = now();
    double d[4] = {t1 - t0, t2 - t0, -(t1 - t0), -(t2 - t0)}, m[4];
    MPI_Reduce(d, m, 4, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("startup np=%d init_ms max=%.1f min=%.1f first_collective_ms max=%.1f min=%.1f %s\n", size,
               1e3 * m[0], -1e3 * m[2], 1e3 * m[1], -1e3 * m[3], sum == size ? "PASS" : "FAIL");
    MPI_Finalize();
    return sum == size ? 0 : 1;
}
