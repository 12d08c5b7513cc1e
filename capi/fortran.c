/*
 * Fortran bindings (mpif.h and `use mpi`): each routine takes every
 * argument by reference and forwards to the C PMPI_ function. Fortran
 * handles are the C handles (MPICH ABI). MPI_IN_PLACE, MPI_STATUS_IGNORE
 * and MPI_STATUSES_IGNORE are common blocks, recognised by address. Each routine is exported as mpi_x_ (gfortran), with pmpi_x_,
 * mpi_x__, mpi_x and MPI_X as aliases for other name-mangling schemes.
 */
#include <string.h>
#include "mpi.h"

/*
 * The common blocks live in the Fortran program (gfortran allocates them
 * there); the library only refers to them. Weak references: a program
 * that never mentions them leaves them NULL.
 */
extern int gocoll_in_place_ __attribute__((weak));
extern int gocoll_status_ignore_[5] __attribute__((weak));
extern int gocoll_statuses_ignore_[5] __attribute__((weak));

static int is(void *p, void *special) { return special != 0 && p == special; }
#define BUF(p) (is((p), &gocoll_in_place_) ? MPI_IN_PLACE : (void *)(p))
#define STATUS(s) (is((s), gocoll_status_ignore_) ? MPI_STATUS_IGNORE : (MPI_Status *)(s))
#define STATUSES(s) (is((s), gocoll_statuses_ignore_) ? MPI_STATUSES_IGNORE : (MPI_Status *)(s))

#define FORTRAN(lower, upper, params, body)                                          \
    void pmpi_##lower##_ params body                                                 \
    void mpi_##lower##_ params __attribute__((weak, alias("pmpi_" #lower "_")));    \
    void mpi_##lower##__ params __attribute__((weak, alias("pmpi_" #lower "_")));   \
    void mpi_##lower params __attribute__((weak, alias("pmpi_" #lower "_")));       \
    void MPI_##upper params __attribute__((weak, alias("pmpi_" #lower "_")));

typedef MPI_Fint F;

/* fstring copies a C string into a blank-padded Fortran string. */
static void fstring(char *dst, size_t dstlen, const char *src) {
    size_t n = strlen(src);
    if (n > dstlen) n = dstlen;
    memcpy(dst, src, n);
    memset(dst + n, ' ', dstlen - n);
}

FORTRAN(init, INIT, (F *ierr), { *ierr = PMPI_Init(0, 0); })
FORTRAN(init_thread, INIT_THREAD, (F *required, F *provided, F *ierr),
        { *ierr = PMPI_Init_thread(0, 0, *required, provided); })
FORTRAN(initialized, INITIALIZED, (F *flag, F *ierr), { *ierr = PMPI_Initialized(flag); })
FORTRAN(finalize, FINALIZE, (F *ierr), { *ierr = PMPI_Finalize(); })
FORTRAN(finalized, FINALIZED, (F *flag, F *ierr), { *ierr = PMPI_Finalized(flag); })
FORTRAN(abort, ABORT, (F *comm, F *code, F *ierr), { *ierr = PMPI_Abort(*comm, *code); })
FORTRAN(query_thread, QUERY_THREAD, (F *provided, F *ierr), { *ierr = PMPI_Query_thread(provided); })
FORTRAN(get_version, GET_VERSION, (F *v, F *sv, F *ierr), { *ierr = PMPI_Get_version(v, sv); })
FORTRAN(get_library_version, GET_LIBRARY_VERSION, (char *version, F *len, F *ierr, size_t versionlen), {
    char buf[MPI_MAX_LIBRARY_VERSION_STRING];
    *ierr = PMPI_Get_library_version(buf, len);
    fstring(version, versionlen, buf);
    if (*len > (F)versionlen) *len = (F)versionlen;
})
FORTRAN(get_processor_name, GET_PROCESSOR_NAME, (char *name, F *len, F *ierr, size_t namelen), {
    char buf[MPI_MAX_PROCESSOR_NAME];
    *ierr = PMPI_Get_processor_name(buf, len);
    fstring(name, namelen, buf);
    if (*len > (F)namelen) *len = (F)namelen;
})
FORTRAN(error_string, ERROR_STRING, (F *code, char *str, F *len, F *ierr, size_t strlen_), {
    char buf[MPI_MAX_ERROR_STRING];
    *ierr = PMPI_Error_string(*code, buf, len);
    fstring(str, strlen_, buf);
    if (*len > (F)strlen_) *len = (F)strlen_;
})
FORTRAN(error_class, ERROR_CLASS, (F *code, F *cls, F *ierr), { *ierr = PMPI_Error_class(*code, cls); })

double pmpi_wtime_(void) { return PMPI_Wtime(); }
double mpi_wtime_(void) __attribute__((weak, alias("pmpi_wtime_")));
double mpi_wtime__(void) __attribute__((weak, alias("pmpi_wtime_")));
double mpi_wtime(void) __attribute__((weak, alias("pmpi_wtime_")));
double MPI_WTIME(void) __attribute__((weak, alias("pmpi_wtime_")));
double pmpi_wtick_(void) { return PMPI_Wtick(); }
double mpi_wtick_(void) __attribute__((weak, alias("pmpi_wtick_")));
double mpi_wtick__(void) __attribute__((weak, alias("pmpi_wtick_")));
double mpi_wtick(void) __attribute__((weak, alias("pmpi_wtick_")));
double MPI_WTICK(void) __attribute__((weak, alias("pmpi_wtick_")));

FORTRAN(comm_rank, COMM_RANK, (F *comm, F *rank, F *ierr), { *ierr = PMPI_Comm_rank(*comm, rank); })
FORTRAN(comm_size, COMM_SIZE, (F *comm, F *size, F *ierr), { *ierr = PMPI_Comm_size(*comm, size); })
FORTRAN(comm_dup, COMM_DUP, (F *comm, F *newcomm, F *ierr), { *ierr = PMPI_Comm_dup(*comm, newcomm); })
FORTRAN(comm_split, COMM_SPLIT, (F *comm, F *color, F *key, F *newcomm, F *ierr),
        { *ierr = PMPI_Comm_split(*comm, *color, *key, newcomm); })
FORTRAN(comm_split_type, COMM_SPLIT_TYPE, (F *comm, F *type, F *key, F *info, F *newcomm, F *ierr),
        { *ierr = PMPI_Comm_split_type(*comm, *type, *key, *info, newcomm); })
FORTRAN(comm_free, COMM_FREE, (F *comm, F *ierr), { *ierr = PMPI_Comm_free(comm); })
FORTRAN(comm_compare, COMM_COMPARE, (F *c1, F *c2, F *result, F *ierr), { *ierr = PMPI_Comm_compare(*c1, *c2, result); })
FORTRAN(comm_set_errhandler, COMM_SET_ERRHANDLER, (F *comm, F *errh, F *ierr),
        { *ierr = PMPI_Comm_set_errhandler(*comm, *errh); })
FORTRAN(comm_get_errhandler, COMM_GET_ERRHANDLER, (F *comm, F *errh, F *ierr),
        { *ierr = PMPI_Comm_get_errhandler(*comm, errh); })

FORTRAN(type_size, TYPE_SIZE, (F *dt, F *size, F *ierr), { *ierr = PMPI_Type_size(*dt, size); })
FORTRAN(type_contiguous, TYPE_CONTIGUOUS, (F *count, F *old, F *newtype, F *ierr),
        { *ierr = PMPI_Type_contiguous(*count, *old, newtype); })
FORTRAN(type_commit, TYPE_COMMIT, (F *dt, F *ierr), { *ierr = PMPI_Type_commit(dt); })
FORTRAN(type_free, TYPE_FREE, (F *dt, F *ierr), { *ierr = PMPI_Type_free(dt); })
FORTRAN(op_create, OP_CREATE, (MPI_User_function *fn, F *commute, F *op, F *ierr),
        { *ierr = PMPI_Op_create(fn, *commute != 0, op); })
FORTRAN(op_free, OP_FREE, (F *op, F *ierr), { *ierr = PMPI_Op_free(op); })
FORTRAN(op_commutative, OP_COMMUTATIVE, (F *op, F *commute, F *ierr), { *ierr = PMPI_Op_commutative(*op, commute); })

FORTRAN(send, SEND, (void *buf, F *count, F *dt, F *dest, F *tag, F *comm, F *ierr),
        { *ierr = PMPI_Send(buf, *count, *dt, *dest, *tag, *comm); })
FORTRAN(recv, RECV, (void *buf, F *count, F *dt, F *src, F *tag, F *comm, F *status, F *ierr),
        { *ierr = PMPI_Recv(buf, *count, *dt, *src, *tag, *comm, STATUS(status)); })
FORTRAN(sendrecv, SENDRECV, (void *sbuf, F *scount, F *stype, F *dest, F *stag, void *rbuf, F *rcount, F *rtype,
                             F *src, F *rtag, F *comm, F *status, F *ierr),
        { *ierr = PMPI_Sendrecv(sbuf, *scount, *stype, *dest, *stag, rbuf, *rcount, *rtype, *src, *rtag, *comm, STATUS(status)); })
FORTRAN(isend, ISEND, (void *buf, F *count, F *dt, F *dest, F *tag, F *comm, F *req, F *ierr),
        { *ierr = PMPI_Isend(buf, *count, *dt, *dest, *tag, *comm, req); })
FORTRAN(irecv, IRECV, (void *buf, F *count, F *dt, F *src, F *tag, F *comm, F *req, F *ierr),
        { *ierr = PMPI_Irecv(buf, *count, *dt, *src, *tag, *comm, req); })
FORTRAN(wait, WAIT, (F *req, F *status, F *ierr), { *ierr = PMPI_Wait(req, STATUS(status)); })
FORTRAN(waitall, WAITALL, (F *count, F *reqs, F *statuses, F *ierr), { *ierr = PMPI_Waitall(*count, reqs, STATUSES(statuses)); })
FORTRAN(test, TEST, (F *req, F *flag, F *status, F *ierr), { *ierr = PMPI_Test(req, flag, STATUS(status)); })
FORTRAN(get_count, GET_COUNT, (F *status, F *dt, F *count, F *ierr), { *ierr = PMPI_Get_count((MPI_Status *)status, *dt, count); })

FORTRAN(barrier, BARRIER, (F *comm, F *ierr), { *ierr = PMPI_Barrier(*comm); })
FORTRAN(bcast, BCAST, (void *buf, F *count, F *dt, F *root, F *comm, F *ierr),
        { *ierr = PMPI_Bcast(buf, *count, *dt, *root, *comm); })
FORTRAN(reduce, REDUCE, (void *sbuf, void *rbuf, F *count, F *dt, F *op, F *root, F *comm, F *ierr),
        { *ierr = PMPI_Reduce(BUF(sbuf), rbuf, *count, *dt, *op, *root, *comm); })
FORTRAN(gather, GATHER, (void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype, F *root, F *comm, F *ierr),
        { *ierr = PMPI_Gather(BUF(sbuf), *scount, *stype, rbuf, *rcount, *rtype, *root, *comm); })
FORTRAN(allreduce, ALLREDUCE, (void *sbuf, void *rbuf, F *count, F *dt, F *op, F *comm, F *ierr),
        { *ierr = PMPI_Allreduce(BUF(sbuf), rbuf, *count, *dt, *op, *comm); })
FORTRAN(reduce_scatter, REDUCE_SCATTER, (void *sbuf, void *rbuf, F *counts, F *dt, F *op, F *comm, F *ierr),
        { *ierr = PMPI_Reduce_scatter(BUF(sbuf), rbuf, counts, *dt, *op, *comm); })
FORTRAN(reduce_scatter_block, REDUCE_SCATTER_BLOCK, (void *sbuf, void *rbuf, F *count, F *dt, F *op, F *comm, F *ierr),
        { *ierr = PMPI_Reduce_scatter_block(BUF(sbuf), rbuf, *count, *dt, *op, *comm); })
FORTRAN(allgather, ALLGATHER, (void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype, F *comm, F *ierr),
        { *ierr = PMPI_Allgather(BUF(sbuf), *scount, *stype, rbuf, *rcount, *rtype, *comm); })
FORTRAN(allgatherv, ALLGATHERV, (void *sbuf, F *scount, F *stype, void *rbuf, F *counts, F *displs, F *rtype, F *comm, F *ierr),
        { *ierr = PMPI_Allgatherv(BUF(sbuf), *scount, *stype, rbuf, counts, displs, *rtype, *comm); })

/* Nonblocking and persistent collectives. A Fortran request is the C one. */
FORTRAN(iallreduce, IALLREDUCE, (void *sbuf, void *rbuf, F *count, F *dt, F *op, F *comm, F *req, F *ierr),
        { *ierr = PMPI_Iallreduce(BUF(sbuf), rbuf, *count, *dt, *op, *comm, req); })
FORTRAN(ireduce_scatter, IREDUCE_SCATTER, (void *sbuf, void *rbuf, F *counts, F *dt, F *op, F *comm, F *req, F *ierr),
        { *ierr = PMPI_Ireduce_scatter(BUF(sbuf), rbuf, counts, *dt, *op, *comm, req); })
FORTRAN(ireduce_scatter_block, IREDUCE_SCATTER_BLOCK, (void *sbuf, void *rbuf, F *count, F *dt, F *op, F *comm, F *req, F *ierr),
        { *ierr = PMPI_Ireduce_scatter_block(BUF(sbuf), rbuf, *count, *dt, *op, *comm, req); })
FORTRAN(iallgather, IALLGATHER, (void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype, F *comm, F *req, F *ierr),
        { *ierr = PMPI_Iallgather(BUF(sbuf), *scount, *stype, rbuf, *rcount, *rtype, *comm, req); })
FORTRAN(allreduce_init, ALLREDUCE_INIT, (void *sbuf, void *rbuf, F *count, F *dt, F *op, F *comm, F *info, F *req, F *ierr),
        { *ierr = PMPI_Allreduce_init(BUF(sbuf), rbuf, *count, *dt, *op, *comm, *info, req); })
FORTRAN(reduce_scatter_init, REDUCE_SCATTER_INIT, (void *sbuf, void *rbuf, F *counts, F *dt, F *op, F *comm, F *info, F *req, F *ierr),
        { *ierr = PMPI_Reduce_scatter_init(BUF(sbuf), rbuf, counts, *dt, *op, *comm, *info, req); })
FORTRAN(reduce_scatter_block_init, REDUCE_SCATTER_BLOCK_INIT,
        (void *sbuf, void *rbuf, F *count, F *dt, F *op, F *comm, F *info, F *req, F *ierr),
        { *ierr = PMPI_Reduce_scatter_block_init(BUF(sbuf), rbuf, *count, *dt, *op, *comm, *info, req); })
FORTRAN(allgather_init, ALLGATHER_INIT,
        (void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype, F *comm, F *info, F *req, F *ierr),
        { *ierr = PMPI_Allgather_init(BUF(sbuf), *scount, *stype, rbuf, *rcount, *rtype, *comm, *info, req); })
FORTRAN(start, START, (F *req, F *ierr), { *ierr = PMPI_Start(req); })
FORTRAN(startall, STARTALL, (F *count, F *reqs, F *ierr), { *ierr = PMPI_Startall(*count, reqs); })
FORTRAN(request_free, REQUEST_FREE, (F *req, F *ierr), { *ierr = PMPI_Request_free(req); })
FORTRAN(testall, TESTALL, (F *count, F *reqs, F *flag, F *statuses, F *ierr),
        { *ierr = PMPI_Testall(*count, reqs, flag, STATUSES(statuses)); })
/* Fortran indices count from 1; MPI_UNDEFINED (nothing to complete) stays. */
FORTRAN(waitany, WAITANY, (F *count, F *reqs, F *index, F *status, F *ierr), {
    *ierr = PMPI_Waitany(*count, reqs, index, STATUS(status));
    if (*index >= 0) ++*index;
})
FORTRAN(testany, TESTANY, (F *count, F *reqs, F *index, F *flag, F *status, F *ierr), {
    *ierr = PMPI_Testany(*count, reqs, index, flag, STATUS(status));
    if (*index >= 0) ++*index;
})
