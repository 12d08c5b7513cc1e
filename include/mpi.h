/*
 * mpi.h — gocoll's MPI header, written by hand.
 *
 * gocoll implements the subset of MPI listed below (collectives, the point-
 * to-point and communicator calls common programs and benchmark suites
 * need). Anything else is deliberately not declared: using it fails at
 * compile or link time instead of misbehaving at run time.
 *
 * Handles and predefined values follow the MPICH ABI (shared by MPICH,
 * Intel MPI, MVAPICH and Cray MPICH): handles are ints, and a datatype or
 * op has the same value here as in MPICH's mpi.h, so binaries built
 * against MPICH run on gocoll unchanged (through a libmpich.so.12 link).
 */
#ifndef GOCOLL_MPI_H
#define GOCOLL_MPI_H

#include <stddef.h>

#if defined(__cplusplus)
extern "C" {
#endif

#define GOCOLL 1
#define MPI_VERSION    4
#define MPI_SUBVERSION 0

/* ---- Handle types (ints, MPICH ABI) ---- */
typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef int MPI_Request;
typedef int MPI_Errhandler;
typedef int MPI_Group;
typedef int MPI_Info;
typedef long MPI_Aint;
typedef long MPI_Count;
typedef long MPI_Offset;
typedef int MPI_Fint;

typedef struct MPI_Status {
    int count_lo;
    int count_hi_and_cancelled;
    int MPI_SOURCE;
    int MPI_TAG;
    int MPI_ERROR;
} MPI_Status;

typedef void (MPI_User_function)(void *invec, void *inoutvec, int *len, MPI_Datatype *datatype);
typedef void (MPI_User_function_c)(void *invec, void *inoutvec, MPI_Count *len, MPI_Datatype *datatype);

/* ---- Null and predefined handles ---- */
#define MPI_COMM_NULL       ((MPI_Comm)0x04000000)
#define MPI_COMM_WORLD      ((MPI_Comm)0x44000000)
#define MPI_COMM_SELF       ((MPI_Comm)0x44000001)
#define MPI_OP_NULL         ((MPI_Op)0x18000000)
#define MPI_GROUP_NULL      ((MPI_Group)0x08000000)
#define MPI_REQUEST_NULL    ((MPI_Request)0x2c000000)
#define MPI_ERRHANDLER_NULL ((MPI_Errhandler)0x14000000)
#define MPI_INFO_NULL       ((MPI_Info)0x1c000000)
#define MPI_DATATYPE_NULL   ((MPI_Datatype)0x0c000000)

#define MPI_ERRORS_ARE_FATAL ((MPI_Errhandler)0x54000000)
#define MPI_ERRORS_RETURN    ((MPI_Errhandler)0x54000001)
#define MPI_ERRORS_ABORT     ((MPI_Errhandler)0x54000003)

/* ---- Datatypes: bits 8..15 hold the size in bytes ---- */
#define MPI_CHAR               ((MPI_Datatype)0x4c000101)
#define MPI_SIGNED_CHAR        ((MPI_Datatype)0x4c000118)
#define MPI_UNSIGNED_CHAR      ((MPI_Datatype)0x4c000102)
#define MPI_BYTE               ((MPI_Datatype)0x4c00010d)
#define MPI_WCHAR              ((MPI_Datatype)0x4c00040e)
#define MPI_SHORT              ((MPI_Datatype)0x4c000203)
#define MPI_UNSIGNED_SHORT     ((MPI_Datatype)0x4c000204)
#define MPI_INT                ((MPI_Datatype)0x4c000405)
#define MPI_UNSIGNED           ((MPI_Datatype)0x4c000406)
#define MPI_LONG               ((MPI_Datatype)0x4c000807)
#define MPI_UNSIGNED_LONG      ((MPI_Datatype)0x4c000808)
#define MPI_FLOAT              ((MPI_Datatype)0x4c00040a)
#define MPI_DOUBLE             ((MPI_Datatype)0x4c00080b)
#define MPI_LONG_DOUBLE        ((MPI_Datatype)0x4c00100c)
#define MPI_LONG_LONG_INT      ((MPI_Datatype)0x4c000809)
#define MPI_LONG_LONG          MPI_LONG_LONG_INT
#define MPI_UNSIGNED_LONG_LONG ((MPI_Datatype)0x4c000819)
#define MPI_PACKED             ((MPI_Datatype)0x4c00010f)

#define MPI_FLOAT_INT       ((MPI_Datatype)0x8c000000)
#define MPI_DOUBLE_INT      ((MPI_Datatype)0x8c000001)
#define MPI_LONG_INT        ((MPI_Datatype)0x8c000002)
#define MPI_SHORT_INT       ((MPI_Datatype)0x8c000003)
#define MPI_2INT            ((MPI_Datatype)0x4c000816)
#define MPI_LONG_DOUBLE_INT ((MPI_Datatype)0x8c000004)

#define MPI_INT8_T   ((MPI_Datatype)0x4c000137)
#define MPI_INT16_T  ((MPI_Datatype)0x4c000238)
#define MPI_INT32_T  ((MPI_Datatype)0x4c000439)
#define MPI_INT64_T  ((MPI_Datatype)0x4c00083a)
#define MPI_UINT8_T  ((MPI_Datatype)0x4c00013b)
#define MPI_UINT16_T ((MPI_Datatype)0x4c00023c)
#define MPI_UINT32_T ((MPI_Datatype)0x4c00043d)
#define MPI_UINT64_T ((MPI_Datatype)0x4c00083e)

#define MPI_C_BOOL                ((MPI_Datatype)0x4c00013f)
#define MPI_C_FLOAT_COMPLEX       ((MPI_Datatype)0x4c000840)
#define MPI_C_COMPLEX             MPI_C_FLOAT_COMPLEX
#define MPI_C_DOUBLE_COMPLEX      ((MPI_Datatype)0x4c001041)
#define MPI_C_LONG_DOUBLE_COMPLEX ((MPI_Datatype)0x4c002042)
#define MPI_CXX_BOOL                ((MPI_Datatype)0x4c000133)
#define MPI_CXX_FLOAT_COMPLEX       ((MPI_Datatype)0x4c000834)
#define MPI_CXX_DOUBLE_COMPLEX      ((MPI_Datatype)0x4c001035)
#define MPI_CXX_LONG_DOUBLE_COMPLEX ((MPI_Datatype)0x4c002036)
#define MPI_AINT   ((MPI_Datatype)0x4c000843)
#define MPI_OFFSET ((MPI_Datatype)0x4c000844)
#define MPI_COUNT  ((MPI_Datatype)0x4c000845)

/* Fortran datatypes, usable from C too */
#define MPI_CHARACTER         ((MPI_Datatype)0x4c00011a)
#define MPI_LOGICAL           ((MPI_Datatype)0x4c00041d)
#define MPI_INTEGER           ((MPI_Datatype)0x4c00041b)
#define MPI_REAL              ((MPI_Datatype)0x4c00041c)
#define MPI_DOUBLE_PRECISION  ((MPI_Datatype)0x4c00081f)
#define MPI_COMPLEX           ((MPI_Datatype)0x4c00081e)
#define MPI_DOUBLE_COMPLEX    ((MPI_Datatype)0x4c001022)
#define MPI_2INTEGER          ((MPI_Datatype)0x4c000820)
#define MPI_2REAL             ((MPI_Datatype)0x4c000821)
#define MPI_2DOUBLE_PRECISION ((MPI_Datatype)0x4c001023)
#define MPI_INTEGER1          ((MPI_Datatype)0x4c00012d)
#define MPI_INTEGER2          ((MPI_Datatype)0x4c00022f)
#define MPI_INTEGER4          ((MPI_Datatype)0x4c000430)
#define MPI_INTEGER8          ((MPI_Datatype)0x4c000831)
#define MPI_REAL4             ((MPI_Datatype)0x4c000427)
#define MPI_REAL8             ((MPI_Datatype)0x4c000829)
#define MPI_REAL16            ((MPI_Datatype)0x4c00102b)
#define MPI_COMPLEX8          ((MPI_Datatype)0x4c000828)
#define MPI_COMPLEX16         ((MPI_Datatype)0x4c00102a)
#define MPI_COMPLEX32         ((MPI_Datatype)0x4c00202c)
/* Not in MPICH 4.0: values in MPICH's free builtin space. */
#define MPI_INTEGER16         ((MPI_Datatype)0x4c001049)
#define MPI_REAL2             ((MPI_Datatype)0x4c000247)
#define MPI_COMPLEX4          ((MPI_Datatype)0x4c000448)

/* Extensions: half precision */
#define MPIX_C_FLOAT16 ((MPI_Datatype)0x4c000246)
#define MPIX_BFLOAT16  ((MPI_Datatype)0x4c00024a)

/* ---- Reduction operations ---- */
#define MPI_MAX     ((MPI_Op)0x58000001)
#define MPI_MIN     ((MPI_Op)0x58000002)
#define MPI_SUM     ((MPI_Op)0x58000003)
#define MPI_PROD    ((MPI_Op)0x58000004)
#define MPI_LAND    ((MPI_Op)0x58000005)
#define MPI_BAND    ((MPI_Op)0x58000006)
#define MPI_LOR     ((MPI_Op)0x58000007)
#define MPI_BOR     ((MPI_Op)0x58000008)
#define MPI_LXOR    ((MPI_Op)0x58000009)
#define MPI_BXOR    ((MPI_Op)0x5800000a)
#define MPI_MINLOC  ((MPI_Op)0x5800000b)
#define MPI_MAXLOC  ((MPI_Op)0x5800000c)
#define MPI_REPLACE ((MPI_Op)0x5800000d)
#define MPI_NO_OP   ((MPI_Op)0x5800000e)

/* ---- Special values ---- */
#define MPI_IN_PLACE        ((void *)-1)
#define MPI_BOTTOM          ((void *)0)
#define MPI_STATUS_IGNORE   ((MPI_Status *)1)
#define MPI_STATUSES_IGNORE ((MPI_Status *)1)
#define MPI_PROC_NULL   (-1)
#define MPI_ANY_SOURCE  (-2)
#define MPI_ROOT        (-3)
#define MPI_ANY_TAG     (-1)
#define MPI_UNDEFINED   (-32766)

#define MPI_IDENT     0
#define MPI_CONGRUENT 1
#define MPI_SIMILAR   2
#define MPI_UNEQUAL   3

/* MPI_Comm_split_type: the ranks that share a node (the only type) */
#define MPI_COMM_TYPE_SHARED 1

#define MPI_THREAD_SINGLE     0
#define MPI_THREAD_FUNNELED   1
#define MPI_THREAD_SERIALIZED 2
#define MPI_THREAD_MULTIPLE   3

#define MPI_MAX_PROCESSOR_NAME         128
#define MPI_MAX_ERROR_STRING           512
#define MPI_MAX_LIBRARY_VERSION_STRING 8192

/* ---- Error classes (MPICH values) ---- */
#define MPI_SUCCESS          0
#define MPI_ERR_BUFFER       1
#define MPI_ERR_COUNT        2
#define MPI_ERR_TYPE         3
#define MPI_ERR_TAG          4
#define MPI_ERR_COMM         5
#define MPI_ERR_RANK         6
#define MPI_ERR_ROOT         7
#define MPI_ERR_GROUP        8
#define MPI_ERR_OP           9
#define MPI_ERR_TOPOLOGY    10
#define MPI_ERR_DIMS        11
#define MPI_ERR_ARG         12
#define MPI_ERR_UNKNOWN     13
#define MPI_ERR_TRUNCATE    14
#define MPI_ERR_OTHER       15
#define MPI_ERR_INTERN      16
#define MPI_ERR_IN_STATUS   17
#define MPI_ERR_PENDING     18
#define MPI_ERR_REQUEST     19
#define MPI_ERR_NO_MEM      34
#define MPI_ERR_PROC_ABORTED 76
#define MPI_ERR_LASTCODE    0x3fffffff

/* ---- The exported subset; each MPI_ function has its PMPI_ twin ---- */
#define GOCOLL_DECLARE(ret, name, args) ret MPI_##name args; ret PMPI_##name args;

GOCOLL_DECLARE(int, Init, (int *argc, char ***argv))
GOCOLL_DECLARE(int, Init_thread, (int *argc, char ***argv, int required, int *provided))
GOCOLL_DECLARE(int, Initialized, (int *flag))
GOCOLL_DECLARE(int, Finalize, (void))
GOCOLL_DECLARE(int, Finalized, (int *flag))
GOCOLL_DECLARE(int, Abort, (MPI_Comm comm, int errorcode))
GOCOLL_DECLARE(int, Query_thread, (int *provided))
GOCOLL_DECLARE(int, Get_version, (int *version, int *subversion))
GOCOLL_DECLARE(int, Get_library_version, (char *version, int *resultlen))
GOCOLL_DECLARE(int, Get_processor_name, (char *name, int *resultlen))
GOCOLL_DECLARE(double, Wtime, (void))
GOCOLL_DECLARE(double, Wtick, (void))

GOCOLL_DECLARE(int, Comm_rank, (MPI_Comm comm, int *rank))
GOCOLL_DECLARE(int, Comm_size, (MPI_Comm comm, int *size))
GOCOLL_DECLARE(int, Comm_dup, (MPI_Comm comm, MPI_Comm *newcomm))
GOCOLL_DECLARE(int, Comm_split, (MPI_Comm comm, int color, int key, MPI_Comm *newcomm))
GOCOLL_DECLARE(int, Comm_split_type, (MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm))
GOCOLL_DECLARE(int, Comm_free, (MPI_Comm *comm))
GOCOLL_DECLARE(int, Comm_compare, (MPI_Comm comm1, MPI_Comm comm2, int *result))
GOCOLL_DECLARE(int, Comm_set_errhandler, (MPI_Comm comm, MPI_Errhandler errhandler))
GOCOLL_DECLARE(int, Comm_get_errhandler, (MPI_Comm comm, MPI_Errhandler *errhandler))
GOCOLL_DECLARE(int, Error_string, (int errorcode, char *string, int *resultlen))
GOCOLL_DECLARE(int, Error_class, (int errorcode, int *errorclass))

GOCOLL_DECLARE(int, Type_size, (MPI_Datatype datatype, int *size))
GOCOLL_DECLARE(int, Type_contiguous, (int count, MPI_Datatype oldtype, MPI_Datatype *newtype))
GOCOLL_DECLARE(int, Type_commit, (MPI_Datatype *datatype))
GOCOLL_DECLARE(int, Type_free, (MPI_Datatype *datatype))
GOCOLL_DECLARE(int, Op_create, (MPI_User_function *user_fn, int commute, MPI_Op *op))
GOCOLL_DECLARE(int, Op_free, (MPI_Op *op))
GOCOLL_DECLARE(int, Op_commutative, (MPI_Op op, int *commute))

GOCOLL_DECLARE(int, Send, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm))
GOCOLL_DECLARE(int, Recv, (void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status *status))
GOCOLL_DECLARE(int, Sendrecv, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                               void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                               MPI_Comm comm, MPI_Status *status))
GOCOLL_DECLARE(int, Isend, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request))
GOCOLL_DECLARE(int, Irecv, (void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Request *request))
GOCOLL_DECLARE(int, Wait, (MPI_Request *request, MPI_Status *status))
GOCOLL_DECLARE(int, Waitall, (int count, MPI_Request array_of_requests[], MPI_Status *array_of_statuses))
GOCOLL_DECLARE(int, Test, (MPI_Request *request, int *flag, MPI_Status *status))
GOCOLL_DECLARE(int, Get_count, (const MPI_Status *status, MPI_Datatype datatype, int *count))
GOCOLL_DECLARE(int, Waitany, (int count, MPI_Request array_of_requests[], int *index, MPI_Status *status))
GOCOLL_DECLARE(int, Testall, (int count, MPI_Request array_of_requests[], int *flag, MPI_Status *array_of_statuses))
GOCOLL_DECLARE(int, Testany, (int count, MPI_Request array_of_requests[], int *index, int *flag, MPI_Status *status))
GOCOLL_DECLARE(int, Start, (MPI_Request *request))
GOCOLL_DECLARE(int, Startall, (int count, MPI_Request array_of_requests[]))
GOCOLL_DECLARE(int, Request_free, (MPI_Request *request))

GOCOLL_DECLARE(int, Barrier, (MPI_Comm comm))
GOCOLL_DECLARE(int, Bcast, (void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm))
GOCOLL_DECLARE(int, Reduce, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm))
GOCOLL_DECLARE(int, Gather, (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                             void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm))
GOCOLL_DECLARE(int, Allreduce, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm))
GOCOLL_DECLARE(int, Reduce_scatter, (const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op, MPI_Comm comm))
GOCOLL_DECLARE(int, Reduce_scatter_block, (const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm))
GOCOLL_DECLARE(int, Allgather, (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm))
GOCOLL_DECLARE(int, Allgatherv, (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                 void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm))

/* MPI-4 large-count forms */
GOCOLL_DECLARE(int, Allreduce_c, (const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm))
GOCOLL_DECLARE(int, Reduce_scatter_c, (const void *sendbuf, void *recvbuf, const MPI_Count recvcounts[], MPI_Datatype datatype, MPI_Op op, MPI_Comm comm))
GOCOLL_DECLARE(int, Reduce_scatter_block_c, (const void *sendbuf, void *recvbuf, MPI_Count recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm))
GOCOLL_DECLARE(int, Allgather_c, (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                                  void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm))

/* Nonblocking collectives (MPI-3) and their large-count forms (MPI-4). */
GOCOLL_DECLARE(int, Iallreduce, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request))
GOCOLL_DECLARE(int, Ireduce_scatter, (const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request))
GOCOLL_DECLARE(int, Ireduce_scatter_block, (const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request))
GOCOLL_DECLARE(int, Iallgather, (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                 void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request))
GOCOLL_DECLARE(int, Iallreduce_c, (const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request))
GOCOLL_DECLARE(int, Ireduce_scatter_c, (const void *sendbuf, void *recvbuf, const MPI_Count recvcounts[], MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request))
GOCOLL_DECLARE(int, Ireduce_scatter_block_c, (const void *sendbuf, void *recvbuf, MPI_Count recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request))
GOCOLL_DECLARE(int, Iallgather_c, (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                                   void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request))

/* Persistent collectives (MPI-4): prepared once, run by MPI_Start. */
GOCOLL_DECLARE(int, Allreduce_init, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request))
GOCOLL_DECLARE(int, Reduce_scatter_init, (const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request))
GOCOLL_DECLARE(int, Reduce_scatter_block_init, (const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request))
GOCOLL_DECLARE(int, Allgather_init, (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                     void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request))
GOCOLL_DECLARE(int, Allreduce_init_c, (const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request))
GOCOLL_DECLARE(int, Reduce_scatter_init_c, (const void *sendbuf, void *recvbuf, const MPI_Count recvcounts[], MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request))
GOCOLL_DECLARE(int, Reduce_scatter_block_init_c, (const void *sendbuf, void *recvbuf, MPI_Count recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request))
GOCOLL_DECLARE(int, Allgather_init_c, (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                                       void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request))

/* ---- CUDA: is device memory accepted? (MPICH 4's MPIX_ names and values) ----
 * Every call above that takes a buffer accepts CUDA device memory when
 * gocoll can use CUDA in this process (the driver is there, GOCOLL_CUDA
 * is not off): these answer 1 then, and 0 otherwise. Level Zero and HIP
 * are never supported. MPIX_Query_cuda_support is also Open MPI's name
 * (mpi-ext.h). */
#define MPIX_GPU_SUPPORT_CUDA (0)
#define MPIX_GPU_SUPPORT_ZE   (1)
#define MPIX_GPU_SUPPORT_HIP  (2)
#define GOCOLL_DECLARE_X(ret, name, args) ret MPIX_##name args; ret PMPIX_##name args;
GOCOLL_DECLARE_X(int, GPU_query_support, (int gpu_type, int *is_supported))
GOCOLL_DECLARE_X(int, Query_cuda_support, (void))
GOCOLL_DECLARE_X(int, Query_ze_support, (void))
GOCOLL_DECLARE_X(int, Query_hip_support, (void))
#undef GOCOLL_DECLARE_X

#undef GOCOLL_DECLARE

#if defined(__cplusplus)
}
#endif

#endif /* GOCOLL_MPI_H */
