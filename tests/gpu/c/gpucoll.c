/*
 * gpucoll: gocoll's collectives on CUDA device memory, checked and timed,
 * with nothing from CUDA at build time: the driver (libcuda.so.1) is
 * loaded with dlopen and used through the few driver API calls declared
 * below, so the program builds anywhere (against gocoll's mpi.h, or a
 * host MPI's for LD_PRELOAD runs) and runs on a machine that has only
 * the NVIDIA driver. The CUDA runtime (libcudart) is used too when one
 * is found, for one group of checks on cudaMalloc'd memory; without it
 * that group is reported as not run.
 *
 * Every rank makes its device the current context as the runtime does
 * (cuDevicePrimaryCtxRetain, cuCtxSetCurrent) and runs the groups of
 * checks --checks names (default ops,order,realloc,cudart):
 *
 * ops       MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Reduce_scatter
 *           and MPI_Allgather on cuMemAlloc'd buffers, for every op and
 *           datatype gocoll reduces on the GPU (MPI_SUM, MPI_PROD,
 *           MPI_MAX, MPI_MIN on int32, uint32, int64, uint64, float,
 *           double, and float16/bfloat16 where the mpi.h has them) and
 *           for ops gocoll reduces on the host (MPI_BAND, a user op), in
 *           place and not, on counts from 1 to past one staging segment.
 * order     a send buffer written with cuMemcpyHtoDAsync from pageable
 *           memory on the legacy default stream (NULL and
 *           CU_STREAM_LEGACY) or the thread's per-thread default stream,
 *           with no synchronisation, then MPI_Allreduce at once: gocoll
 *           must wait for those streams. Written on a stream of the
 *           program's own, the buffer is synchronised first
 *           (cuStreamSynchronize), as the contract asks.
 * realloc   cycles of allocate, MPI_Allreduce/MPI_Allgather, free: each
 *           new allocation gets new data, often at the address just
 *           freed (how often is printed; CUDA decides), and a stale
 *           cache of allocations, IPC handles or mappings gives the old
 *           data.
 * misaligned
 *           device pointers 1 to 4 bytes past an element boundary:
 *           results must be right and the context still usable after
 *           (cuCtxSynchronize; a misaligned kernel's error is sticky and
 *           kills the context), and a later aligned call must work. The
 *           ranks agree (on host memory) after each case whether to go
 *           on, so that a killed context ends the group instead of
 *           hanging the job; the checks not run count as failed.
 * cudart    MPI_Allreduce on cudaMalloc'd buffers, when a libcudart loads.
 *
 * Each result is copied back and compared, bit for bit, with a reference
 * the program computes itself on the host (never by asking MPI). Each
 * rank judges its own results: it prints each of its failures, then
 * "rank R: N passed, N failed", and exits non-zero if any of its checks
 * failed (no verdict is combined through MPI). Then rank 0 prints a table
 * of MPI_Allreduce times on device and on host buffers from 8 B up.
 *
 *   gpucoll [--quick] [--checks LIST] [--max-bytes N] [--no-time] [--no-special]
 *
 * --no-special leaves out the NaNs and signed zeros of MPI_MAX and
 * MPI_MIN, whose results MPI leaves open: gocoll returns the canonical NaN
 * and orders -0 < +0, but under LD_PRELOAD the host MPI may run a call.
 * Exit status: 0 all passed, 1 a check failed, 2 usage or no usable
 * driver/device (said on standard error).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>

/* ---- the CUDA driver, loaded at run time ---- */

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext, *CUstream;
#define CU_STREAM_LEGACY ((CUstream)0x1)
#define CU_STREAM_PER_THREAD ((CUstream)0x2)
#define CU_STREAM_NON_BLOCKING 1u

static struct {
    CUresult (*Init)(unsigned);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(int *, int);
    CUresult (*DeviceGetName)(char *, int, int);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, int);
    CUresult (*DevicePrimaryCtxRelease)(int);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*CtxSynchronize)(void);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*MemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*StreamDestroy)(CUstream);
    CUresult (*GetErrorName)(CUresult, const char **);
} cu;

static const struct {
    void **fn;
    const char *name;
} cu_syms[] = {
    {(void **)&cu.Init, "cuInit"},
    {(void **)&cu.DriverGetVersion, "cuDriverGetVersion"},
    {(void **)&cu.DeviceGetCount, "cuDeviceGetCount"},
    {(void **)&cu.DeviceGet, "cuDeviceGet"},
    {(void **)&cu.DeviceGetName, "cuDeviceGetName"},
    {(void **)&cu.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
    {(void **)&cu.DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"},
    {(void **)&cu.CtxSetCurrent, "cuCtxSetCurrent"},
    {(void **)&cu.CtxSynchronize, "cuCtxSynchronize"},
    {(void **)&cu.MemAlloc, "cuMemAlloc_v2"},
    {(void **)&cu.MemFree, "cuMemFree_v2"},
    {(void **)&cu.MemcpyHtoD, "cuMemcpyHtoD_v2"},
    {(void **)&cu.MemcpyDtoH, "cuMemcpyDtoH_v2"},
    {(void **)&cu.MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"},
    {(void **)&cu.MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"},
    {(void **)&cu.StreamCreate, "cuStreamCreate"},
    {(void **)&cu.StreamSynchronize, "cuStreamSynchronize"},
    {(void **)&cu.StreamDestroy, "cuStreamDestroy_v2"},
    {(void **)&cu.GetErrorName, "cuGetErrorName"},
};

/* The CUDA runtime, when one loads. */
static struct {
    int (*SetDevice)(int);
    int (*Malloc)(void **, size_t);
    int (*Free)(void *);
    int (*Memcpy)(void *, const void *, size_t, int);
    int (*RuntimeGetVersion)(int *);
    const char *(*GetErrorString)(int);
} rt;
static const char *rt_name;
enum { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };

static int rank, size, quick, special = 1, device;
static long max_bytes = 256L << 20;
static int passed, failed;

static const char *cu_err(CUresult r) {
    const char *s = NULL;
    if (!cu.GetErrorName || cu.GetErrorName(r, &s) != 0 || !s) s = "unknown error";
    return s;
}

/* CU: the program's own driver calls must work; if one fails the job is
 * aborted (the launcher's status and the missing verdict lines say so). */
#define CU(call)                                                                                   \
    do {                                                                                           \
        CUresult e_ = (call);                                                                      \
        if (e_ != 0) {                                                                             \
            fprintf(stderr, "gpucoll: rank %d: %s failed: %s (%d)\n", rank, #call, cu_err(e_), e_); \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                          \
        }                                                                                          \
    } while (0)

static CUdeviceptr dalloc(size_t n) {
    CUdeviceptr p = 0;
    CU(cu.MemAlloc(&p, n ? n : 1));
    return p;
}
static void *vp(CUdeviceptr p) { return (void *)(uintptr_t)p; }

static void load_driver(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
        fprintf(stderr, "gpucoll: rank %d: cannot load the CUDA driver: %s\n", rank, dlerror());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (size_t i = 0; i < sizeof cu_syms / sizeof cu_syms[0]; i++) {
        *cu_syms[i].fn = dlsym(lib, cu_syms[i].name);
        if (!*cu_syms[i].fn) {
            fprintf(stderr, "gpucoll: rank %d: the CUDA driver has no %s\n", rank, cu_syms[i].name);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    int ndev = 0, ver = 0;
    CUresult e = cu.Init(0);
    if (e == 0) e = cu.DeviceGetCount(&ndev);
    if (e != 0 || ndev == 0) {
        fprintf(stderr, "gpucoll: rank %d: no CUDA device (%s)\n", rank, e ? cu_err(e) : "0 devices");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* One GPU: every rank shares it. As the runtime does: the device's
     * primary context, current on this thread. */
    CU(cu.DeviceGet(&device, rank % ndev));
    CUcontext ctx;
    CU(cu.DevicePrimaryCtxRetain(&ctx, device));
    CU(cu.CtxSetCurrent(ctx));
    char name[128] = "";
    cu.DeviceGetName(name, sizeof name, device);
    cu.DriverGetVersion(&ver);
    if (rank == 0)
        printf("gpucoll: %d ranks on %d GPU(s): %s, CUDA driver %d.%d%s\n", size, ndev, name, ver / 1000, ver % 1000 / 10,
               quick ? ", quick" : "");
}

/* load_runtime finds a libcudart ($GPUCOLL_CUDART, else the usual
 * names); without one the cudart checks are not run. */
static void load_runtime(void) {
    const char *names[] = {getenv("GPUCOLL_CUDART"), "libcudart.so", "libcudart.so.13", "libcudart.so.12",
                           "libcudart.so.11.0", "/usr/local/cuda/lib64/libcudart.so"};
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !rt_name; i++) {
        if (!names[i] || !*names[i]) continue;
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
        if (!lib) continue;
        *(void **)&rt.SetDevice = dlsym(lib, "cudaSetDevice");
        *(void **)&rt.Malloc = dlsym(lib, "cudaMalloc");
        *(void **)&rt.Free = dlsym(lib, "cudaFree");
        *(void **)&rt.Memcpy = dlsym(lib, "cudaMemcpy");
        *(void **)&rt.RuntimeGetVersion = dlsym(lib, "cudaRuntimeGetVersion");
        *(void **)&rt.GetErrorString = dlsym(lib, "cudaGetErrorString");
        if (rt.SetDevice && rt.Malloc && rt.Free && rt.Memcpy && rt.RuntimeGetVersion && rt.GetErrorString)
            rt_name = names[i];
    }
}

/* ---- element types ---- */

enum kind { I32, U32, I64, U64, F32, F64, F16, BF16 };

struct type {
    const char *name;
    MPI_Datatype dt;
    enum kind kind;
    int size;
};

static struct type types[] = {
    {"MPI_INT32_T", MPI_INT32_T, I32, 4}, {"MPI_UINT32_T", MPI_UINT32_T, U32, 4},
    {"MPI_INT64_T", MPI_INT64_T, I64, 8}, {"MPI_UINT64_T", MPI_UINT64_T, U64, 8},
    {"MPI_FLOAT", MPI_FLOAT, F32, 4},     {"MPI_DOUBLE", MPI_DOUBLE, F64, 8},
#ifdef MPIX_C_FLOAT16
    {"MPIX_C_FLOAT16", MPIX_C_FLOAT16, F16, 2},
#endif
#ifdef MPIX_BFLOAT16
    {"MPIX_BFLOAT16", MPIX_BFLOAT16, BF16, 2},
#endif
};
#define NTYPES ((int)(sizeof types / sizeof types[0]))

static const struct type *type_of(enum kind k) {
    for (int t = 0; t < NTYPES; t++)
        if (types[t].kind == k) return &types[t];
    return NULL;
}

/* binary16 and bfloat16 <-> float, rounding to nearest even (written out:
 * this test must not depend on the compiler's _Float16). */
static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, frac = h & 0x3ff, b;
    if (exp == 0x1f) b = sign | 0x7f800000 | frac << 13;
    else if (exp == 0) {
        float f = (float)frac / (1 << 24);
        return sign ? -f : f;
    } else b = sign | (exp + 112) << 23 | frac << 13;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static uint16_t f32_to_f16(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    uint16_t sign = (b >> 16) & 0x8000;
    int exp = (b >> 23) & 0xff;
    uint32_t frac = b & 0x7fffff;
    if (exp == 0xff) return frac ? (uint16_t)(sign | 0x7e00 | (frac >> 13)) : (uint16_t)(sign | 0x7c00);
    int e = exp - 112;
    if (e >= 1) {
        uint32_t h = (uint32_t)e << 10 | frac >> 13, rest = frac & 0x1fff;
        if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
        return h >= 0x7c00 ? (uint16_t)(sign | 0x7c00) : (uint16_t)(sign | h);
    }
    if (exp == 0) return sign;
    uint32_t m = frac | 0x800000;
    unsigned shift = (unsigned)(14 - e);
    if (shift > 25) return sign;
    uint32_t q = m >> shift, rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (q & 1))) q++;
    return (uint16_t)(sign | q);
}

static float bf16_to_f32(uint16_t h) {
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static uint16_t f32_to_bf16(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    if ((b & 0x7fffffff) > 0x7f800000) return (uint16_t)((b >> 16) | 0x40);
    b += 0x7fff + ((b >> 16) & 1);
    return (uint16_t)(b >> 16);
}

/* ---- ops, as gocoll defines them ---- */

enum op { SUM, PROD, MAX, MIN, BAND, USER };
static const char *op_names[] = {"MPI_SUM", "MPI_PROD", "MPI_MAX", "MPI_MIN", "MPI_BAND", "user op"};
static MPI_Op mpi_ops[6];

/* The user op: a sum of int32, applied by gocoll on the host. */
static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    int32_t *a = in, *b = inout;
    for (int i = 0; i < *len; i++) b[i] = (int32_t)((uint32_t)a[i] + (uint32_t)b[i]);
}

/* fmax/fmin as gocoll's: the canonical NaN for a NaN operand, +0 > -0. */
static double dmax(double x, double y) {
    if (isnan(x) || isnan(y)) return NAN;
    if (x > y) return x;
    if (y > x) return y;
    return signbit(x) && signbit(y) ? x : (signbit(x) ? y : x);
}
static double dmin(double x, double y) {
    if (isnan(x) || isnan(y)) return NAN;
    if (x < y) return x;
    if (y < x) return y;
    return signbit(x) ? x : y;
}

/* combine folds x into acc; MPI_MAX and MPI_MIN of a NaN give the
 * canonical NaN of the width; sums and products of NaNs may carry any
 * payload (the comparison allows it). */
static void combine(enum kind k, enum op op, void *acc, const void *x) {
    switch (k) {
#define INT(T, U)                                                                                  \
    {                                                                                              \
        T a = *(T *)acc, b = *(const T *)x, r = 0;                                                 \
        switch (op) {                                                                              \
        case SUM: case USER: r = (T)((U)a + (U)b); break;                                          \
        case PROD: r = (T)((U)a * (U)b); break;                                                    \
        case MAX: r = a > b ? a : b; break;                                                        \
        case MIN: r = a < b ? a : b; break;                                                        \
        case BAND: r = a & b; break;                                                               \
        }                                                                                          \
        *(T *)acc = r;                                                                             \
        return;                                                                                    \
    }
    case I32: INT(int32_t, uint32_t)
    case U32: INT(uint32_t, uint32_t)
    case I64: INT(int64_t, uint64_t)
    case U64: INT(uint64_t, uint64_t)
#undef INT
    default: break;
    }
    double a, b, r = 0;
    switch (k) {
    case F32: a = *(float *)acc, b = *(const float *)x; break;
    case F64: a = *(double *)acc, b = *(const double *)x; break;
    case F16: a = f16_to_f32(*(uint16_t *)acc), b = f16_to_f32(*(const uint16_t *)x); break;
    default: a = bf16_to_f32(*(uint16_t *)acc), b = bf16_to_f32(*(const uint16_t *)x); break;
    }
    switch (op) {
    case SUM: r = a + b; break;
    case PROD: r = a * b; break;
    case MAX: r = dmax(a, b); break;
    default: r = dmin(a, b); break;
    }
    if ((op == MAX || op == MIN) && isnan(r)) {
        /* The canonical NaN in each width: 0x7fc00000, 0x7ff8..., 0x7e00, 0x7fc0. */
        uint32_t n32 = 0x7fc00000u;
        uint64_t n64 = 0x7ff8000000000000ull;
        uint16_t n16 = 0x7e00, nb = 0x7fc0;
        switch (k) {
        case F32: memcpy(acc, &n32, 4); return;
        case F64: memcpy(acc, &n64, 8); return;
        case F16: memcpy(acc, &n16, 2); return;
        default: memcpy(acc, &nb, 2); return;
        }
    }
    switch (k) {
    case F32: *(float *)acc = (float)r; break; /* exact: operands and results are small */
    case F64: *(double *)acc = r; break;
    case F16: *(uint16_t *)acc = f32_to_f16((float)r); break;
    default: *(uint16_t *)acc = f32_to_bf16((float)r); break;
    }
}

/* value returns element i of rank r's input for an op on kind k, in
 * variant v (different data for the same buffer, call after call):
 * small numbers, so that sums and products are exact in every type and
 * any order; unsigned types get values past 2^31 (2^63) so that MAX and
 * MIN must compare them unsigned; floats get signed zeros and a NaN for
 * MAX and MIN. */
static void value(enum kind k, enum op op, int r, long i, int v, void *out) {
    long x = (i * 7 + r * 13 + v * 5) % 11 - 3;
    if (op == PROD) x = (long[]){1, 2, -1, 1, 3}[(i + r + v) % 5];
    switch (k) {
    case I32: *(int32_t *)out = (int32_t)x; return;
    case I64: *(int64_t *)out = (int64_t)x * 1000000007L; return;
    case U32: *(uint32_t *)out = (op == MAX || op == MIN) && (i + r) % 3 == 0 ? 0x80000000u + (uint32_t)(i % 5) : (uint32_t)x; return;
    case U64: *(uint64_t *)out = (op == MAX || op == MIN) && (i + r) % 3 == 0 ? 0x8000000000000000ull + (uint64_t)(i % 5) : (uint64_t)x; return;
    default: break;
    }
    double d = (double)x;
    if (op == PROD) d = (double[]){1, 2, -0.5, 1, 4}[(i + r + v) % 5];
    if (special && (op == MAX || op == MIN)) {
        if (i % 97 == 1) d = r == 0 ? 0.0 : -0.0;
        if (i % 89 == 2 && r == size - 1) d = NAN;
    }
    switch (k) {
    case F32: *(float *)out = (float)d; return;
    case F64: *(double *)out = d; return;
    case F16: *(uint16_t *)out = f32_to_f16((float)d); return;
    default: *(uint16_t *)out = f32_to_bf16((float)d); return;
    }
}

/* reference fills want with element lo.. lo+n-1 of the reduction of
 * every rank's input (variant v), combined in rank order. */
static void reference(enum kind k, enum op op, long lo, long n, int v, char *want) {
    int es = type_of(k)->size;
    char x[8];
    for (long i = 0; i < n; i++) {
        value(k, op, 0, lo + i, v, want + i * es);
        for (int q = 1; q < size; q++) {
            value(k, op, q, lo + i, v, x);
            combine(k, op, want + i * es, x);
        }
    }
}

/* differ returns the first element of got that is not want, or -1; sums
 * and products of NaNs may be any NaN. */
static long differ(enum kind k, enum op op, const char *got, const char *want, long n) {
    int es = type_of(k)->size;
    for (long i = 0; i < n; i++) {
        if (memcmp(got + i * es, want + i * es, es) == 0) continue;
        if (op != MAX && op != MIN && (k == F32 || k == F64)) {
            double g = k == F32 ? *(float *)(got + i * es) : *(double *)(got + i * es);
            double w = k == F32 ? *(float *)(want + i * es) : *(double *)(want + i * es);
            if (isnan(g) && isnan(w)) continue;
        }
        return i;
    }
    return -1;
}

/* verdict counts one check, printing what went wrong when it failed (in
 * one write: launchers forward the ranks' output in pieces, and a line
 * must not be cut by another rank's). */
static void verdict(const char *what, int rc, enum kind k, const char *got, const char *want, long bad) {
    if (rc == MPI_SUCCESS && bad < 0) {
        passed++;
        return;
    }
    failed++;
    char msg[1024];
    int n = snprintf(msg, sizeof msg, "gpucoll: FAIL %s on rank %d: ", what, rank);
    if (rc != MPI_SUCCESS) {
        char err[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        MPI_Error_string(rc, err, &len);
        n += snprintf(msg + n, sizeof msg - n, "MPI error %d (%s)", rc, err);
    } else {
        int es = type_of(k)->size;
        n += snprintf(msg + n, sizeof msg - n, "element %ld is 0x", bad);
        for (int j = es - 1; j >= 0; j--) n += snprintf(msg + n, sizeof msg - n, "%02x", (unsigned char)got[bad * es + j]);
        n += snprintf(msg + n, sizeof msg - n, ", want 0x");
        for (int j = es - 1; j >= 0; j--) n += snprintf(msg + n, sizeof msg - n, "%02x", (unsigned char)want[bad * es + j]);
    }
    fprintf(stderr, "%s\n", msg);
}

/* fill writes bytes of a pattern no result has, so that a result never
 * written is seen. */
static void fill(CUdeviceptr d, size_t n) {
    if (!n) return;
    char *junk = malloc(n);
    memset(junk, 0xa5, n);
    CU(cu.MemcpyHtoD(d, junk, n));
    free(junk);
}

/* ---- ops: every op and type, every collective ---- */

enum coll { ALLREDUCE, RSB, RS, ALLGATHER };
static const char *coll_names[] = {"MPI_Allreduce", "MPI_Reduce_scatter_block", "MPI_Reduce_scatter", "MPI_Allgather"};

/* The buffers of the ops checks: allocated once, for the largest case. */
static CUdeviceptr ops_send, ops_recv;

/* check runs one case on every rank; each rank counts its own result. */
static void check(enum coll c, const struct type *t, enum op op, long count, int inplace) {
    int es = t->size;
    /* Per-rank block sizes: count each, or irregular with zeros for RS. */
    long *counts = malloc(sizeof(long) * size), total = 0, lo = 0;
    int *rcounts = malloc(sizeof(int) * size);
    for (int q = 0; q < size; q++) {
        counts[q] = c == RS ? (count + q) % 4 == 3 ? 0 : count + q % 3 : count;
        if (q < rank) lo += counts[q];
        total += counts[q];
        rcounts[q] = (int)counts[q];
    }
    long in_n = c == ALLREDUCE || c == ALLGATHER ? count : total; /* elements of my input */
    long out_n = c == ALLREDUCE ? count : c == ALLGATHER ? count * size : counts[rank];
    char *mine = malloc((size_t)in_n * es + 1), *want = malloc((size_t)out_n * es + 1), *got = malloc((size_t)out_n * es + 1);
    for (long i = 0; i < in_n; i++) value(t->kind, op, rank, i, 0, mine + i * es);
    if (c == ALLGATHER)
        for (long i = 0; i < out_n; i++) value(t->kind, op, (int)(i / count), i % count, 0, want + i * es);
    else
        reference(t->kind, op, c == ALLREDUCE ? 0 : c == RSB ? rank * count : lo, out_n, 0, want);
    size_t recv_bytes = (size_t)(inplace && c != ALLGATHER ? in_n : out_n) * es;
    fill(ops_recv, recv_bytes);
    if (inplace) {
        if (c == ALLGATHER) CU(cu.MemcpyHtoD(ops_recv + (size_t)rank * count * es, mine, (size_t)count * es));
        else CU(cu.MemcpyHtoD(ops_recv, mine, (size_t)in_n * es));
    } else {
        CU(cu.MemcpyHtoD(ops_send, mine, (size_t)in_n * es));
    }
    const void *sbuf = inplace ? MPI_IN_PLACE : vp(ops_send);
    void *rbuf = vp(ops_recv);
    int rc = MPI_SUCCESS;
    switch (c) {
    case ALLREDUCE: rc = MPI_Allreduce(sbuf, rbuf, (int)count, t->dt, mpi_ops[op], MPI_COMM_WORLD); break;
    case RSB: rc = MPI_Reduce_scatter_block(sbuf, rbuf, (int)count, t->dt, mpi_ops[op], MPI_COMM_WORLD); break;
    case RS: rc = MPI_Reduce_scatter(sbuf, rbuf, rcounts, t->dt, mpi_ops[op], MPI_COMM_WORLD); break;
    case ALLGATHER: rc = MPI_Allgather(sbuf, (int)count, t->dt, rbuf, (int)count, t->dt, MPI_COMM_WORLD); break;
    }
    CU(cu.MemcpyDtoH(got, ops_recv, (size_t)out_n * es));
    char what[160];
    snprintf(what, sizeof what, "%s %s%s%s count=%ld%s", coll_names[c], t->name, c == ALLGATHER ? "" : " ",
             c == ALLGATHER ? "" : op_names[op], count, inplace ? " in place" : "");
    verdict(what, rc, t->kind, got, want, differ(t->kind, op, got, want, out_n));
    free(counts), free(rcounts), free(mine), free(want), free(got);
}

static void check_ops(void) {
    long counts[] = {1, 1007, 300007};
    int ncounts = quick ? 2 : 3;
    /* The largest case: MPI_Reduce_scatter's input, or MPI_Allgather's
     * output, of the largest count in 8-byte elements. */
    size_t most = (size_t)(counts[ncounts - 1] + 3) * size * 8;
    ops_send = dalloc(most), ops_recv = dalloc(most);
    for (int ci = 0; ci < ncounts; ci++) {
        for (int t = 0; t < NTYPES; t++) {
            for (int inplace = 0; inplace < 2; inplace++) {
                check(ALLGATHER, &types[t], SUM, counts[ci], inplace);
                for (int op = SUM; op <= MIN; op++)
                    for (int c = ALLREDUCE; c <= RS; c++) check((enum coll)c, &types[t], (enum op)op, counts[ci], inplace);
            }
        }
        /* Ops gocoll reduces on the host, staged from and to the GPU. */
        for (int inplace = 0; inplace < 2; inplace++)
            for (int c = ALLREDUCE; c <= RS; c++) {
                check((enum coll)c, &types[0], BAND, counts[ci], inplace);
                check((enum coll)c, &types[0], USER, counts[ci], inplace);
            }
    }
    CU(cu.MemFree(ops_recv));
    CU(cu.MemFree(ops_send));
}

/* ---- order: the application's writes on the default streams ---- */

static void check_order(void) {
    long count = quick ? 1L << 16 : 1L << 22; /* floats: 256 KiB, or 16 MiB */
    size_t bytes = (size_t)count * 4, lag = quick ? 1 << 20 : 64 << 20;
    CUdeviceptr d = dalloc(bytes), r = dalloc(bytes), s1 = dalloc(lag), s2 = dalloc(lag);
    float *data = malloc(bytes), *old = malloc(bytes), *want = malloc(bytes), *got = malloc(bytes);
    CUstream blocking, nonblocking;
    CU(cu.StreamCreate(&blocking, 0));
    CU(cu.StreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
    struct {
        const char *name;
        CUstream s;
        int sync; /* the contract: the program synchronises its own streams */
    } ways[] = {
        {"the legacy default stream (NULL), no sync", NULL, 0},
        {"the legacy default stream (CU_STREAM_LEGACY), no sync", CU_STREAM_LEGACY, 0},
        {"the per-thread default stream (CU_STREAM_PER_THREAD), no sync", CU_STREAM_PER_THREAD, 0},
        {"a blocking stream of the program's, cuStreamSynchronize", blocking, 1},
        {"a non-blocking stream of the program's, cuStreamSynchronize", nonblocking, 1},
    };
    for (long i = 0; i < count; i++) old[i] = -1000.0f;
    for (int w = 0; w < (int)(sizeof ways / sizeof ways[0]); w++)
        for (int inplace = 0; inplace < 2; inplace++) {
            int v = 2 * w + inplace + 1;
            CUdeviceptr buf = inplace ? r : d;
            CU(cu.MemcpyHtoD(buf, old, bytes)); /* synchronous: the old data is there */
            fill(r, inplace ? 0 : bytes);
            for (long i = 0; i < count; i++) {
                data[i] = (float)((i * 3 + rank * 7 + v) % 101);
                want[i] = 0;
                for (int q = 0; q < size; q++) want[i] += (float)((i * 3 + q * 7 + v) % 101);
            }
            /* Work before the write on the same stream, so that the write
             * lands late, then the write from pageable memory. */
            CU(cu.MemcpyDtoDAsync(s1, s2, lag, ways[w].s));
            CU(cu.MemcpyHtoDAsync(buf, data, bytes, ways[w].s));
            if (ways[w].sync) CU(cu.StreamSynchronize(ways[w].s));
            int rc = MPI_Allreduce(inplace ? MPI_IN_PLACE : vp(d), vp(r), (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            CU(cu.MemcpyDtoH(got, r, bytes));
            char what[200];
            snprintf(what, sizeof what, "order: MPI_Allreduce%s right after cuMemcpyHtoDAsync on %s",
                     inplace ? " in place" : "", ways[w].name);
            verdict(what, rc, F32, (char *)got, (char *)want, differ(F32, SUM, (char *)got, (char *)want, count));
        }
    CU(cu.StreamDestroy(blocking));
    CU(cu.StreamDestroy(nonblocking));
    CU(cu.MemFree(s2));
    CU(cu.MemFree(s1));
    CU(cu.MemFree(r));
    CU(cu.MemFree(d));
    free(data), free(old), free(want), free(got);
}

/* ---- realloc: allocate, use, free, again at the same address ---- */

static void check_realloc(void) {
    int cycles = quick ? 6 : 12;
    long counts[] = {1000, quick ? 65536 : 1L << 20};
    int reused_send = 0, reused_recv = 0, tries = 0;
    for (int ci = 0; ci < 2; ci++) {
        CUdeviceptr prev_s = 0, prev_r = 0;
        for (int k = 0; k < cycles; k++) {
            /* Every third cycle a smaller allocation, which CUDA may also
             * place at the address just freed. */
            long n = k % 3 == 2 ? counts[ci] / 2 : counts[ci];
            size_t bytes = (size_t)n * 8;
            CUdeviceptr s = dalloc(bytes), r = dalloc(bytes);
            if (k > 0) tries++, reused_send += s == prev_s, reused_recv += r == prev_r;
            prev_s = s, prev_r = r;
            char *mine = malloc(bytes), *want = malloc(bytes), *got = malloc(bytes), what[160];
            int v = k + 1;
            /* MPI_Allreduce of doubles (a GPU kernel), new data each cycle. */
            for (long i = 0; i < n; i++) value(F64, SUM, rank, i, v, mine + i * 8);
            reference(F64, SUM, 0, n, v, want);
            CU(cu.MemcpyHtoD(s, mine, bytes));
            fill(r, bytes);
            int rc = MPI_Allreduce(vp(s), vp(r), (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            CU(cu.MemcpyDtoH(got, r, bytes));
            snprintf(what, sizeof what, "realloc cycle %d: MPI_Allreduce MPI_DOUBLE MPI_SUM count=%ld", k, n);
            verdict(what, rc, F64, got, want, differ(F64, SUM, got, want, n));
            /* In place, on the receive buffer, other data. */
            for (long i = 0; i < n; i++) value(F64, MAX, rank, i, v + 100, mine + i * 8);
            reference(F64, MAX, 0, n, v + 100, want);
            CU(cu.MemcpyHtoD(r, mine, bytes));
            rc = MPI_Allreduce(MPI_IN_PLACE, vp(r), (int)n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            CU(cu.MemcpyDtoH(got, r, bytes));
            snprintf(what, sizeof what, "realloc cycle %d: MPI_Allreduce MPI_DOUBLE MPI_MAX count=%ld in place", k, n);
            verdict(what, rc, F64, got, want, differ(F64, MAX, got, want, n));
            /* MPI_Allgather from the send buffer: every rank reads it. */
            long per = n / size;
            for (long i = 0; i < per; i++) value(F64, SUM, rank, i, v + 200, mine + i * 8);
            for (long i = 0; i < per * size; i++) value(F64, SUM, (int)(i / per), i % per, v + 200, want + i * 8);
            CU(cu.MemcpyHtoD(s, mine, (size_t)per * 8));
            fill(r, bytes);
            rc = MPI_Allgather(vp(s), (int)per, MPI_DOUBLE, vp(r), (int)per, MPI_DOUBLE, MPI_COMM_WORLD);
            CU(cu.MemcpyDtoH(got, r, (size_t)per * size * 8));
            snprintf(what, sizeof what, "realloc cycle %d: MPI_Allgather MPI_DOUBLE count=%ld", k, per);
            verdict(what, rc, F64, got, want, differ(F64, SUM, got, want, per * size));
            free(mine), free(want), free(got);
            /* Freed in the reverse order: an allocator that reuses the
             * last freed range first gives both addresses back. */
            CU(cu.MemFree(r));
            CU(cu.MemFree(s));
        }
    }
    printf("rank %d: realloc: a new send buffer was at the address just freed %d times of %d, a new receive buffer %d times\n",
           rank, reused_send, tries, reused_recv);
    fflush(stdout);
}

/* ---- misaligned: device pointers off an element boundary ---- */

/* agree tells every rank whether any rank lost its context (on host
 * memory, which needs no CUDA). */
static int agree(int lost) {
    int any = lost;
    MPI_Allreduce(&lost, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any;
}

static void check_misaligned(void) {
    static const struct {
        enum kind k;
        int off;
    } cases[] = {{F32, 1}, {F32, 2}, {F32, 3}, {F64, 1}, {F64, 4}, {I64, 2}, {U64, 3}, {I32, 1}, {U32, 2}, {F16, 1}, {BF16, 1}};
    const int ncases = (int)(sizeof cases / sizeof cases[0]), per_case = 4;
    long count = quick ? 1000 : 100003;
    size_t bytes = (size_t)count * size * 8 + 64;
    CUdeviceptr s = dalloc(bytes), r = dalloc(bytes);
    char *mine = malloc(bytes), *want = malloc(bytes), *got = malloc(bytes), what[200];
    /* The program's own calls may fail from here on (a dead context):
     * they are checked, not fatal. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int lost = 0, not_run = 0, c;
    for (c = 0; c < ncases && !lost; c++) {
        const struct type *t = type_of(cases[c].k);
        if (!t) continue; /* float16/bfloat16: not in this mpi.h */
        int es = t->size, off = cases[c].off;
        CUdeviceptr ms = s + off, mr = r + off;
        for (int form = 0; form < 3; form++) {
            /* 0: MPI_Allreduce, 1: in place, 2: MPI_Reduce_scatter_block */
            long in_n = form == 2 ? count * size : count, out_n = count;
            for (long i = 0; i < in_n; i++) value(t->kind, SUM, rank, i, c, mine + i * es);
            reference(t->kind, SUM, form == 2 ? rank * count : 0, out_n, c, want);
            CUresult e = cu.MemcpyHtoD(form == 1 ? mr : ms, mine, (size_t)in_n * es);
            int rc = MPI_ERR_OTHER, called = 0;
            if (e == 0 && form != 1) {
                memset(got, 0xa5, (size_t)out_n * es);
                e = cu.MemcpyHtoD(mr, got, (size_t)out_n * es);
            }
            if (e == 0) {
                if (form == 0) rc = MPI_Allreduce(vp(ms), vp(mr), (int)count, t->dt, MPI_SUM, MPI_COMM_WORLD);
                if (form == 1) rc = MPI_Allreduce(MPI_IN_PLACE, vp(mr), (int)count, t->dt, MPI_SUM, MPI_COMM_WORLD);
                if (form == 2) rc = MPI_Reduce_scatter_block(vp(ms), vp(mr), (int)count, t->dt, MPI_SUM, MPI_COMM_WORLD);
                called = 1;
                e = cu.MemcpyDtoH(got, mr, (size_t)out_n * es);
            }
            snprintf(what, sizeof what, "misaligned: %s %s MPI_SUM count=%ld, buffers %d bytes past an element",
                     form == 2 ? "MPI_Reduce_scatter_block" : "MPI_Allreduce", t->name, count, off);
            if (form == 1) strcat(what, ", in place");
            if (e != 0) {
                failed++;
                fprintf(stderr, "gpucoll: FAIL %s on rank %d: %s failed: %s (%d)%s\n", what, rank,
                        called ? "reading the result back (cuMemcpyDtoH)" : "writing the input (cuMemcpyHtoD)", cu_err(e), e,
                        called ? rc == MPI_SUCCESS ? "; the MPI call returned MPI_SUCCESS" : "; the MPI call failed too" : "");
            } else
                verdict(what, rc, t->kind, got, want, differ(t->kind, SUM, got, want, out_n));
        }
        /* The context must still work: a misaligned kernel kills it. */
        CUresult e = cu.CtxSynchronize();
        snprintf(what, sizeof what, "misaligned: the context still works after %s %d bytes off (cuCtxSynchronize)", t->name, off);
        if (e == 0) passed++;
        else {
            failed++;
            fprintf(stderr, "gpucoll: FAIL %s on rank %d: %s (%d)\n", what, rank, cu_err(e), e);
        }
        lost = agree(e != 0);
    }
    if (lost) {
        for (; c < ncases; c++) not_run += type_of(cases[c].k) ? per_case : 0;
        not_run++; /* the aligned call after */
        failed += not_run;
        fprintf(stderr, "gpucoll: FAIL on rank %d: a CUDA context was lost: the %d misaligned checks left are not run\n", rank, not_run);
    } else {
        /* An aligned call after them all. */
        const struct type *t = type_of(F32);
        for (long i = 0; i < count; i++) value(F32, SUM, rank, i, 7, mine + i * 4);
        reference(F32, SUM, 0, count, 7, want);
        CU(cu.MemcpyHtoD(s, mine, (size_t)count * 4));
        int rc = MPI_Allreduce(vp(s), vp(r), (int)count, t->dt, MPI_SUM, MPI_COMM_WORLD);
        CU(cu.MemcpyDtoH(got, r, (size_t)count * 4));
        verdict("misaligned: an aligned MPI_Allreduce MPI_FLOAT after them", rc, F32, got, want, differ(F32, SUM, got, want, count));
        CU(cu.MemFree(r));
        CU(cu.MemFree(s));
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    free(mine), free(want), free(got);
}

/* ---- cudart: cudaMalloc'd buffers ---- */

static void check_cudart(void) {
    if (!rt_name) {
        if (rank == 0)
            printf("gpucoll: no libcudart found (tried $GPUCOLL_CUDART, libcudart.so, .so.13, .so.12, .so.11.0, "
                   "/usr/local/cuda/lib64): the cudart checks are not run\n");
        return;
    }
    int ver = 0, e;
    rt.RuntimeGetVersion(&ver);
    if (rank == 0) printf("gpucoll: CUDA runtime %s, version %d.%d\n", rt_name, ver / 1000, ver % 1000 / 10);
#define RT(call)                                                                                                 \
    do {                                                                                                         \
        if ((e = (call)) != 0) {                                                                                 \
            fprintf(stderr, "gpucoll: rank %d: %s failed: %s (%d)\n", rank, #call, rt.GetErrorString(e), e); \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                                        \
        }                                                                                                        \
    } while (0)
    RT(rt.SetDevice(device));
    long count = quick ? 4099 : 1L << 20;
    size_t bytes = (size_t)count * 4;
    void *s, *r;
    RT(rt.Malloc(&s, bytes));
    RT(rt.Malloc(&r, bytes));
    char *mine = malloc(bytes), *want = malloc(bytes), *got = malloc(bytes);
    for (int inplace = 0; inplace < 2; inplace++) {
        for (long i = 0; i < count; i++) value(F32, SUM, rank, i, 30 + inplace, mine + i * 4);
        reference(F32, SUM, 0, count, 30 + inplace, want);
        RT(rt.Memcpy(inplace ? r : s, mine, bytes, cudaMemcpyHostToDevice));
        int rc = MPI_Allreduce(inplace ? MPI_IN_PLACE : s, r, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        RT(rt.Memcpy(got, r, bytes, cudaMemcpyDeviceToHost));
        verdict(inplace ? "cudart: MPI_Allreduce MPI_FLOAT in place on cudaMalloc'd memory"
                        : "cudart: MPI_Allreduce MPI_FLOAT on cudaMalloc'd memory",
                rc, F32, got, want, differ(F32, SUM, got, want, count));
    }
    RT(rt.Free(r));
    RT(rt.Free(s));
#undef RT
    free(mine), free(want), free(got);
}

/* ---- timing ---- */

static double time_allreduce(void *send, void *recv, long n, int iters) {
    for (int i = 0; i < 2; i++) MPI_Allreduce(send, recv, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) MPI_Allreduce(send, recv, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t = (MPI_Wtime() - t0) / iters, worst = 0;
    MPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

static void time_all(void) {
    if (rank == 0) {
        printf("MPI_Allreduce MPI_FLOAT MPI_SUM on %d ranks, slowest rank's time per call\n", size);
        printf("%12s %12s %12s %12s %12s %8s\n", "bytes", "device us", "host us", "device busbw", "host busbw", "dev/host");
    }
    static const long sizes[] = {8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 2 << 20, 16 << 20, 128 << 20, 256 << 20};
    for (int k = 0; k < (int)(sizeof sizes / sizeof sizes[0]) && sizes[k] <= max_bytes; k++) {
        long bytes = sizes[k], n = bytes / 4 > 0 ? bytes / 4 : 1;
        int iters = bytes <= (64 << 10) ? 200 : bytes <= (2 << 20) ? 40 : bytes <= (32 << 20) ? 8 : 3;
        if (quick) iters = iters / 4 > 2 ? iters / 4 : 2;
        CUdeviceptr ds = dalloc((size_t)n * 4), dr = dalloc((size_t)n * 4);
        float *hs = calloc((size_t)n, 4), *hr = calloc((size_t)n, 4);
        CU(cu.MemcpyHtoD(ds, hs, (size_t)n * 4));
        double td = time_allreduce(vp(ds), vp(dr), n, iters), th = time_allreduce(hs, hr, n, iters);
        double f = 2.0 * (size - 1) / size * (double)n * 4 / 1e9;
        if (rank == 0)
            printf("%12ld %12.1f %12.1f %9.2f GB/s %7.2f GB/s %8.2f\n", n * 4, td * 1e6, th * 1e6, f / td, f / th, td / th);
        CU(cu.MemFree(dr));
        CU(cu.MemFree(ds));
        free(hs), free(hr);
    }
}

static const char *usage = "usage: gpucoll [--quick] [--checks ops,order,realloc,misaligned,cudart|none] [--max-bytes N] "
                           "[--no-time] [--no-special]\n";

int main(int argc, char **argv) {
    int do_time = 1, bad = 0;
    const char *checks = "ops,order,realloc,cudart";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--no-time")) do_time = 0;
        else if (!strcmp(argv[i], "--no-special")) special = 0;
        else if (!strcmp(argv[i], "--max-bytes") && i + 1 < argc) max_bytes = atol(argv[++i]);
        else if (!strcmp(argv[i], "--checks") && i + 1 < argc) checks = argv[++i];
        else bad = 1;
    }
    char list[256];
    snprintf(list, sizeof list, ",%s,", checks);
    for (char *p = strtok(strdup(checks), ","); p && !bad; p = strtok(NULL, ","))
        bad = strcmp(p, "ops") && strcmp(p, "order") && strcmp(p, "realloc") && strcmp(p, "misaligned") &&
              strcmp(p, "cudart") && strcmp(p, "none");
    if (bad) {
        if (rank == 0) fprintf(stderr, "%s", usage);
        MPI_Finalize();
        return 2;
    }
#define WANT(name) (strstr(list, "," name ",") != NULL)
    load_driver();
    if (WANT("cudart")) load_runtime();
    mpi_ops[SUM] = MPI_SUM, mpi_ops[PROD] = MPI_PROD, mpi_ops[MAX] = MPI_MAX, mpi_ops[MIN] = MPI_MIN, mpi_ops[BAND] = MPI_BAND;
    MPI_Op_create(user_sum, 1, &mpi_ops[USER]);
    if (!WANT("none")) {
        if (WANT("ops")) check_ops();
        if (WANT("order")) check_order();
        if (WANT("realloc")) check_realloc();
        if (WANT("cudart")) check_cudart();
        if (WANT("misaligned")) check_misaligned();
        printf("rank %d: %d passed, %d failed\n", rank, passed, failed);
        fflush(stdout);
    }
    /* The stand-in driver's account of this process (run.sh --self-test
     * counts its IPC handles); a real driver has no such function. */
    void (*stub_report)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gpucoll_stub_report");
    if (stub_report) stub_report();
    if (do_time) time_all();
    MPI_Op_free(&mpi_ops[USER]);
    MPI_Finalize();
    cu.DevicePrimaryCtxRelease(device);
    return failed ? 1 : 0;
}
