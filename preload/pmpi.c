/*
 * Finding the host MPI at run time: which one it is, its PMPI_ functions
 * and its predefined handles, and the PMPI helpers the Go half calls.
 *
 * Nothing here runs at load time. The library has no load-time reference
 * to any MPI symbol, so it loads into any process (shells, launchers,
 * Python before it imports mpi4py), and into programs whose libmpi is
 * loaded with RTLD_LOCAL: the library is found with dlopen(RTLD_NOLOAD)
 * of its soname, which works however it was loaded, and dlsym on that
 * handle.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

struct gc_pmpi gc_p;
struct gc_consts gc_c;
int gc_flavor = GC_UNKNOWN;
static void *libmpi; /* the host library's handle, or NULL */
static char version[8192]; /* MPI_MAX_LIBRARY_VERSION_STRING: 256 on Open MPI, 8192 on MPICH */

H gc_fix(H h) { return gc_flavor == GC_MPICH ? (H)(uint32_t)h : h; }

/* sym finds a host symbol: in the library, then after this one. */
static void *sym(const char *name) {
    void *p = NULL;
    if (libmpi) p = dlsym(libmpi, name);
    if (!p) p = dlsym(RTLD_NEXT, name);
    return p;
}

/*
 * object finds an Open MPI predefined object as the application sees it.
 * Executables get copies of the ones they use (copy relocations), and the
 * library's references bind to those: RTLD_DEFAULT finds the copy first.
 * Where the global scope does not hold libmpi (mpi4py), the library's own
 * object is the only one.
 */
static H object(const char *name) {
    void *p = dlsym(RTLD_DEFAULT, name);
    if (!p && libmpi) p = dlsym(libmpi, name);
    return (H)(uintptr_t)p;
}

gc_handle gc_sym_handle(const char *name) { return object(name); }

static const char *const ompi_sonames[] = {"libmpi.so.40", "libmpi.so", NULL};
static const char *const mpich_sonames[] = {"libmpich.so.12", "libmpi.so.12", "libmpich.so", NULL};

static void *loaded(const char *const *names) {
    for (int i = 0; names[i]; i++) {
        void *h = dlopen(names[i], RTLD_LAZY | RTLD_NOLOAD);
        if (h) return h;
    }
    return NULL;
}

static pthread_once_t functions_once = PTHREAD_ONCE_INIT;
static int functions_found;
static int lookup_functions(void);
static void find_functions(void) { functions_found = lookup_functions() == 0; }

int gc_lookup_functions(void) {
    pthread_once(&functions_once, find_functions);
    return functions_found ? 0 : -1;
}

static int lookup_functions(void) {
    if ((libmpi = loaded(ompi_sonames)) && dlsym(libmpi, "ompi_mpi_comm_world"))
        gc_flavor = GC_OMPI;
    else if ((libmpi = loaded(mpich_sonames)) && dlsym(libmpi, "MPIR_Dup_fn"))
        gc_flavor = GC_MPICH;
    else if (dlsym(RTLD_DEFAULT, "ompi_mpi_comm_world"))
        gc_flavor = GC_OMPI;
    else if (dlsym(RTLD_DEFAULT, "MPIR_Dup_fn"))
        gc_flavor = GC_MPICH;
    else
        return -1;
#define F(name) gc_p.name = sym("PMPI_" #name)
    F(Initialized); F(Finalized); F(Query_thread);
    F(Allreduce); F(Allreduce_c); F(Reduce_scatter); F(Reduce_scatter_c);
    F(Reduce_scatter_block); F(Reduce_scatter_block_c); F(Allgather); F(Allgather_c); F(Allgatherv);
    F(Comm_rank); F(Comm_size); F(Comm_test_inter); F(Comm_group); F(Comm_create); F(Group_free);
    F(Comm_free); F(Comm_set_errhandler); F(Comm_get_errhandler); F(Errhandler_free);
    F(Comm_call_errhandler); F(Comm_create_keyval); F(Comm_set_attr); F(Comm_get_attr);
    F(Comm_get_name); F(Type_get_extent); F(Op_commutative); F(Reduce_local); F(Reduce_local_c);
    F(Isend); F(Irecv); F(Isend_c); F(Irecv_c); F(Test); F(Cancel); F(Get_count); F(Test_cancelled);
    F(Get_library_version); F(Error_class); F(Comm_f2c); F(Type_f2c); F(Op_f2c);
    F(Iallreduce); F(Iallreduce_c); F(Ireduce_scatter); F(Ireduce_scatter_c);
    F(Ireduce_scatter_block); F(Ireduce_scatter_block_c); F(Iallgather); F(Iallgather_c);
    F(Allreduce_init); F(Allreduce_init_c); F(Reduce_scatter_init); F(Reduce_scatter_init_c);
    F(Reduce_scatter_block_init); F(Reduce_scatter_block_init_c); F(Allgather_init); F(Allgather_init_c);
    F(Wait); F(Waitall); F(Waitany); F(Waitsome); F(Testall); F(Testany); F(Testsome);
    F(Start); F(Startall); F(Request_free); F(Request_get_status);
#undef F
    /* Open MPI 4.1 has the persistent collectives as its MPIX_ extension. */
#define X(name) if (!gc_p.name) gc_p.name = sym("PMPIX_" #name)
    X(Allreduce_init); X(Reduce_scatter_init); X(Reduce_scatter_block_init); X(Allgather_init);
#undef X
    if (!gc_p.Initialized || !gc_p.Finalized || !gc_p.Allreduce || !gc_p.Reduce_scatter ||
        !gc_p.Reduce_scatter_block || !gc_p.Allgather || !gc_p.Allgatherv || !gc_p.Comm_rank ||
        !gc_p.Comm_size || !gc_p.Comm_test_inter || !gc_p.Comm_group || !gc_p.Comm_create ||
        !gc_p.Group_free || !gc_p.Comm_free || !gc_p.Comm_set_errhandler || !gc_p.Comm_get_errhandler ||
        !gc_p.Errhandler_free || !gc_p.Comm_call_errhandler || !gc_p.Comm_create_keyval ||
        !gc_p.Comm_set_attr || !gc_p.Comm_get_attr || !gc_p.Comm_get_name || !gc_p.Type_get_extent ||
        !gc_p.Op_commutative || !gc_p.Reduce_local || !gc_p.Isend || !gc_p.Irecv || !gc_p.Test ||
        !gc_p.Cancel || !gc_p.Get_count || !gc_p.Test_cancelled || !gc_p.Error_class)
        return -1;
    if (gc_flavor == GC_OMPI && (!gc_p.Comm_f2c || !gc_p.Type_f2c || !gc_p.Op_f2c)) return -1;
    return 0;
}

/* The MPI status layouts: Open MPI {source, tag, error, cancelled,
 * ucount}, MPICH {count_lo, count_hi_and_cancelled, source, tag, error}. */
int gc_lookup_handles(void) {
    if (gc_flavor == GC_OMPI) {
        gc_c.comm_null = object("ompi_mpi_comm_null");
        gc_c.comm_world = object("ompi_mpi_comm_world");
        gc_c.comm_self = object("ompi_mpi_comm_self");
        gc_c.op_null = object("ompi_mpi_op_null");
        gc_c.op_replace = object("ompi_mpi_op_replace");
        gc_c.op_no_op = object("ompi_mpi_op_no_op");
        gc_c.byte = object("ompi_mpi_byte");
        gc_c.errors_return = object("ompi_mpi_errors_return");
        gc_c.in_place = (void *)1;
        gc_c.tag_ub_key = 0; /* the first of Open MPI's predefined keyvals */
        gc_c.any_source = -1;
        gc_c.status_source = 0;
        gc_c.status_error = 8;
        gc_c.err_in_status = 18;
        gc_c.status_size = 24; /* size_t _ucount after four ints */
        gc_c.status_tag = 4;
        gc_c.status_ignore = NULL;
        gc_c.request_null = object("ompi_request_null");
        gc_c.undefined = -32766;
        if (!gc_c.request_null) return -1;
        if (!gc_c.comm_world || !gc_c.comm_self || !gc_c.byte || !gc_c.errors_return) return -1;
    } else {
        gc_c.comm_null = 0x04000000;
        gc_c.comm_world = 0x44000000;
        gc_c.comm_self = 0x44000001;
        gc_c.op_null = 0x18000000;
        gc_c.op_replace = 0x5800000d;
        gc_c.op_no_op = 0x5800000e;
        gc_c.byte = 0x4c00010d;
        gc_c.errors_return = 0x54000001;
        gc_c.in_place = (void *)-1;
        gc_c.tag_ub_key = 0x64400001;
        gc_c.any_source = -2;
        gc_c.status_source = 8;
        gc_c.status_error = 16;
        gc_c.err_in_status = 17;
        gc_c.status_size = 20;
        gc_c.status_tag = 12;
        gc_c.status_ignore = (void *)1;
        gc_c.request_null = 0x2c000000;
        gc_c.undefined = -32766;
    }
    if (gc_p.Get_library_version) {
        int n = 0;
        gc_p.Get_library_version(version, &n);
        version[sizeof version - 1] = 0;
        char *nl = strchr(version, '\n');
        if (nl) *nl = 0;
    }
    return 0;
}

const char *gc_library_version(void) { return version; }
gc_handle gc_world(void) { return gc_c.comm_world; }
gc_handle gc_self(void) { return gc_c.comm_self; }

/* gc_thread_level is the thread support the host MPI provides
 * (MPI_THREAD_SINGLE 0 .. MPI_THREAD_MULTIPLE 3, the same numbers on
 * both hosts), or -1 if it cannot say. */
int gc_thread_level(void) {
    int level = -1;
    if (!gc_p.Query_thread || gc_p.Query_thread(&level) != 0) return -1;
    return level;
}

int gc_world_rank(void) {
    int r = -1;
    gc_p.Comm_rank(gc_c.comm_world, &r);
    return r;
}

/* Error classes: gocoll's (MPICH's values) to the host's. */
int gc_host_class(int c) {
    if (gc_flavor != GC_OMPI) return c;
    /* Open MPI numbers MPI_ERR_REQUEST 7 and shifts the classes after it. */
    switch (c) {
    case 0: case 1: case 2: case 3: case 4: case 5: case 6: return c;
    case 7: case 8: case 9: case 10: case 11: case 12: case 13: case 14: case 15: case 16: case 17: case 18:
        return c + 1; /* MPI_ERR_ROOT ... MPI_ERR_PENDING */
    case 19: return 7;  /* MPI_ERR_REQUEST */
    case 34: return 39; /* MPI_ERR_NO_MEM */
    default: return 16; /* MPI_ERR_OTHER (4.1 has no MPI_ERR_PROC_ABORTED) */
    }
}

int gc_errhandler_returns(gc_handle comm) {
    H eh = 0;
    if (gc_p.Comm_get_errhandler(comm, &eh) != 0) return 0;
    int r = gc_fix(eh) == gc_c.errors_return;
    gc_p.Errhandler_free(&eh);
    return r;
}

/*
 * gc_dup makes gocoll's private communicator with comm's group. It is
 * MPI_Comm_create, not MPI_Comm_dup, so that the application's attribute
 * copy callbacks do not run for a communicator it never sees. Errors on
 * it return to gocoll instead of aborting.
 */
int gc_dup(gc_handle comm, gc_handle *dup) {
    H g = 0, d = 0;
    int rc = gc_p.Comm_group(comm, &g);
    if (rc) return rc;
    rc = gc_p.Comm_create(comm, gc_fix(g), &d);
    gc_p.Group_free(&g);
    if (rc) return rc;
    d = gc_fix(d);
    rc = gc_p.Comm_set_errhandler(d, gc_c.errors_return);
    *dup = d;
    return rc;
}

int gc_comm_free(gc_handle *comm) { return gc_p.Comm_free(comm); }

/* MPI_TAG_UB is an attribute of MPI_COMM_WORLD only (MPI-4.0 9.1.1); it
 * holds for every communicator. */
int gc_tag_ub(int *ub) {
    int *v = NULL, flag = 0;
    int rc = gc_p.Comm_get_attr(gc_c.comm_world, gc_c.tag_ub_key, &v, &flag);
    if (rc == 0 && (!flag || !v)) rc = -1;
    if (rc == 0) *ub = *v;
    return rc;
}

int gc_type_extent(gc_handle dt, int64_t *lb, int64_t *extent) {
    return gc_p.Type_get_extent(dt, lb, extent);
}

int gc_comm_name(gc_handle comm, char *name, int len) {
    char buf[256]; /* MPI_MAX_OBJECT_NAME: 64 on Open MPI, 128 on MPICH */
    int n = 0;
    int rc = gc_p.Comm_get_name(comm, buf, &n);
    if (rc || n <= 0) {
        name[0] = 0;
        return rc;
    }
    if (n >= len) n = len - 1;
    memcpy(name, buf, n);
    name[n] = 0;
    return 0;
}

static H int_type(void) { return gc_flavor == GC_OMPI ? object("ompi_mpi_int") : 0x4c000405; }
static H op_min(void) { return gc_flavor == GC_OMPI ? object("ompi_mpi_op_min") : 0x58000002; }

int gc_allgather_int(gc_handle comm, int mine, int *all) {
    return gc_p.Allgather(&mine, 1, int_type(), all, 1, int_type(), comm);
}

int gc_allgatherv_bytes(gc_handle comm, const void *mine, int n, void *all, const int *counts, const int *displs) {
    return gc_p.Allgatherv(mine, n, gc_c.byte, all, counts, displs, gc_c.byte, comm);
}

int gc_allreduce_min_int(gc_handle comm, int *v) {
    return gc_p.Allreduce(gc_c.in_place, v, 1, int_type(), op_min(), comm);
}

/* gc_allreduce_max_doubles: the element-wise maximum of n doubles over
 * comm, in place (run-time tuning's agreement). */
int gc_allreduce_max_doubles(gc_handle comm, double *v, int n) {
    H dbl = gc_flavor == GC_OMPI ? object("ompi_mpi_double") : 0x4c00080b;
    H mx = gc_flavor == GC_OMPI ? object("ompi_mpi_op_max") : 0x58000001;
    return gc_p.Allreduce(gc_c.in_place, v, n, dbl, mx, comm);
}

/* Point-to-point for the hostmpi transport, in bytes. */
int gc_large_p2p(void) { return gc_p.Isend_c && gc_p.Irecv_c; }

int gc_isend(const void *buf, int64_t n, int peer, int tag, gc_handle comm, gc_handle *req) {
    *req = 0;
    if (n > 0x7fffffff) {
        if (!gc_p.Isend_c) return gc_host_class(2); /* MPI_ERR_COUNT */
        return gc_p.Isend_c(buf, n, gc_c.byte, peer, tag, comm, req);
    }
    return gc_p.Isend(buf, (int)n, gc_c.byte, peer, tag, comm, req);
}

int gc_irecv(void *buf, int64_t n, int peer, int tag, gc_handle comm, gc_handle *req) {
    *req = 0;
    if (peer < 0) peer = gc_c.any_source;
    if (n > 0x7fffffff) {
        if (!gc_p.Irecv_c) return gc_host_class(2);
        return gc_p.Irecv_c(buf, n, gc_c.byte, peer, tag, comm, req);
    }
    return gc_p.Irecv(buf, (int)n, gc_c.byte, peer, tag, comm, req);
}

int gc_test(gc_handle *req, int *flag, int64_t *n, int *source, int *err, int *cancelled) {
    _Alignas(8) char status[64];
    memset(status, 0, sizeof status);
    *flag = 0;
    int rc = gc_p.Test(req, flag, status);
    if (!*flag) return rc;
    int count = 0;
    memcpy(source, status + gc_c.status_source, sizeof(int));
    memcpy(err, status + gc_c.status_error, sizeof(int));
    if (rc != 0 && *err == 0) *err = rc;
    if (*err != 0) {
        int cls = *err;
        gc_p.Error_class(*err, &cls);
        *err = cls;
    }
    *cancelled = 0;
    gc_p.Test_cancelled(status, cancelled);
    if (gc_p.Get_count(status, gc_c.byte, &count) != 0 || count < 0) count = 0;
    *n = count;
    return 0;
}

int gc_cancel(gc_handle *req) { return gc_p.Cancel(req); }

int gc_reduce_local(const void *in, void *inout, int64_t count, gc_handle dt, gc_handle op) {
    if (count > 0x7fffffff) {
        if (!gc_p.Reduce_local_c) return gc_host_class(2);
        return gc_p.Reduce_local_c(in, inout, count, dt, op);
    }
    return gc_p.Reduce_local(in, inout, (int)count, dt, op);
}

/* gc_errors_return makes errors raised without a communicator (the
 * probe's MPI_Reduce_local, host.go) return instead of aborting: they go
 * to MPI_COMM_WORLD's handler (MPI-3) or MPI_COMM_SELF's (MPI-4), both
 * saved in saved; gc_errors_restore puts them back. */
void gc_errors_return(gc_handle saved[2]) {
    H comms[2] = {gc_c.comm_world, gc_c.comm_self};
    for (int i = 0; i < 2; i++) {
        saved[i] = 0;
        if (gc_p.Comm_get_errhandler(comms[i], &saved[i]) == 0) gc_p.Comm_set_errhandler(comms[i], gc_c.errors_return);
    }
}

void gc_errors_restore(gc_handle saved[2]) {
    H comms[2] = {gc_c.comm_world, gc_c.comm_self};
    for (int i = 0; i < 2; i++) {
        if (!saved[i]) continue;
        gc_p.Comm_set_errhandler(comms[i], saved[i]);
        gc_p.Errhandler_free(&saved[i]);
    }
}
