/* allreduce: every rank contributes x[i] = 100*rank + i; every rank checks
 * that it receives the sum, 100*p*(p-1)/2 + p*i, also in place.
 * Prints PASS on rank 0 when every rank agrees. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size, n = argc > 1 ? atoi(argv[1]) : 1003, bad = 0, allbad;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double *x = malloc(n * sizeof *x), *sum = malloc(n * sizeof *sum);
    for (int i = 0; i < n; i++) x[i] = 100.0 * rank + i;
    MPI_Allreduce(x, sum, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < n; i++)
        if (sum[i] != 100.0 * size * (size - 1) / 2 + (double)size * i) bad++;
    MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    for (int i = 0; i < n; i++)
        if (x[i] != 100.0 * (size - 1) + i) bad++;
    MPI_Allreduce(&bad, &allbad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("allreduce of %d doubles on %d ranks: %s\n", n, size, allbad ? "FAIL" : "PASS");
    free(x);
    free(sum);
    MPI_Finalize();
    return allbad != 0;
}
