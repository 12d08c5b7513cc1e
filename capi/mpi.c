/*
 * The C entry points of libgocoll.so. Each PMPI_ function is the real one
 * and forwards to its Go implementation (gocoll_<Name>, in the .go files
 * of this package); MPI_ is a weak alias of it, so that profiling tools can
 * interpose MPI_ and still reach PMPI_. Nothing else happens here, except
 * MPI_Wtime/MPI_Wtick, which need no Go.
 *
 * Names: every C name of this package, its C files' and its Go exports',
 * starts with gocoll_ (the MPI names aside), as the preload's start with
 * gc_, so that a symbol says which library it is from. The C halves both
 * libraries share keep their package's: gocoll_shm_ (intranode/engine),
 * gocoll_cuda_ and gocoll_cu_ (gpu), gocollLoadWait (internal/loadwait).
 */
#define _GNU_SOURCE
#include <time.h>
#include "mpi.h"
#include "fast.h"
#include "_cgo_export.h"

#define PAIR(ret, name, params, args)                     \
    ret PMPI_##name params { return gocoll_##name args; } \
    ret MPI_##name params __attribute__((weak, alias("PMPI_" #name)));

PAIR(int, Init, (int *argc, char ***argv), ())
PAIR(int, Init_thread, (int *argc, char ***argv, int required, int *provided), (required, provided))
PAIR(int, Initialized, (int *flag), (flag))
PAIR(int, Finalize, (void), ())
PAIR(int, Finalized, (int *flag), (flag))
PAIR(int, Abort, (MPI_Comm comm, int errorcode), (comm, errorcode))
PAIR(int, Query_thread, (int *provided), (provided))
PAIR(int, Get_version, (int *version, int *subversion), (version, subversion))
PAIR(int, Get_library_version, (char *version, int *resultlen), (version, resultlen))
PAIR(int, Get_processor_name, (char *name, int *resultlen), (name, resultlen))

PAIR(int, Comm_rank, (MPI_Comm comm, int *rank), (comm, rank))
PAIR(int, Comm_size, (MPI_Comm comm, int *size), (comm, size))
PAIR(int, Comm_dup, (MPI_Comm comm, MPI_Comm *newcomm), (comm, newcomm))
PAIR(int, Comm_split, (MPI_Comm comm, int color, int key, MPI_Comm *newcomm), (comm, color, key, newcomm))
PAIR(int, Comm_split_type, (MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm),
     (comm, split_type, key, info, newcomm))
PAIR(int, Comm_free, (MPI_Comm *comm), (comm))
PAIR(int, Comm_compare, (MPI_Comm comm1, MPI_Comm comm2, int *result), (comm1, comm2, result))
PAIR(int, Comm_set_errhandler, (MPI_Comm comm, MPI_Errhandler errhandler), (comm, errhandler))
PAIR(int, Comm_get_errhandler, (MPI_Comm comm, MPI_Errhandler *errhandler), (comm, errhandler))
PAIR(int, Error_string, (int errorcode, char *string, int *resultlen), (errorcode, string, resultlen))
PAIR(int, Error_class, (int errorcode, int *errorclass), (errorcode, errorclass))

PAIR(int, Type_size, (MPI_Datatype datatype, int *size), (datatype, size))
PAIR(int, Type_contiguous, (int count, MPI_Datatype oldtype, MPI_Datatype *newtype), (count, oldtype, newtype))
PAIR(int, Type_commit, (MPI_Datatype *datatype), (datatype))
PAIR(int, Type_free, (MPI_Datatype *datatype), (datatype))
PAIR(int, Op_create, (MPI_User_function *user_fn, int commute, MPI_Op *op), ((void *)user_fn, commute, op))
PAIR(int, Op_free, (MPI_Op *op), (op))
PAIR(int, Op_commutative, (MPI_Op op, int *commute), (op, commute))

PAIR(int, Send, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm),
     ((void *)buf, count, datatype, dest, tag, comm))
PAIR(int, Recv, (void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status *status),
     (buf, count, datatype, source, tag, comm, status))
PAIR(int, Sendrecv, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                     void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                     MPI_Comm comm, MPI_Status *status),
     ((void *)sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, comm, status))
PAIR(int, Isend, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request),
     ((void *)buf, count, datatype, dest, tag, comm, request))
PAIR(int, Irecv, (void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Request *request),
     (buf, count, datatype, source, tag, comm, request))
PAIR(int, Wait, (MPI_Request *request, MPI_Status *status), (request, status))
PAIR(int, Waitall, (int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[]),
     (count, array_of_requests, array_of_statuses))
PAIR(int, Test, (MPI_Request *request, int *flag, MPI_Status *status), (request, flag, status))
PAIR(int, Get_count, (const MPI_Status *status, MPI_Datatype datatype, int *count), ((MPI_Status *)status, datatype, count))

/* FAST is PAIR for the calls with a C fast path (fast.c, on the
 * shared-memory engine's C half): small calls on one host never enter Go.
 * Each call the fast path completes counts in gocoll_fast_calls[which], a
 * GOCOLL_CALL_ code (GOCOLL_REPORT's fast=). A call it declines takes pl, where
 * its buffers were found to live if the fast path asked, to Go. */
#define FAST(ret, name, params, fast, which, args)                           \
    ret PMPI_##name params {                                                  \
        struct gocoll_placed pl;                                              \
        pl.asked = 0; /* the rest is written where asked is */                \
        int rc = fast;                                                        \
        if (rc < 0) return gocoll_##name args;                                \
        __atomic_fetch_add(&gocoll_fast_calls[which], 1, __ATOMIC_RELAXED);   \
        return rc;                                                            \
    }                                                                         \
    ret MPI_##name params __attribute__((weak, alias("PMPI_" #name)));

FAST(int, Barrier, (MPI_Comm comm), gocoll_fast_barrier(comm), GOCOLL_CALL_BARRIER, (comm))
FAST(int, Bcast, (void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm),
     gocoll_fast_bcast(buffer, count, datatype, root, comm, &pl), GOCOLL_CALL_BCAST, (buffer, count, datatype, root, comm, &pl))
PAIR(int, Reduce, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm),
     ((void *)sendbuf, recvbuf, count, datatype, op, root, comm))
PAIR(int, Gather, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                   MPI_Datatype recvtype, int root, MPI_Comm comm),
     ((void *)sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm))
FAST(int, Allreduce, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm),
     gocoll_fast_allreduce(sendbuf, recvbuf, count, datatype, op, comm, &pl), GOCOLL_CALL_ALLREDUCE,
     ((void *)sendbuf, recvbuf, count, datatype, op, comm, &pl))
FAST(int, Reduce_scatter, (const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op, MPI_Comm comm),
     gocoll_fast_reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, &pl), GOCOLL_CALL_REDUCE_SCATTER,
     ((void *)sendbuf, recvbuf, (int *)recvcounts, datatype, op, comm, &pl))
FAST(int, Reduce_scatter_block, (const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm),
     gocoll_fast_reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, &pl), GOCOLL_CALL_REDUCE_SCATTER_BLOCK,
     ((void *)sendbuf, recvbuf, recvcount, datatype, op, comm, &pl))
FAST(int, Allgather, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                      MPI_Datatype recvtype, MPI_Comm comm),
     gocoll_fast_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &pl), GOCOLL_CALL_ALLGATHER,
     ((void *)sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &pl))
PAIR(int, Allgatherv, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                       const int displs[], MPI_Datatype recvtype, MPI_Comm comm),
     ((void *)sendbuf, sendcount, sendtype, recvbuf, (int *)recvcounts, (int *)displs, recvtype, comm))

PAIR(int, Allreduce_c, (const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm),
     ((void *)sendbuf, recvbuf, count, datatype, op, comm))
PAIR(int, Reduce_scatter_c, (const void *sendbuf, void *recvbuf, const MPI_Count recvcounts[], MPI_Datatype datatype, MPI_Op op, MPI_Comm comm),
     ((void *)sendbuf, recvbuf, (MPI_Count *)recvcounts, datatype, op, comm))
PAIR(int, Reduce_scatter_block_c, (const void *sendbuf, void *recvbuf, MPI_Count recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm),
     ((void *)sendbuf, recvbuf, recvcount, datatype, op, comm))
PAIR(int, Allgather_c, (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount,
                        MPI_Datatype recvtype, MPI_Comm comm),
     ((void *)sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm))

double PMPI_Wtime(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
double MPI_Wtime(void) __attribute__((weak, alias("PMPI_Wtime")));

double PMPI_Wtick(void) {
    struct timespec ts;
    clock_getres(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
double MPI_Wtick(void) __attribute__((weak, alias("PMPI_Wtick")));

/* Calls a user's reduction function (C or Fortran: both take pointers). */
void gocoll_call_user_fn(void *fn, void *in, void *inout, int len, MPI_Datatype dt) {
    ((MPI_User_function *)fn)(in, inout, &len, &dt);
}

/* Nonblocking and persistent collectives; completion (requests.go). */
PAIR(int, Iallreduce, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request),
     ((void *)sendbuf, recvbuf, count, datatype, op, comm, request))
PAIR(int, Iallreduce_c, (const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request),
     ((void *)sendbuf, recvbuf, count, datatype, op, comm, request))
PAIR(int, Ireduce_scatter, (const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request),
     ((void *)sendbuf, recvbuf, (int *)recvcounts, datatype, op, comm, request))
PAIR(int, Ireduce_scatter_c, (const void *sendbuf, void *recvbuf, const MPI_Count recvcounts[], MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request),
     ((void *)sendbuf, recvbuf, (MPI_Count *)recvcounts, datatype, op, comm, request))
PAIR(int, Ireduce_scatter_block, (const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request),
     ((void *)sendbuf, recvbuf, recvcount, datatype, op, comm, request))
PAIR(int, Ireduce_scatter_block_c, (const void *sendbuf, void *recvbuf, MPI_Count recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request),
     ((void *)sendbuf, recvbuf, recvcount, datatype, op, comm, request))
PAIR(int, Iallgather, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request),
     ((void *)sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request))
PAIR(int, Iallgather_c, (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request),
     ((void *)sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request))
PAIR(int, Allreduce_init, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request),
     ((void *)sendbuf, recvbuf, count, datatype, op, comm, info, request))
PAIR(int, Allreduce_init_c, (const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request),
     ((void *)sendbuf, recvbuf, count, datatype, op, comm, info, request))
PAIR(int, Reduce_scatter_init, (const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request),
     ((void *)sendbuf, recvbuf, (int *)recvcounts, datatype, op, comm, info, request))
PAIR(int, Reduce_scatter_init_c, (const void *sendbuf, void *recvbuf, const MPI_Count recvcounts[], MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request),
     ((void *)sendbuf, recvbuf, (MPI_Count *)recvcounts, datatype, op, comm, info, request))
PAIR(int, Reduce_scatter_block_init, (const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request),
     ((void *)sendbuf, recvbuf, recvcount, datatype, op, comm, info, request))
PAIR(int, Reduce_scatter_block_init_c, (const void *sendbuf, void *recvbuf, MPI_Count recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request),
     ((void *)sendbuf, recvbuf, recvcount, datatype, op, comm, info, request))
PAIR(int, Allgather_init, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request),
     ((void *)sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request))
PAIR(int, Allgather_init_c, (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request),
     ((void *)sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request))
PAIR(int, Waitany, (int count, MPI_Request array_of_requests[], int *index, MPI_Status *status), (count, array_of_requests, index, status))
PAIR(int, Testall, (int count, MPI_Request array_of_requests[], int *flag, MPI_Status array_of_statuses[]), (count, array_of_requests, flag, array_of_statuses))
PAIR(int, Testany, (int count, MPI_Request array_of_requests[], int *index, int *flag, MPI_Status *status), (count, array_of_requests, index, flag, status))
PAIR(int, Start, (MPI_Request *request), (request))
PAIR(int, Startall, (int count, MPI_Request array_of_requests[]), (count, array_of_requests))
PAIR(int, Request_free, (MPI_Request *request), (request))

/* CUDA support queries (cuda.go): MPICH's MPIX_ names, PMPIX_ twins as
 * MPICH has them; MPIX_Query_cuda_support is Open MPI's too (mpi-ext.h). */
#define XPAIR(ret, name, params, args)                      \
    ret PMPIX_##name params { return gocoll_##name args; } \
    ret MPIX_##name params __attribute__((weak, alias("PMPIX_" #name)));

XPAIR(int, GPU_query_support, (int gpu_type, int *is_supported), (gpu_type, is_supported))
XPAIR(int, Query_cuda_support, (void), ())
XPAIR(int, Query_ze_support, (void), ())
XPAIR(int, Query_hip_support, (void), ())
