/* spin: announces "rank R pid P", then runs allreduces of 64 KiB until
 * the job is killed (or for at most 60 seconds). A test kills one rank
 * mid-collective and checks that the others do not hang. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double *x = calloc(8192, sizeof *x), *y = calloc(8192, sizeof *y);
    MPI_Allreduce(x, y, 8192, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d pid %d\n", rank, (int)getpid());
    fflush(stdout);
    double start = MPI_Wtime();
    while (MPI_Wtime() - start < 60)
        MPI_Allreduce(x, y, 8192, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
