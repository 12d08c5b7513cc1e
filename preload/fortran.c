/*
 * Fortran entry points. Open MPI's Fortran bindings (mpif.h, `use mpi`,
 * `use mpi_f08`) call PMPI_Allreduce and friends directly, so a C-only
 * preload would never see a Fortran program's collectives: the library
 * therefore defines the Fortran names too, ahead of libmpi_mpifh and
 * libmpi_usempif08, and converts as Open MPI's own wrappers do: handles
 * with PMPI_Comm_f2c, PMPI_Type_f2c and PMPI_Op_f2c, the Fortran
 * MPI_IN_PLACE and MPI_BOTTOM (addresses of common blocks) to C's, and the
 * result into ierror. The mpi_f08 routines take the same arguments (a
 * TYPE(MPI_Comm) is one INTEGER, passed by reference), with an OPTIONAL
 * ierror that may be absent (NULL).
 *
 * MPICH's Fortran library calls the C MPI_ functions, which the library
 * intercepts anyway: under MPICH each Fortran name forwards to the next
 * definition of the same name (MPICH's own).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include "internal.h"

typedef int F; /* MPI_Fint */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void *in_place[4], *bottom[4];
static int ok;

static void lookup(void) {
    static const char *const ip[] = {"mpi_fortran_in_place_", "mpi_fortran_in_place", "mpi_fortran_in_place__", "MPI_FORTRAN_IN_PLACE"};
    static const char *const bt[] = {"mpi_fortran_bottom_", "mpi_fortran_bottom", "mpi_fortran_bottom__", "MPI_FORTRAN_BOTTOM"};
    ok = gc_lookup_functions() == 0;
    for (int i = 0; i < 4; i++) {
        in_place[i] = (void *)(uintptr_t)gc_sym_handle(ip[i]);
        bottom[i] = (void *)(uintptr_t)gc_sym_handle(bt[i]);
    }
}

static int is(const void *p, void *const *set) {
    for (int i = 0; i < 4; i++)
        if (set[i] && p == set[i]) return 1;
    return 0;
}

/* buf converts a Fortran buffer argument: MPI_IN_PLACE (send buffers
 * only) and MPI_BOTTOM. */
static const void *buf(const void *p, int send) {
    if (send && is(p, in_place)) return (void *)1; /* Open MPI's MPI_IN_PLACE */
    if (is(p, bottom)) return NULL;                 /* MPI_BOTTOM */
    return p;
}

static int ompi(void) {
    pthread_once(&once, lookup);
    return ok && gc_flavor == GC_OMPI;
}

/* next returns the next definition of a Fortran name (MPICH's). */
static void *next(const char *name) {
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) fprintf(stderr, "gocoll: no %s in the host MPI\n", name);
    return p;
}

/* SET stores a result in ierror, which mpi_f08 callers may omit (NULL);
 * the call is made either way. */
#define SET(ierr, call)       \
    do {                      \
        int rc_ = (call);     \
        if (ierr) *(ierr) = rc_; \
    } while (0)

#define ALLREDUCE(name)                                                                                   \
    void name(const void *s, void *r, F *count, F *dt, F *op, F *comm, F *ierr) {                         \
        if (!ompi()) {                                                                                    \
            static void (*fn)(const void *, void *, F *, F *, F *, F *, F *);                             \
            if (!fn) fn = next(#name);                                                                    \
            if (fn) fn(s, r, count, dt, op, comm, ierr); else SET(ierr, 16);                              \
            return;                                                                                       \
        }                                                                                                 \
        SET(ierr, gc_allreduce(buf(s, 1), (void *)buf(r, 0), *count, gc_p.Type_f2c(*dt), gc_p.Op_f2c(*op), \
                               gc_p.Comm_f2c(*comm), 0));                                                 \
    }

#define REDUCE_SCATTER_BLOCK(name)                                                                            \
    void name(const void *s, void *r, F *count, F *dt, F *op, F *comm, F *ierr) {                             \
        if (!ompi()) {                                                                                        \
            static void (*fn)(const void *, void *, F *, F *, F *, F *, F *);                                 \
            if (!fn) fn = next(#name);                                                                        \
            if (fn) fn(s, r, count, dt, op, comm, ierr); else SET(ierr, 16);                                  \
            return;                                                                                           \
        }                                                                                                     \
        SET(ierr, gc_reduce_scatter_block(buf(s, 1), (void *)buf(r, 0), *count, gc_p.Type_f2c(*dt),          \
                                          gc_p.Op_f2c(*op), gc_p.Comm_f2c(*comm), 0));                        \
    }

#define REDUCE_SCATTER(name)                                                                               \
    void name(const void *s, void *r, F *counts, F *dt, F *op, F *comm, F *ierr) {                         \
        if (!ompi()) {                                                                                     \
            static void (*fn)(const void *, void *, F *, F *, F *, F *, F *);                              \
            if (!fn) fn = next(#name);                                                                     \
            if (fn) fn(s, r, counts, dt, op, comm, ierr); else SET(ierr, 16);                              \
            return;                                                                                        \
        }                                                                                                  \
        SET(ierr, gc_reduce_scatter(buf(s, 1), (void *)buf(r, 0), counts, 0, gc_p.Type_f2c(*dt),          \
                                    gc_p.Op_f2c(*op), gc_p.Comm_f2c(*comm)));                              \
    }

#define ALLGATHER(name)                                                                                       \
    void name(const void *s, F *scount, F *stype, void *r, F *rcount, F *rtype, F *comm, F *ierr) {          \
        if (!ompi()) {                                                                                        \
            static void (*fn)(const void *, F *, F *, void *, F *, F *, F *, F *);                            \
            if (!fn) fn = next(#name);                                                                        \
            if (fn) fn(s, scount, stype, r, rcount, rtype, comm, ierr); else SET(ierr, 16);                   \
            return;                                                                                           \
        }                                                                                                     \
        const void *sb = buf(s, 1);                                                                           \
        SET(ierr, gc_allgather(sb, *scount, sb == (void *)1 ? 0 : gc_p.Type_f2c(*stype), (void *)buf(r, 0), \
                               *rcount, gc_p.Type_f2c(*rtype), gc_p.Comm_f2c(*comm), 0));                     \
    }

/* gfortran's mpi_x_, other compilers' mpi_x, mpi_x__ and MPI_X, and
 * Open MPI's mpi_f08 module procedures mpi_x_f08_. */
ALLREDUCE(mpi_allreduce_)
ALLREDUCE(mpi_allreduce)
ALLREDUCE(mpi_allreduce__)
ALLREDUCE(MPI_ALLREDUCE)
ALLREDUCE(mpi_allreduce_f08_)
REDUCE_SCATTER_BLOCK(mpi_reduce_scatter_block_)
REDUCE_SCATTER_BLOCK(mpi_reduce_scatter_block)
REDUCE_SCATTER_BLOCK(mpi_reduce_scatter_block__)
REDUCE_SCATTER_BLOCK(MPI_REDUCE_SCATTER_BLOCK)
REDUCE_SCATTER_BLOCK(mpi_reduce_scatter_block_f08_)
REDUCE_SCATTER(mpi_reduce_scatter_)
REDUCE_SCATTER(mpi_reduce_scatter)
REDUCE_SCATTER(mpi_reduce_scatter__)
REDUCE_SCATTER(MPI_REDUCE_SCATTER)
REDUCE_SCATTER(mpi_reduce_scatter_f08_)
ALLGATHER(mpi_allgather_)
ALLGATHER(mpi_allgather)
ALLGATHER(mpi_allgather__)
ALLGATHER(MPI_ALLGATHER)
ALLGATHER(mpi_allgather_f08_)
