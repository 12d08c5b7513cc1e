/* The C ABI's fast path for small collectives on one host (fast.c). */
#ifndef GOCOLL_FAST_H
#define GOCOLL_FAST_H
#include "mpi.h"
#include "engine.h"
#include "../gpu/cuda.h"

/* Where the fast path found a call's buffers, when it asked the CUDA
 * driver (asked): a call it declines goes to Go with the answer, which
 * Go takes instead of asking the driver again. [0] is the send buffer,
 * [1] the receive buffer (bcast: its one buffer). */
struct gocoll_placed {
    int asked;
    const void *ptr[2];
    int dev[2]; /* 1: device or managed memory, attrs[i] filled */
    struct gocoll_cuda_attrs attrs[2];
};

/* Bit 1 << GOCOLL_CALL_x: the fast path takes call x (set by Go). */
extern int gocoll_fast_enabled;
/* Collective requests active in the process (set by Go): while there are
 * any, every call goes to Go, which runs it after them. */
extern int gocoll_fast_held;
/* Calls completed by the fast path, by GOCOLL_CALL_ code (mpi.c's FAST
 * counts, relaxed atomic adds; GOCOLL_REPORT and gocoll_test_counter read
 * them). */
extern long long gocoll_fast_calls[GOCOLL_NUM_CALLS];
long long gocoll_fast_count(int call);

void gocoll_fast_attach(int comm, void *base, int p, int rank, long slot, long data_off, int crowded);
void gocoll_fast_detach(int comm);
/* Each returns -1 when the call is not for the fast path, else an MPI code. */
int gocoll_fast_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, struct gocoll_placed *pl);
int gocoll_fast_reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype dt, MPI_Op op, MPI_Comm comm, struct gocoll_placed *pl);
int gocoll_fast_reduce_scatter_block(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, struct gocoll_placed *pl);
int gocoll_fast_allgather(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm, struct gocoll_placed *pl);
int gocoll_fast_bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm, struct gocoll_placed *pl);
/* gocoll_fast_bcast_bytes: the same for a buffer Go has decoded (a
 * derived datatype): bytes contiguous bytes. */
int gocoll_fast_bcast_bytes(void *buf, long bytes, int root, MPI_Comm comm, struct gocoll_placed *pl);
int gocoll_fast_barrier(MPI_Comm comm);
#endif
