/*
 * cudaquery.c: prints the host MPI's CUDA support answers, as a program
 * asks them: Open MPI's MPIX_Query_cuda_support (mpi-ext.h), MPICH's
 * MPIX_GPU_query_support and MPIX_Query_cuda_support (mpi.h). Under the
 * preload they must be the host MPI's: gocoll does not define them there.
 */
#include <mpi.h>
#include <stdio.h>
#if defined(OPEN_MPI)
#include <mpi-ext.h>
#endif

int main(int argc, char **argv) {
    int query = -1, gpu = -1;
    MPI_Init(&argc, &argv);
#if defined(MPIX_CUDA_AWARE_SUPPORT)
    query = MPIX_Query_cuda_support();
#endif
#if defined(MPIX_GPU_SUPPORT_CUDA)
    query = MPIX_Query_cuda_support();
    if (MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &gpu) != MPI_SUCCESS) gpu = -2;
#endif
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) printf("cuda support: query %d, gpu_query %d\n", query, gpu);
    MPI_Finalize();
    return 0;
}
