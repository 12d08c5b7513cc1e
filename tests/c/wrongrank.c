/*
 * wrongrank: an LD_PRELOAD library that makes the MPI library under it
 * give a wrong answer on one rank only, to show that the test programs'
 * verdicts catch it: it wraps the collectives named in WRONG_CALLS (a
 * comma-separated list of C names, e.g. MPI_Reduce_scatter_block, or
 * "all"), and at rank WRONG_RANK of MPI_COMM_WORLD adds 1 to the first
 * byte of each call's result after a successful call. The Fortran
 * bindings' calls are wrapped under their C names. Everything it calls
 * in the library it finds with dlsym(RTLD_NEXT), so that it loads into
 * any process (the launcher too) and with any MPI.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static int comm_rank(MPI_Comm c) {
    int (*real)(MPI_Comm, int *) = (int (*)(MPI_Comm, int *))dlsym(RTLD_NEXT, "MPI_Comm_rank");
    int r = -1;
    if (real) real(c, &r);
    return r;
}

static int wrong_here(const char *call) {
    static int rank = -2;
    const char *calls = getenv("WRONG_CALLS"), *want = getenv("WRONG_RANK");
    if (!calls || !want) return 0;
    if (strcmp(calls, "all") != 0) {
        size_t n = strlen(call);
        const char *p = calls;
        int found = 0;
        while ((p = strstr(p, call)) != NULL) {
            if ((p == calls || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) found = 1;
            p += n;
        }
        if (!found) return 0;
    }
    if (rank == -2) rank = comm_rank(MPI_COMM_WORLD);
    return rank == atoi(want);
}

/* spoil adds 1 to the first byte of count elements of dt at buf. */
static void spoil(void *buf, long count, MPI_Datatype dt) {
    int (*type_size)(MPI_Datatype, int *) = (int (*)(MPI_Datatype, int *))dlsym(RTLD_NEXT, "MPI_Type_size");
    int size = 0;
    if (!buf || buf == MPI_IN_PLACE || count <= 0 || !type_size || type_size(dt, &size) != MPI_SUCCESS || size <= 0) return;
    ((unsigned char *)buf)[0]++;
}

/* REAL declares real, the library's own name (the next definition). */
#define REAL(name)                                                                 \
    static __typeof__(&name) real;                                                 \
    if (!real) real = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c) {
    REAL(MPI_Allreduce);
    int rc = real(s, r, n, t, o, c);
    if (rc == MPI_SUCCESS && wrong_here("MPI_Allreduce")) spoil(r, n, t);
    return rc;
}

int MPI_Reduce_scatter_block(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c) {
    REAL(MPI_Reduce_scatter_block);
    int rc = real(s, r, n, t, o, c);
    if (rc == MPI_SUCCESS && wrong_here("MPI_Reduce_scatter_block")) spoil(r, n, t);
    return rc;
}

int MPI_Reduce_scatter(const void *s, void *r, const int counts[], MPI_Datatype t, MPI_Op o, MPI_Comm c) {
    REAL(MPI_Reduce_scatter);
    int rc = real(s, r, counts, t, o, c), me = comm_rank(c);
    if (rc == MPI_SUCCESS && wrong_here("MPI_Reduce_scatter")) spoil(r, counts[me], t);
    return rc;
}

int MPI_Allgather(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c) {
    REAL(MPI_Allgather);
    int rc = real(s, sn, st, r, rn, rt, c);
    if (rc == MPI_SUCCESS && wrong_here("MPI_Allgather")) spoil(r, rn, rt);
    return rc;
}

int MPI_Bcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c) {
    REAL(MPI_Bcast);
    int rc = real(b, n, t, root, c), me = comm_rank(c);
    if (rc == MPI_SUCCESS && me != root && wrong_here("MPI_Bcast")) spoil(b, n, t);
    return rc;
}

int MPI_Reduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, int root, MPI_Comm c) {
    REAL(MPI_Reduce);
    int rc = real(s, r, n, t, o, root, c), me = comm_rank(c);
    if (rc == MPI_SUCCESS && me == root && wrong_here("MPI_Reduce")) spoil(r, n, t);
    return rc;
}

/* The Fortran bindings (gfortran's names), whose handles are the C ones
 * in the MPICH ABI. */
void mpi_allreduce_(void *s, void *r, MPI_Fint *n, MPI_Fint *t, MPI_Fint *o, MPI_Fint *c, MPI_Fint *ierr) {
    REAL(mpi_allreduce_);
    real(s, r, n, t, o, c, ierr);
    if (*ierr == MPI_SUCCESS && wrong_here("MPI_Allreduce")) spoil(r, *n, (MPI_Datatype)*t);
}

void mpi_reduce_scatter_block_(void *s, void *r, MPI_Fint *n, MPI_Fint *t, MPI_Fint *o, MPI_Fint *c, MPI_Fint *ierr) {
    REAL(mpi_reduce_scatter_block_);
    real(s, r, n, t, o, c, ierr);
    if (*ierr == MPI_SUCCESS && wrong_here("MPI_Reduce_scatter_block")) spoil(r, *n, (MPI_Datatype)*t);
}
