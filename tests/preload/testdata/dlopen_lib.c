/* dlopen_lib.c: the MPI part of dlopen_main (see there). */
#include <mpi.h>
#include <stdio.h>

int run(void) {
    int rank, size, ok = 1;
    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double x[100], y[100 * 8];
    for (int i = 0; i < 100; i++) x[i] = rank + i;
    ok &= MPI_Allreduce(x, y, 100, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS;
    for (int i = 0; i < 100; i++) ok &= y[i] == size * (size - 1) / 2.0 + size * i;
    ok &= MPI_Allgather(x, 100, MPI_DOUBLE, y, 100, MPI_DOUBLE, MPI_COMM_WORLD) == MPI_SUCCESS;
    for (int q = 0; q < size; q++)
        for (int i = 0; i < 100; i++) ok &= y[q * 100 + i] == q + i;
    int all = 0;
    MPI_Reduce(&ok, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("expect gocoll=%d host=0\n", 2 * size);
        printf("%d passed, %d failed\n", all, size - all);
    }
    MPI_Finalize();
    return !ok; /* each rank's own verdict, whatever the sum says */
}
