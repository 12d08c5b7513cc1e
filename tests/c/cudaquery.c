/*
 * cudaquery: the CUDA support queries, through gocoll's headers: Open
 * MPI's MPIX_Query_cuda_support with its mpi-ext.h macros, and MPICH's
 * MPIX_GPU_query_support and MPIX_Query_{cuda,ze,hip}_support (mpi.h).
 *
 *   cudaquery WANT    WANT: 1 when this process should take CUDA device
 *                     memory (a driver, GOCOLL_CUDA not off), else 0
 *
 * Every answer must be WANT for CUDA, 0 for Level Zero and HIP, the same
 * before MPI_Init (MPICH allows that) and after; a NULL is_supported or an
 * unknown gpu_type is MPI_ERR_ARG under MPI_ERRORS_RETURN. Built with
 * MPICH's mpicc (no mpi-ext.h there) it checks MPICH's names only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <mpi.h>
#if defined(GOCOLL)
#include <mpi-ext.h>
#if !defined(MPIX_CUDA_AWARE_SUPPORT) || MPIX_CUDA_AWARE_SUPPORT != 1 || !defined(OMPI_HAVE_MPI_EXT_CUDA) || \
    OMPI_HAVE_MPI_EXT_CUDA != 1
#error "mpi-ext.h: MPIX_CUDA_AWARE_SUPPORT and OMPI_HAVE_MPI_EXT_CUDA must be 1"
#endif
#endif
#include "check.h"

static void queries(int want, const char *when) {
    int yes = -1;
    CHECK(MPIX_Query_cuda_support() == want, "%s: MPIX_Query_cuda_support() = %d, want %d", when, MPIX_Query_cuda_support(), want);
    OK(MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &yes));
    CHECK(yes == want, "%s: MPIX_GPU_query_support(CUDA) = %d, want %d", when, yes, want);
    yes = -1;
    OK(MPIX_GPU_query_support(MPIX_GPU_SUPPORT_ZE, &yes));
    CHECK(yes == 0, "%s: MPIX_GPU_query_support(ZE) = %d, want 0", when, yes);
    yes = -1;
    OK(MPIX_GPU_query_support(MPIX_GPU_SUPPORT_HIP, &yes));
    CHECK(yes == 0, "%s: MPIX_GPU_query_support(HIP) = %d, want 0", when, yes);
    CHECK(MPIX_Query_ze_support() == 0 && MPIX_Query_hip_support() == 0, "%s: MPIX_Query_ze/hip_support", when);
    CHECK(MPIX_GPU_SUPPORT_CUDA == 0 && MPIX_GPU_SUPPORT_ZE == 1 && MPIX_GPU_SUPPORT_HIP == 2, "MPICH's values");
}

int main(int argc, char **argv) {
    if (argc != 2 || (argv[1][0] != '0' && argv[1][0] != '1')) {
        fprintf(stderr, "usage: cudaquery 0|1\n");
        return 2;
    }
    int want = argv[1][0] - '0';
    queries(want, "before MPI_Init");
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    queries(want, "after MPI_Init");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int yes = 0, class = 0;
    MPI_Error_class(MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, NULL), &class);
    CHECK(class == MPI_ERR_ARG, "is_supported NULL: error class %d, want MPI_ERR_ARG", class);
    MPI_Error_class(MPIX_GPU_query_support(99, &yes), &class);
    CHECK(class == MPI_ERR_ARG, "gpu_type 99: error class %d, want MPI_ERR_ARG", class);
    printf("rank %d: MPIX_Query_cuda_support() = %d\n", rank, MPIX_Query_cuda_support());
    printf("rank %d: %d passed, %d failed\n", rank, passed, failed);
    MPI_Finalize();
    return failed ? 1 : 0;
}
