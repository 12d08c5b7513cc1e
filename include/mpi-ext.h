/*
 * mpi-ext.h — gocoll's MPI extensions header, written by hand, in Open
 * MPI's convention: programs written for Open MPI include it to ask
 * whether the MPI library takes CUDA device memory.
 *
 *   MPIX_CUDA_AWARE_SUPPORT  1: gocoll is built CUDA-aware (always: it
 *                            needs nothing of CUDA to build, and loads
 *                            the driver at run time)
 *   MPIX_Query_cuda_support()  1 when CUDA device memory is accepted in
 *                            this process, now: the driver is loaded and
 *                            GOCOLL_CUDA is not off; 0 otherwise. Every
 *                            call that takes a buffer takes device memory
 *                            then (docs/cuda.md). MPICH's
 *                            MPIX_GPU_query_support (mpi.h) agrees.
 *
 * OMPI_HAVE_MPI_EXT and OMPI_HAVE_MPI_EXT_CUDA are Open MPI's sentinels,
 * which its documentation tells programs to test before they call
 * MPIX_Query_cuda_support; gocoll defines them for that, and no other
 * Open MPI extension.
 */
#ifndef GOCOLL_MPI_EXT_H
#define GOCOLL_MPI_EXT_H

#include "mpi.h"

#if defined(__cplusplus)
extern "C" {
#endif

#define OMPI_HAVE_MPI_EXT 1
#define OMPI_HAVE_MPI_EXT_CUDA 1
#define MPIX_CUDA_AWARE_SUPPORT 1

int MPIX_Query_cuda_support(void);

#if defined(__cplusplus)
}
#endif

#endif /* GOCOLL_MPI_EXT_H */
