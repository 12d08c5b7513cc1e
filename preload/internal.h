/*
 * The C half's private declarations: the host MPI's PMPI_ functions and
 * predefined handles, found at run time (pmpi.c), and the entry points'
 * helpers (shim.c, fortran.c). Not seen by Go.
 *
 * Names: every C name of this package, its C files' and its Go exports'
 * (gc_start, gc_run, ... in the .go files), starts with gc_ (the MPI
 * names aside), as libgocoll.so's start with gocoll_, so that a symbol
 * says which library it is from. The exceptions: gocoll_test_counter,
 * which tests look up under that name in either library, and the C
 * halves both libraries share, which keep their package's prefix:
 * gocoll_shm_ (intranode/engine), gocoll_cuda_ and gocoll_cu_ (gpu),
 * gocollLoadWait (internal/loadwait).
 */
#ifndef GOCOLL_PRELOAD_INTERNAL_H
#define GOCOLL_PRELOAD_INTERNAL_H

#include "preload.h"

typedef gc_handle H;
typedef int64_t C64; /* MPI_Count on both */

/*
 * The host's functions. Handles are passed as gc_handle: on x86-64 and
 * arm64 an int argument travels in the low half of a 64-bit register or
 * stack slot, so one declaration serves Open MPI's pointers and MPICH's
 * ints. Handles written back (out parameters) land in a zeroed gc_handle:
 * MPICH writes its low 4 bytes, Open MPI all 8.
 */
struct gc_pmpi {
    int (*Initialized)(int *);
    int (*Finalized)(int *);
    int (*Query_thread)(int *);
    int (*Allreduce)(const void *, void *, int, H, H, H);
    int (*Allreduce_c)(const void *, void *, C64, H, H, H);
    int (*Reduce_scatter)(const void *, void *, const int *, H, H, H);
    int (*Reduce_scatter_c)(const void *, void *, const C64 *, H, H, H);
    int (*Reduce_scatter_block)(const void *, void *, int, H, H, H);
    int (*Reduce_scatter_block_c)(const void *, void *, C64, H, H, H);
    int (*Allgather)(const void *, int, H, void *, int, H, H);
    int (*Allgather_c)(const void *, C64, H, void *, C64, H, H);
    int (*Allgatherv)(const void *, int, H, void *, const int *, const int *, H, H);
    int (*Comm_rank)(H, int *);
    int (*Comm_size)(H, int *);
    int (*Comm_test_inter)(H, int *);
    int (*Comm_group)(H, H *);
    int (*Comm_create)(H, H, H *);
    int (*Group_free)(H *);
    int (*Comm_free)(H *);
    int (*Comm_set_errhandler)(H, H);
    int (*Comm_get_errhandler)(H, H *);
    int (*Errhandler_free)(H *);
    int (*Comm_call_errhandler)(H, int);
    int (*Comm_create_keyval)(void *, void *, int *, void *);
    int (*Comm_set_attr)(H, int, void *);
    int (*Comm_get_attr)(H, int, void *, int *);
    int (*Comm_get_name)(H, char *, int *);
    int (*Type_get_extent)(H, int64_t *, int64_t *);
    int (*Op_commutative)(H, int *);
    int (*Reduce_local)(const void *, void *, int, H, H);
    int (*Reduce_local_c)(const void *, void *, C64, H, H);
    int (*Isend)(const void *, int, H, int, int, H, H *);
    int (*Irecv)(void *, int, H, int, int, H, H *);
    int (*Isend_c)(const void *, C64, H, int, int, H, H *);
    int (*Irecv_c)(void *, C64, H, int, int, H, H *);
    int (*Test)(H *, int *, void *);
    int (*Cancel)(H *);
    int (*Get_count)(const void *, H, int *);
    int (*Test_cancelled)(const void *, int *);
    int (*Get_library_version)(char *, int *);
    int (*Error_class)(int, int *);
    /* The nonblocking and persistent collectives (the _init forms are
     * Open MPI 4.1's PMPIX_ ones where it has no PMPI_), and the
     * completion calls (requests.c). */
    int (*Iallreduce)(const void *, void *, int, H, H, H, H *);
    int (*Iallreduce_c)(const void *, void *, C64, H, H, H, H *);
    int (*Ireduce_scatter)(const void *, void *, const int *, H, H, H, H *);
    int (*Ireduce_scatter_c)(const void *, void *, const C64 *, H, H, H, H *);
    int (*Ireduce_scatter_block)(const void *, void *, int, H, H, H, H *);
    int (*Ireduce_scatter_block_c)(const void *, void *, C64, H, H, H, H *);
    int (*Iallgather)(const void *, int, H, void *, int, H, H, H *);
    int (*Iallgather_c)(const void *, C64, H, void *, C64, H, H, H *);
    int (*Allreduce_init)(const void *, void *, int, H, H, H, H, H *);
    int (*Allreduce_init_c)(const void *, void *, C64, H, H, H, H, H *);
    int (*Reduce_scatter_init)(const void *, void *, const int *, H, H, H, H, H *);
    int (*Reduce_scatter_init_c)(const void *, void *, const C64 *, H, H, H, H, H *);
    int (*Reduce_scatter_block_init)(const void *, void *, int, H, H, H, H, H *);
    int (*Reduce_scatter_block_init_c)(const void *, void *, C64, H, H, H, H, H *);
    int (*Allgather_init)(const void *, int, H, void *, int, H, H, H, H *);
    int (*Allgather_init_c)(const void *, C64, H, void *, C64, H, H, H, H *);
    int (*Wait)(H *, void *);
    int (*Waitall)(int, H *, void *);
    int (*Waitany)(int, H *, int *, void *);
    int (*Waitsome)(int, H *, int *, int *, void *);
    int (*Testall)(int, H *, int *, void *);
    int (*Testany)(int, H *, int *, int *, void *);
    int (*Testsome)(int, H *, int *, int *, void *);
    int (*Start)(H *);
    int (*Startall)(int, H *);
    int (*Request_free)(H *);
    int (*Request_get_status)(H, int *, void *);
    H (*Comm_f2c)(int);
    H (*Type_f2c)(int);
    H (*Op_f2c)(int);
};
extern struct gc_pmpi gc_p;

/* The host's predefined handles and constants. */
struct gc_consts {
    H comm_null, comm_world, comm_self;
    H op_null, op_replace, op_no_op;
    H byte;
    H errors_return;
    void *in_place;
    int tag_ub_key;
    int any_source;
    int status_source, status_error; /* offsets in MPI_Status */
    int err_in_status;
    int status_size, status_tag;  /* MPI_Status's size, MPI_TAG's offset */
    void *status_ignore;          /* MPI_STATUS_IGNORE (and MPI_STATUSES_IGNORE) */
    H request_null;
    int undefined;                /* MPI_UNDEFINED */
};
extern struct gc_consts gc_c;

/* pmpi.c */
int gc_lookup_functions(void); /* looks once; 0 when the host MPI was found */
int gc_lookup_handles(void);   /* once MPI is initialized */
H gc_fix(H h);                 /* masks an MPICH handle to its 32 bits */

/* shim.c: the blocking collectives, for the Fortran entry points. */
int gc_allreduce(const void *sbuf, void *rbuf, C64 count, H dt, H op, H comm, int large);
int gc_reduce_scatter(const void *sbuf, void *rbuf, const void *counts, int counts64, H dt, H op, H comm);
int gc_reduce_scatter_block(const void *sbuf, void *rbuf, C64 count, H dt, H op, H comm, int large);
int gc_allgather(const void *sbuf, C64 scount, H stype, void *rbuf, C64 rcount, H rtype, H comm, int large);

/* device.c: whether a pointer is CUDA device memory. */
int gc_is_device(const void *p);

#endif
