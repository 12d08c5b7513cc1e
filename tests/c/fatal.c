/* fatal: the last rank passes an invalid datatype to MPI_Allreduce with
 * the default error handler (MPI_ERRORS_ARE_FATAL): the job must end with
 * a message naming the call, the error and the rank, and a non-zero
 * status. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int rank, size;
    double x = 1, y;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == size - 1)
        MPI_Allreduce(&x, &y, 1, (MPI_Datatype)0x4c00ffff, MPI_SUM, MPI_COMM_WORLD);
    else
        MPI_Barrier(MPI_COMM_WORLD); /* never completes: the job is killed */
    printf("rank %d: still running after a fatal error\n", rank);
    MPI_Finalize();
    return 0;
}
