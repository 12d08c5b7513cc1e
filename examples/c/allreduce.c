/* allreduce: every rank contributes x[i] = 100*rank + i; every rank checks
 * that it receives the sum, 100*p*(p-1)/2 + p*i, also in place.
 * Every rank prints its own PASS or FAIL and exits non-zero on a failure. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size, n = argc > 1 ? atoi(argv[1]) : 1003, bad = 0;
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
    printf("allreduce of %d doubles on %d ranks, rank %d: %s\n", n, size, rank, bad ? "FAIL" : "PASS");
    free(x);
    free(sum);
    MPI_Finalize();
    return bad != 0;
}
