/*
 * gpucalls: the calls beyond the four collectives on CUDA device memory,
 * through gocoll's own mpi.h (the standalone library; under LD_PRELOAD
 * these are the host MPI's): MPI_Bcast, MPI_Reduce and MPI_Gather from
 * every root, MPI_Allgatherv packed and with displacements (each rank its
 * own, with gaps that must keep their bytes), in place and not; and
 * point-to-point: MPI_Send/MPI_Recv, MPI_Sendrecv, MPI_Isend/MPI_Irecv
 * with MPI_Waitall and MPI_Test, device to device, device to host and
 * host to device, to oneself, MPI_ANY_SOURCE/MPI_ANY_TAG with the status
 * and MPI_Get_count, a truncated receive (MPI_ERR_TRUNCATE, the count
 * that fit, nothing written past the buffer), and a send buffer written
 * with cuMemcpyHtoDAsync on a default stream and not synchronised (the
 * contract of device calls). First it checks that MPIX_Query_cuda_support
 * (mpi-ext.h) and MPIX_GPU_query_support say 1.
 *
 * Like gpucoll.c it loads the driver with dlopen (no CUDA header or
 * library at build time), makes each rank's device's primary context
 * current, compares every result with a reference it computes itself, and
 * prints "rank R: N passed, N failed" (each rank judges itself).
 *
 *   gpucalls [--quick]      the checks
 *   gpucalls --no-cuda      GOCOLL_CUDA=off: the queries must say 0, and
 *                           no device memory is used
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include <mpi-ext.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext, *CUstream;
#define CU_STREAM_LEGACY ((CUstream)0x1)
#define CU_STREAM_PER_THREAD ((CUstream)0x2)

static struct {
    CUresult (*Init)(unsigned);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(int *, int);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, int);
    CUresult (*DevicePrimaryCtxRelease)(int);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
} cu;

static const struct {
    void **fn;
    const char *name;
} cu_syms[] = {
    {(void **)&cu.Init, "cuInit"},
    {(void **)&cu.DeviceGetCount, "cuDeviceGetCount"},
    {(void **)&cu.DeviceGet, "cuDeviceGet"},
    {(void **)&cu.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
    {(void **)&cu.DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"},
    {(void **)&cu.CtxSetCurrent, "cuCtxSetCurrent"},
    {(void **)&cu.MemAlloc, "cuMemAlloc_v2"},
    {(void **)&cu.MemFree, "cuMemFree_v2"},
    {(void **)&cu.MemcpyHtoD, "cuMemcpyHtoD_v2"},
    {(void **)&cu.MemcpyDtoH, "cuMemcpyDtoH_v2"},
    {(void **)&cu.MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"},
};

static int rank, size, device, quick, passed, failed;

#define CU(call)                                                                          \
    do {                                                                                  \
        CUresult e_ = (call);                                                             \
        if (e_ != 0) {                                                                    \
            fprintf(stderr, "gpucalls: rank %d: %s failed: CUresult %d\n", rank, #call, e_); \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                 \
        }                                                                                 \
    } while (0)

static void load_driver(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
        fprintf(stderr, "gpucalls: rank %d: cannot load the CUDA driver: %s\n", rank, dlerror());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (size_t i = 0; i < sizeof cu_syms / sizeof cu_syms[0]; i++) {
        if (!(*cu_syms[i].fn = dlsym(lib, cu_syms[i].name))) {
            fprintf(stderr, "gpucalls: rank %d: the CUDA driver has no %s\n", rank, cu_syms[i].name);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    int ndev = 0;
    CU(cu.Init(0));
    CU(cu.DeviceGetCount(&ndev));
    if (ndev == 0) {
        fprintf(stderr, "gpucalls: rank %d: no CUDA device\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    CUcontext ctx;
    CU(cu.DeviceGet(&device, rank % ndev));
    CU(cu.DevicePrimaryCtxRetain(&ctx, device));
    CU(cu.CtxSetCurrent(ctx));
}

/* check counts one check; a failure prints what, in one write. */
static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...) {
    if (ok) {
        passed++;
        return;
    }
    failed++;
    char msg[512];
    int n = snprintf(msg, sizeof msg, "gpucalls: FAIL on rank %d: ", rank);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", msg);
}

/* rc_ok checks an MPI call's return code. */
static int rc_ok(int rc, const char *what) {
    if (rc == MPI_SUCCESS) return 1;
    char err[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, err, &len);
    check(0, "%s: MPI error %d (%s)", what, rc, err);
    return 0;
}

/* ---- device buffers ---- */

#define JUNK 0xa5

static CUdeviceptr dput(const void *data, size_t n) {
    CUdeviceptr p = 0;
    CU(cu.MemAlloc(&p, n ? n : 1));
    char *junk = NULL;
    if (!data) {
        junk = malloc(n ? n : 1);
        memset(junk, JUNK, n);
        data = junk;
    }
    if (n) CU(cu.MemcpyHtoD(p, data, n));
    free(junk);
    return p;
}

static void *dget(CUdeviceptr p, size_t n) {
    void *h = malloc(n ? n : 1);
    if (n) CU(cu.MemcpyDtoH(h, p, n));
    return h;
}

static void *vp(CUdeviceptr p) { return (void *)(uintptr_t)p; }

/* ints is n ints v(i) = seed*100003 + i. */
static int *ints(long n, int seed) {
    int *v = malloc(sizeof(int) * (n ? n : 1));
    for (long i = 0; i < n; i++) v[i] = seed * 100003 + (int)i;
    return v;
}

/* same compares n ints of got with want and reports the first that
 * differs. */
static void same(const char *what, const int *got, const int *want, long n) {
    for (long i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            check(0, "%s: element %ld is %d, want %d", what, i, got[i], want[i]);
            return;
        }
    }
    passed++;
}

/* ---- the rooted collectives ---- */

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

static void check_rooted(long n, int root, int inplace) {
    char what[160];
    size_t bytes = sizeof(int) * n;
    /* Bcast */
    int *want = ints(n, root + 7);
    CUdeviceptr b = dput(rank == root ? want : NULL, bytes);
    snprintf(what, sizeof what, "MPI_Bcast count=%ld root=%d", n, root);
    if (rc_ok(MPI_Bcast(vp(b), (int)n, MPI_INT, root, MPI_COMM_WORLD), what)) {
        int *got = dget(b, bytes);
        same(what, got, want, n);
        free(got);
    }
    CU(cu.MemFree(b));
    free(want);

    /* Reduce: MPI_SUM on the GPU, MPI_BAND and a user op on the host. */
    MPI_Op user;
    MPI_Op_create(user_sum, 1, &user);
    MPI_Op opv[] = {MPI_SUM, MPI_BAND, user};
    const char *opn[] = {"MPI_SUM", "MPI_BAND", "user op"};
    for (int k = 0; k < 3; k++) {
        int *mine = ints(n, rank + 1), *ref = ints(n, 1);
        for (int q = 1; q < size; q++) {
            int *x = ints(n, q + 1);
            for (long i = 0; i < n; i++) ref[i] = k == 1 ? ref[i] & x[i] : ref[i] + x[i];
            free(x);
        }
        CUdeviceptr s = 0, r = 0;
        const void *sbuf;
        if (rank == root && inplace) {
            r = dput(mine, bytes);
            sbuf = MPI_IN_PLACE;
        } else {
            s = dput(mine, bytes);
            sbuf = vp(s);
            if (rank == root) r = dput(NULL, bytes);
        }
        snprintf(what, sizeof what, "MPI_Reduce %s count=%ld root=%d%s", opn[k], n, root, inplace ? " in place" : "");
        if (rc_ok(MPI_Reduce(sbuf, rank == root ? vp(r) : NULL, (int)n, MPI_INT, opv[k], root, MPI_COMM_WORLD), what) &&
            rank == root) {
            int *got = dget(r, bytes);
            same(what, got, ref, n);
            free(got);
        }
        if (s) CU(cu.MemFree(s));
        if (r) CU(cu.MemFree(r));
        free(mine), free(ref);
    }
    MPI_Op_free(&user);

    /* Gather */
    int *all = malloc(bytes * size);
    for (int q = 0; q < size; q++) {
        int *x = ints(n, q + 50);
        memcpy(all + q * n, x, bytes);
        free(x);
    }
    int *mine = ints(n, rank + 50);
    CUdeviceptr s = 0, r = 0;
    const void *sbuf;
    if (rank == root && inplace) {
        int *init = malloc(bytes * size);
        memset(init, JUNK, bytes * size);
        memcpy(init + rank * n, mine, bytes);
        r = dput(init, bytes * size);
        free(init);
        sbuf = MPI_IN_PLACE;
    } else {
        s = dput(mine, bytes);
        sbuf = vp(s);
        if (rank == root) r = dput(NULL, bytes * size);
    }
    snprintf(what, sizeof what, "MPI_Gather count=%ld root=%d%s", n, root, inplace ? " in place" : "");
    if (rc_ok(MPI_Gather(sbuf, (int)n, MPI_INT, rank == root ? vp(r) : NULL, (int)n, MPI_INT, root, MPI_COMM_WORLD), what) &&
        rank == root) {
        int *got = dget(r, bytes * size);
        same(what, got, all, n * size);
        free(got);
    }
    if (s) CU(cu.MemFree(s));
    if (r) CU(cu.MemFree(r));
    free(all), free(mine);
}

/* ---- MPI_Allgatherv ---- */

static void check_allgatherv(long n, int displaced, int inplace) {
    int *counts = malloc(sizeof(int) * size), *displs = malloc(sizeof(int) * size);
    long end = 0;
    /* Uneven blocks, one empty where there are several ranks; displaced:
     * in reverse rank order, shifted by the rank, a gap after each. */
    for (int q = 0; q < size; q++) counts[q] = size > 1 && q == 1 ? 0 : (int)(n + q);
    if (displaced) {
        end = rank;
        for (int q = size - 1; q >= 0; q--) displs[q] = (int)end, end += counts[q] + 3;
    } else {
        for (int q = 0; q < size; q++) displs[q] = (int)end, end += counts[q];
    }
    int *want = malloc(sizeof(int) * (end ? end : 1));
    memset(want, JUNK, sizeof(int) * end);
    for (int q = 0; q < size; q++) {
        int *x = ints(counts[q], q + 80);
        memcpy(want + displs[q], x, sizeof(int) * counts[q]);
        free(x);
    }
    int *mine = ints(counts[rank], rank + 80);
    CUdeviceptr s = 0, r;
    const void *sbuf;
    if (inplace) {
        int *init = malloc(sizeof(int) * (end ? end : 1));
        memset(init, JUNK, sizeof(int) * end);
        memcpy(init + displs[rank], mine, sizeof(int) * counts[rank]);
        r = dput(init, sizeof(int) * end);
        free(init);
        sbuf = MPI_IN_PLACE;
    } else {
        s = dput(mine, sizeof(int) * counts[rank]);
        r = dput(NULL, sizeof(int) * end);
        sbuf = vp(s);
    }
    char what[160];
    snprintf(what, sizeof what, "MPI_Allgatherv count=%ld %s%s", n, displaced ? "displaced" : "packed", inplace ? " in place" : "");
    if (rc_ok(MPI_Allgatherv(sbuf, counts[rank], MPI_INT, vp(r), counts, displs, MPI_INT, MPI_COMM_WORLD), what)) {
        int *got = dget(r, sizeof(int) * end);
        same(what, got, want, end);
        free(got);
    }
    if (s) CU(cu.MemFree(s));
    CU(cu.MemFree(r));
    free(counts), free(displs), free(want), free(mine);
}

/* ---- point-to-point ---- */

/* buffer is n ints of the kind asked: device memory (dev) or host. */
struct buffer {
    int dev;
    CUdeviceptr d;
    int *h;
    long n;
};

static struct buffer make(int dev, long n, const int *data) {
    struct buffer b = {dev, 0, NULL, n};
    if (dev) {
        b.d = dput(data, sizeof(int) * n);
    } else {
        b.h = malloc(sizeof(int) * (n ? n : 1));
        if (data) memcpy(b.h, data, sizeof(int) * n);
        else memset(b.h, JUNK, sizeof(int) * n);
    }
    return b;
}
static void *addr(struct buffer b) { return b.dev ? vp(b.d) : (void *)b.h; }
static int *contents(struct buffer b) {
    if (b.dev) return dget(b.d, sizeof(int) * b.n);
    int *h = malloc(sizeof(int) * (b.n ? b.n : 1));
    memcpy(h, b.h, sizeof(int) * b.n);
    return h;
}
static void drop(struct buffer b) {
    if (b.dev) CU(cu.MemFree(b.d));
    else free(b.h);
}

/* ring sends n ints to the next rank and receives from the one before,
 * each side in device or host memory, with the call form given. */
static void ring(long n, int sdev, int rdev, int form) {
    static const char *forms[] = {"MPI_Send/MPI_Recv", "MPI_Sendrecv", "MPI_Isend/MPI_Irecv/MPI_Waitall", "MPI_Irecv/MPI_Test"};
    int next = (rank + 1) % size, prev = (rank + size - 1) % size, tag = 100 + form;
    int *mine = ints(n, rank + 200), *want = ints(n, prev + 200);
    struct buffer s = make(sdev, n, mine), r = make(rdev, n, NULL);
    MPI_Status st;
    memset(&st, 0, sizeof st);
    int ok = 1;
    char what[160];
    snprintf(what, sizeof what, "%s count=%ld %s to %s", forms[form], n, sdev ? "device" : "host", rdev ? "device" : "host");
    switch (form) {
    case 0: /* even ranks send first: no cycle of blocking sends */
        if (rank % 2 == 0) {
            ok = rc_ok(MPI_Send(addr(s), (int)n, MPI_INT, next, tag, MPI_COMM_WORLD), what) &&
                 rc_ok(MPI_Recv(addr(r), (int)n, MPI_INT, prev, tag, MPI_COMM_WORLD, &st), what);
        } else {
            ok = rc_ok(MPI_Recv(addr(r), (int)n, MPI_INT, prev, tag, MPI_COMM_WORLD, &st), what) &&
                 rc_ok(MPI_Send(addr(s), (int)n, MPI_INT, next, tag, MPI_COMM_WORLD), what);
        }
        break;
    case 1:
        ok = rc_ok(MPI_Sendrecv(addr(s), (int)n, MPI_INT, next, tag, addr(r), (int)n, MPI_INT, prev, tag, MPI_COMM_WORLD, &st), what);
        break;
    case 2: {
        MPI_Request q[2];
        MPI_Status sts[2];
        ok = rc_ok(MPI_Irecv(addr(r), (int)n, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &q[0]), what) &&
             rc_ok(MPI_Isend(addr(s), (int)n, MPI_INT, next, tag, MPI_COMM_WORLD, &q[1]), what) &&
             rc_ok(MPI_Waitall(2, q, sts), what);
        st = sts[0];
        break;
    }
    case 3: {
        MPI_Request q;
        int flag = 0;
        ok = rc_ok(MPI_Irecv(addr(r), (int)n, MPI_INT, prev, tag, MPI_COMM_WORLD, &q), what) &&
             rc_ok(MPI_Send(addr(s), (int)n, MPI_INT, next, tag, MPI_COMM_WORLD), what);
        while (ok && !flag) ok = rc_ok(MPI_Test(&q, &flag, &st), what);
        break;
    }
    }
    if (ok) {
        int count = -1;
        MPI_Get_count(&st, MPI_INT, &count);
        check(st.MPI_SOURCE == prev && st.MPI_TAG == tag && count == (int)n,
              "%s: status source %d tag %d count %d, want %d, %d, %ld", what, st.MPI_SOURCE, st.MPI_TAG, count, prev, tag, n);
        int *got = contents(r);
        same(what, got, want, n);
        free(got);
    }
    drop(s), drop(r);
    free(mine), free(want);
}

/* truncated: a message of n+5 ints into a device buffer of n, under
 * MPI_ERRORS_RETURN: MPI_ERR_TRUNCATE, the count that fit, those ints
 * received and the bytes past the buffer untouched. Then a message to
 * oneself, posted after the send. */
static void check_truncate_self(long n) {
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    int *mine = ints(n + 5, rank + 300), *want = ints(n + 5, prev + 300);
    struct buffer s = make(1, n + 5, mine), r = make(1, n + 5, NULL);
    MPI_Request q;
    MPI_Status st;
    char what[160];
    snprintf(what, sizeof what, "truncated receive of %ld ints into %ld", n + 5, n);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Isend(addr(s), (int)n + 5, MPI_INT, next, 7, MPI_COMM_WORLD, &q);
    int rc = MPI_Recv(addr(r), (int)n, MPI_INT, prev, 7, MPI_COMM_WORLD, &st);
    int class = -1, count = -1;
    MPI_Error_class(rc, &class);
    MPI_Get_count(&st, MPI_INT, &count);
    check(class == MPI_ERR_TRUNCATE && count == (int)n, "%s: error class %d, count %d", what, class, count);
    rc_ok(MPI_Wait(&q, MPI_STATUS_IGNORE), what);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    int *got = contents(r);
    for (int i = 0; i < 5; i++) want[n + i] = (int)(JUNK * 0x01010101u);
    same(what, got, want, n + 5);
    free(got);
    drop(r);

    /* To oneself. */
    r = make(1, n + 5, NULL);
    snprintf(what, sizeof what, "device message of %ld ints to oneself", n + 5);
    if (rc_ok(MPI_Isend(addr(s), (int)n + 5, MPI_INT, rank, 8, MPI_COMM_WORLD, &q), what) &&
        rc_ok(MPI_Recv(addr(r), (int)n + 5, MPI_INT, rank, 8, MPI_COMM_WORLD, &st), what) &&
        rc_ok(MPI_Wait(&q, MPI_STATUS_IGNORE), what)) {
        got = contents(r);
        same(what, got, mine, n + 5);
        free(got);
    }
    drop(s), drop(r);
    free(mine), free(want);
}

/* order: the send buffer written with cuMemcpyHtoDAsync on a default
 * stream, not synchronised, then MPI_Send at once: the message must be
 * the new bytes. */
static void check_order(long n) {
    CUstream streams[] = {NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD};
    const char *names[] = {"the NULL stream", "CU_STREAM_LEGACY", "CU_STREAM_PER_THREAD"};
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    for (int k = 0; k < 3; k++) {
        int *mine = ints(n, rank + 400 + k), *want = ints(n, prev + 400 + k);
        struct buffer s = make(1, n, NULL), r = make(1, n, NULL);
        CU(cu.MemcpyHtoDAsync(s.d, mine, sizeof(int) * n, streams[k]));
        char what[160];
        snprintf(what, sizeof what, "MPI_Sendrecv of a buffer just written on %s", names[k]);
        if (rc_ok(MPI_Sendrecv(addr(s), (int)n, MPI_INT, next, 9, addr(r), (int)n, MPI_INT, prev, 9, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE),
                  what)) {
            int *got = contents(r);
            same(what, got, want, n);
            free(got);
        }
        drop(s), drop(r);
        free(mine), free(want);
    }
}

static void queries(int want) {
    int yes = -1;
    check(MPIX_Query_cuda_support() == want, "MPIX_Query_cuda_support() = %d, want %d", MPIX_Query_cuda_support(), want);
    rc_ok(MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &yes), "MPIX_GPU_query_support");
    check(yes == want, "MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA) = %d, want %d", yes, want);
    check(MPIX_CUDA_AWARE_SUPPORT == 1, "MPIX_CUDA_AWARE_SUPPORT is %d", MPIX_CUDA_AWARE_SUPPORT);
}

int main(int argc, char **argv) {
    int cuda = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--no-cuda")) cuda = 0;
        else {
            if (rank == 0) fprintf(stderr, "usage: gpucalls [--quick] [--no-cuda]\n");
            MPI_Finalize();
            return 2;
        }
    }
    queries(cuda);
    if (cuda) {
        load_driver();
        long counts[] = {1, 1001, 70001};
        int ncounts = quick ? 2 : 3;
        for (int c = 0; c < ncounts; c++) {
            for (int inplace = 0; inplace < 2; inplace++) {
                for (int root = 0; root < size; root++) check_rooted(counts[c], root, inplace);
                check_allgatherv(counts[c], 0, inplace);
                check_allgatherv(counts[c], 1, inplace);
            }
            /* Point-to-point: past the eager size (4 KiB) at the larger
             * counts. */
            for (int form = 0; form < 4; form++)
                for (int sdev = 0; sdev < 2; sdev++)
                    for (int rdev = 0; rdev < 2; rdev++)
                        if (sdev || rdev) ring(counts[c], sdev, rdev, form);
            check_truncate_self(counts[c]);
            check_order(counts[c]);
        }
    }
    printf("rank %d: %d passed, %d failed\n", rank, passed, failed);
    fflush(stdout);
    MPI_Finalize();
    if (cuda) cu.DevicePrimaryCtxRelease(device);
    return failed ? 1 : 0;
}
