/* An MPICH program, built with mpicc.mpich: it shows that gocollrun
 * serves MPICH's own PMI-1 client, not only gocoll's. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  int rank, size, one, sum;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  one = rank + 1;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("MPICH rank %d of %d sum %d\n", rank, size, sum);
  MPI_Finalize();
  return 0;
}
