/* The C fast path for small collectives on one host (fast.c). */
#ifndef GOCOLL_FAST_H
#define GOCOLL_FAST_H
#include "mpi.h"

enum {
    FAST_ALLREDUCE = 1,
    FAST_REDUCE_SCATTER_BLOCK = 2,
    FAST_ALLGATHER = 4,
    FAST_BARRIER = 8,
};
extern int gocoll_fast_enabled;
/* Calls completed by the fast path, by FAST_ bit (mpi.c's FAST counts,
 * relaxed atomic adds; GOCOLL_REPORT and gocoll_test_counter read them). */
extern long long gocoll_fast_calls[FAST_BARRIER + 1];
long long gocoll_fast_count(int which);

void gocoll_fast_attach(int comm, void *base, int p, int rank, long slot, long data_off, long ctl_off, long bell_off, int crowded);
void gocoll_fast_detach(int comm);
/* Each returns -1 when the call is not for the fast path, else an MPI code. */
int gocoll_fast_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm);
int gocoll_fast_reduce_scatter_block(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm);
int gocoll_fast_allgather(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm);
int gocoll_fast_barrier(MPI_Comm comm);
#endif
