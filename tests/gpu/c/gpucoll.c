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
 * the program computes itself on the host (never by asking MPI). Then,
 * unless --no-time, the timing table (below "timing"): MPI_Allreduce,
 * MPI_Reduce_scatter_block, MPI_Reduce_scatter and MPI_Allgather (--colls
 * picks some) on device and on host buffers from 8 B to --max-bytes, each
 * cell's result checked, after two baselines measured in the same run (an
 * empty kernel's launch + synchronize, the device-to-device copy
 * bandwidth), and one summary line per collective: the smallest size's
 * time as a multiple of launch+sync, the largest size's as a multiple of
 * its traffic bound. Each rank judges its own results: it prints each of
 * its failures, then "rank R: N passed, N failed", and exits non-zero if
 * any of its checks failed (no verdict is combined through MPI). On the
 * stand-in driver (tests/gpu/c/stubcuda.c, run.sh --self-test) the times
 * mean nothing, and the table says so.
 *
 *   gpucoll [--quick] [--checks LIST] [--max-bytes N] [--no-time]
 *           [--colls allreduce,reduce_scatter_block,reduce_scatter,allgather]
 *           [--time-budget SECS] [--no-special]
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
#include <time.h>
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
    CUresult (*ModuleLoadDataEx)(void **, const void *, unsigned, int *, void **);
    CUresult (*ModuleGetFunction)(void **, void *, const char *);
    CUresult (*ModuleUnload)(void *);
    CUresult (*LaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **,
                             void **);
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
    {(void **)&cu.ModuleLoadDataEx, "cuModuleLoadDataEx"},
    {(void **)&cu.ModuleGetFunction, "cuModuleGetFunction"},
    {(void **)&cu.ModuleUnload, "cuModuleUnload"},
    {(void **)&cu.LaunchKernel, "cuLaunchKernel"},
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

static int rank, size, quick, special = 1, device, ndevices;
static int stand_in; /* the stand-in driver (tests/gpu/c/stubcuda.c): its times mean nothing */
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
    ndevices = ndev;
    CU(cu.DeviceGet(&device, rank % ndev));
    CUcontext ctx;
    CU(cu.DevicePrimaryCtxRetain(&ctx, device));
    CU(cu.CtxSetCurrent(ctx));
    char name[128] = "";
    cu.DeviceGetName(name, sizeof name, device);
    cu.DriverGetVersion(&ver);
    if (rank == 0) {
        printf("gpucoll: %d ranks on %d GPU(s): %s, CUDA driver %d.%d%s\n", size, ndev, name, ver / 1000, ver % 1000 / 10,
               quick ? ", quick" : "");
        /* Which MPI library this is (run.sh checks that the runs over the
         * bundle's MPICH runtime load its libmpich). */
        Dl_info di;
        void *pi = dlsym(RTLD_DEFAULT, "PMPI_Init");
        if (pi && dladdr(pi, &di) && di.dli_fname) printf("gpucoll: MPI library: %s (PMPI_Init)\n", di.dli_fname);
    }
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

/* The table times each collective as OSU's benchmarks do: a barrier
 * before each call, then the call alone (it returns once its results are
 * in the receive buffer), each rank's mean over the iterations, and the
 * slowest rank's mean shown. A row's bytes are a rank's whole buffer, as
 * nccl-tests counts them: MPI_Allreduce's buffer, the reduce-scatters'
 * send buffer, MPI_Allgather's receive buffer (the smallest rows round up
 * to one element per rank). The reductions are MPI_FLOAT MPI_SUM,
 * MPI_Allgather MPI_CHAR, as in OSU. Device and host buffers alternate
 * cell by cell, so that both see the machine in the same state; the
 * buffers are allocated once, for the largest row, as OSU does. Each
 * cell's result is checked (all of it, or a window at both ends and in
 * the middle) and counts as one check.
 *
 * The baselines, measured in the same run by rank 0 alone while the
 * others wait in MPI_Barrier: an empty kernel's launch plus
 * cuStreamSynchronize (the median of 1000), and the device-to-device copy
 * bandwidth (cuMemcpyDtoDAsync of 256 MiB, ten back to back, then
 * cuStreamSynchronize; the best of three), counting the bytes read and
 * the bytes written. The traffic bound of a call on p ranks sharing one
 * GPU, n its bytes as above: 2pn for MPI_Allreduce (every input read once,
 * every output written once), (p+1)n for the reduce-scatters, 2pn for
 * MPI_Allgather, over that bandwidth.
 *
 * Each cell aims at 0.25 s, between 3 iterations and OSU's 1000 (up to 8
 * KiB) or 100. With --time-budget each collective has an equal share of
 * what is left when it starts; a cell aims at no more than what is left
 * of that share over its cells left, and one whose 5 calls (estimated
 * from the cell before it, its time per call grown with the size) no
 * longer fit is skipped, and the table says so. */

enum { MIN_ITERS = 3 };
#define CELL_SECONDS 0.25 /* what a cell aims at, at most */
static const long time_sizes[] = {8, 64, 512, 4L << 10, 32L << 10, 256L << 10, 1L << 20, 4L << 20, 16L << 20, 64L << 20, 256L << 20};
#define NSIZES ((int)(sizeof time_sizes / sizeof time_sizes[0]))
static const char *coll_args[] = {"allreduce", "reduce_scatter_block", "reduce_scatter", "allgather"};
static int time_coll[4] = {1, 1, 1, 1}; /* --colls */
static double time_budget;               /* --time-budget: seconds for the table; 0: no limit */
static double launch_us = -1, launch_min_us = -1, copy_gbs = -1; /* the baselines; -1: not measured */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* agreed returns the largest x of every rank (on host memory). */
static double agreed(double x) {
    double m = x;
    MPI_Allreduce(&x, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

/* human writes bytes as B, KiB, MiB or GiB, whichever is exact. */
static const char *human(double bytes, char *buf, size_t n) {
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (u < 4 && bytes >= 1024 && fmod(bytes, 1024) == 0) bytes /= 1024, u++;
    snprintf(buf, n, "%.0f %s", bytes, unit[u]);
    return buf;
}

/* times writes a multiple k as "k" with three or more significant digits. */
static const char *times(double k, char *buf, size_t n) {
    snprintf(buf, n, k < 10 ? "%.2f" : k < 1000 ? "%.1f" : "%.0f", k);
    return buf;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* An empty kernel, JIT-compiled by the driver as gocoll's kernels are. */
static const char empty_ptx[] = ".version 7.0\n.target sm_70\n.address_size 64\n"
                                ".visible .entry gpucoll_empty()\n{\n\tret;\n}\n";

/* baselines measures launch+sync and the copy bandwidth on rank 0 while
 * the other ranks wait; a baseline the driver refuses is said to be not
 * measured, and the summary has no multiple of it. */
static void baselines(void) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        CUstream s;
        CU(cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING));
        void *mod = NULL, *fn = NULL;
        const char *step = "cuModuleLoadDataEx";
        CUresult e = cu.ModuleLoadDataEx(&mod, empty_ptx, 0, NULL, NULL);
        if (e == 0) step = "cuModuleGetFunction", e = cu.ModuleGetFunction(&fn, mod, "gpucoll_empty");
        int n = stand_in ? 100 : 1000;
        double *t = malloc(sizeof(double) * (size_t)n);
        for (int i = -20; i < n && e == 0; i++) { /* 20 to warm up */
            double t0 = now();
            step = "cuLaunchKernel", e = cu.LaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
            if (e == 0) step = "cuStreamSynchronize", e = cu.StreamSynchronize(s);
            if (i >= 0) t[i] = now() - t0;
        }
        if (e == 0) {
            qsort(t, (size_t)n, sizeof(double), cmp_double);
            launch_us = t[n / 2] * 1e6, launch_min_us = t[0] * 1e6;
            printf("gpucoll: baseline: an empty kernel's launch + cuStreamSynchronize: median %.2f µs, min %.2f µs "
                   "(%d launches; rank 0 alone, the others in MPI_Barrier)\n", launch_us, launch_min_us, n);
        } else
            printf("gpucoll: baseline: launch + synchronize not measured: %s failed: %s (%d)\n", step, cu_err(e), e);
        free(t);
        if (mod) cu.ModuleUnload(mod);
        /* Copy bandwidth: a copy large enough that launch costs vanish. */
        size_t bytes = stand_in ? 8u << 20 : 256u << 20;
        const int reps = 10;
        CUdeviceptr a = dalloc(bytes), b = dalloc(bytes);
        CU(cu.MemcpyDtoDAsync(b, a, bytes, s));
        CU(cu.StreamSynchronize(s));
        double best = 1e30;
        for (int k = 0; k < 3; k++) {
            double t0 = now();
            for (int i = 0; i < reps; i++) CU(cu.MemcpyDtoDAsync(b, a, bytes, s));
            CU(cu.StreamSynchronize(s));
            double per = (now() - t0) / reps;
            if (per < best) best = per;
        }
        copy_gbs = 2.0 * (double)bytes / best / 1e9;
        char hb[32];
        printf("gpucoll: baseline: device-to-device copy of %s (cuMemcpyDtoDAsync, %d back to back, then "
               "cuStreamSynchronize; best of 3): %.1f µs per copy = %.1f GB/s counting bytes read and written\n",
               human((double)bytes, hb, sizeof hb), reps, best * 1e6, copy_gbs);
        fflush(stdout);
        CU(cu.MemFree(b));
        CU(cu.MemFree(a));
        CU(cu.StreamDestroy(s));
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A cell's geometry: count (the count argument: MPI_Allreduce's count,
 * the reduce-scatters' block, MPI_Allgather's count per rank), the row's
 * bytes, and the send and receive buffers' bytes. */
struct geom {
    long count, bytes, send, recv;
};

static struct geom geometry(enum coll c, long bytes) {
    struct geom g;
    switch (c) {
    case ALLREDUCE:
        g.count = bytes / 4 > 0 ? bytes / 4 : 1;
        g.bytes = g.send = g.recv = g.count * 4;
        break;
    case ALLGATHER:
        g.count = bytes / size > 0 ? bytes / size : 1;
        g.send = g.count, g.bytes = g.recv = g.count * size;
        break;
    default: /* RSB, RS */
        g.count = bytes / (4L * size) > 0 ? bytes / (4L * size) : 1;
        g.recv = g.count * 4, g.bytes = g.send = g.recv * size;
        break;
    }
    return g;
}

/* traffic: the bytes a call of n bytes must read and write on one GPU. */
static double traffic(enum coll c, long n) { return c == ALLREDUCE || c == ALLGATHER ? 2.0 * size * n : (size + 1.0) * n; }
static const char *traffic_formula(enum coll c) { return c == ALLREDUCE || c == ALLGATHER ? "2pn" : "(p+1)n"; }
/* busbw: nccl-tests' bus bandwidth factor. */
static double busbw_factor(enum coll c) { return (c == ALLREDUCE ? 2.0 : 1.0) * (size - 1) / size; }

static int *time_rcounts;

static int tcall(enum coll c, void *s, void *r, long count) {
    switch (c) {
    case ALLREDUCE: return MPI_Allreduce(s, r, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    case RSB: return MPI_Reduce_scatter_block(s, r, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    case RS: return MPI_Reduce_scatter(s, r, time_rcounts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    default: return MPI_Allgather(s, (int)count, MPI_CHAR, r, (int)count, MPI_CHAR, MPI_COMM_WORLD);
    }
}

/* The receive bytes a cell checks: all of them, or 64 KiB at each end
 * and in the middle. */
#define WINDOW (64L << 10)
static int windows(long recv, long lo[3], long n[3]) {
    if (recv <= 3 * WINDOW) {
        lo[0] = 0, n[0] = recv;
        return 1;
    }
    lo[0] = 0, lo[1] = (recv / 2) & ~3L, lo[2] = recv - WINDOW;
    n[0] = n[1] = n[2] = WINDOW;
    return 3;
}

/* expect is the byte at offset off of the result: every rank sends
 * float(rank+1) in every element, so a sum is p(p+1)/2 everywhere and
 * MPI_Allgather's block q holds rank q's bytes. */
static unsigned char expect(enum coll c, long count, long off) {
    float v = (float)size * (float)(size + 1) / 2;
    if (c == ALLGATHER) {
        long q = off / count;
        v = (float)(q + 1), off -= q * count;
    }
    unsigned char b[4];
    memcpy(b, &v, 4);
    return b[off % 4];
}

/* junk writes a pattern no result has over the bytes check_cell reads. */
static void junk(int dev, void *r, long recv) {
    long lo[3], n[3];
    int w = windows(recv, lo, n);
    char *j = malloc(WINDOW * 3);
    memset(j, 0xa5, WINDOW * 3);
    for (int i = 0; i < w; i++) {
        if (dev) CU(cu.MemcpyHtoD((CUdeviceptr)(uintptr_t)r + (CUdeviceptr)lo[i], j, (size_t)n[i]));
        else memcpy((char *)r + lo[i], j, (size_t)n[i]);
    }
    free(j);
}

/* check_cell counts one check: the call succeeded and its result is
 * right in the bytes read back. */
static void check_cell(enum coll c, int dev, void *r, struct geom g, int rc) {
    long lo[3], n[3], bad = -1;
    int w = windows(g.recv, lo, n);
    unsigned char *got = malloc(WINDOW * 3);
    for (int i = 0; i < w && bad < 0; i++) {
        if (dev) CU(cu.MemcpyDtoH(got, (CUdeviceptr)(uintptr_t)r + (CUdeviceptr)lo[i], (size_t)n[i]));
        else memcpy(got, (char *)r + lo[i], (size_t)n[i]);
        for (long k = 0; k < n[i]; k++)
            if (got[k] != expect(c, g.count, lo[i] + k)) {
                bad = lo[i] + k;
                fprintf(stderr, "gpucoll: FAIL timing: %s on %s buffers, %ld bytes, on rank %d: byte %ld is 0x%02x, want 0x%02x\n",
                        coll_names[c], dev ? "device" : "host", g.bytes, rank, bad, got[k], expect(c, g.count, bad));
                break;
            }
    }
    free(got);
    if (rc != MPI_SUCCESS) {
        char err[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        MPI_Error_string(rc, err, &len);
        fprintf(stderr, "gpucoll: FAIL timing: %s on %s buffers, %ld bytes, on rank %d: MPI error %d (%s)\n", coll_names[c],
                dev ? "device" : "host", g.bytes, rank, rc, err);
    }
    if (rc == MPI_SUCCESS && bad < 0) passed++;
    else failed++;
}

/* run_cell: one warm-up call (the buffers' first use), one call to
 * estimate, then iters calls aimed at target seconds, each after a
 * barrier; returns the slowest rank's mean seconds per call. */
static double run_cell(enum coll c, void *s, void *r, long count, double target, int maxit, int *iters, int *rc) {
    int e;
    *rc = MPI_SUCCESS;
#define KEEP(call) ((e = (call)) != MPI_SUCCESS && *rc == MPI_SUCCESS ? *rc = e : 0)
    MPI_Barrier(MPI_COMM_WORLD);
    KEEP(tcall(c, s, r, count));
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    KEEP(tcall(c, s, r, count));
    double one = agreed(now() - t0);
    double want = one > 0 ? target / one : maxit;
    int it = want < MIN_ITERS ? MIN_ITERS : want > maxit ? maxit : (int)want;
    double sum = 0;
    for (int i = 0; i < it; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = now();
        KEEP(tcall(c, s, r, count));
        sum += now() - t0;
    }
#undef KEEP
    *iters = it;
    return agreed(sum / it);
}

static void time_all(void) {
    int nsizes = 0, ncolls = 0;
    while (nsizes < NSIZES && time_sizes[nsizes] <= max_bytes) nsizes++;
    for (int c = 0; c < 4; c++) ncolls += time_coll[c];
    if (!nsizes || !ncolls) return;
    /* The buffers, once, for the largest cell of any collective. */
    long smax = 4, rmax = 4;
    for (int c = 0; c < 4; c++)
        for (int k = 0; k < nsizes && time_coll[c]; k++) {
            struct geom g = geometry((enum coll)c, time_sizes[k]);
            if (g.send > smax) smax = g.send;
            if (g.recv > rmax) rmax = g.recv;
        }
    smax = (smax + 3) & ~3L;
    CUdeviceptr ds = dalloc((size_t)smax), dr = dalloc((size_t)rmax);
    float *hs = malloc((size_t)smax);
    char *hr = calloc(1, (size_t)rmax);
    for (long i = 0; i < smax / 4; i++) hs[i] = (float)(rank + 1);
    CU(cu.MemcpyHtoD(ds, hs, (size_t)smax));
    time_rcounts = malloc(sizeof(int) * (size_t)size);
    if (rank == 0) {
        printf("gpucoll: timing on %d rank%s sharing %s: a barrier before each call, then the call alone (OSU's way); each "
               "rank's mean over the iterations, the slowest rank's shown; bytes = a rank's whole buffer (MPI_Allreduce's, the "
               "reduce-scatters' send buffer, MPI_Allgather's receive buffer: nccl-tests' size)",
               size, size == 1 ? "" : "s", ndevices == 1 ? "one GPU" : "the GPUs");
        if (time_budget > 0) printf("; time budget %.0f s", time_budget);
        printf("\n");
        if (stand_in) printf("gpucoll: the stand-in driver (no GPU): these times mean nothing, at most 5 calls a cell\n");
        fflush(stdout);
    }
    baselines();
    double start = now();
    int colls_left = ncolls, skipped = 0, cells = ncolls * nsizes * 2;
    struct {
        long bytes[2];
        double t[2];
        int n;
    } sum[4] = {{{0, 0}, {0, 0}, 0}};
    for (int ci = 0; ci < 4; ci++) {
        enum coll c = (enum coll)ci;
        if (!time_coll[c]) continue;
        /* Each collective gets an equal share of what is left of the
         * budget, so that one that overruns cannot starve the next. */
        double now_s = agreed(now() - start), end = now_s + (time_budget - now_s) / colls_left--;
        int cells_left = nsizes * 2;
        if (rank == 0) {
            printf("\n%s (%s) on %d rank%s: µs per call, the slowest rank's mean\n", coll_names[c],
                   c == ALLGATHER ? "MPI_CHAR" : "MPI_FLOAT, MPI_SUM", size, size == 1 ? "" : "s");
            printf("       bytes  iters d/h   device µs     host µs  dev/host  dev busbw  dev/launch  dev/bound\n");
        }
        double prev_t[2] = {0, 0};
        long prev_b[2] = {0, 0}, last_bytes = -1;
        for (int k = 0; k < nsizes; k++) {
            struct geom g = geometry(c, time_sizes[k]);
            if (g.bytes == last_bytes) { /* a small size rounded up to the row before */
                cells_left -= 2, cells -= 2;
                continue;
            }
            last_bytes = g.bytes;
            for (int q = 0; q < size; q++) time_rcounts[q] = (int)g.count;
            int maxit = stand_in ? 5 : g.bytes <= 8192 ? 1000 : 100, it[2] = {0, 0};
            double t[2] = {-1, -1};
            for (int m = 0; m < 2; m++) { /* 0: device buffers, 1: host buffers */
                void *s = m == 0 ? vp(ds) : (void *)hs, *r = m == 0 ? vp(dr) : (void *)hr;
                double left = time_budget > 0 ? end - agreed(now() - start) : 0;
                double est = prev_t[m] > 0 ? prev_t[m] * (double)g.bytes / (double)prev_b[m] : 0;
                if (time_budget > 0 && (left <= 0 || est * (2 + MIN_ITERS) > left)) {
                    skipped++, cells_left--;
                    continue;
                }
                double target = time_budget > 0 && left / cells_left < CELL_SECONDS ? left / cells_left : CELL_SECONDS;
                cells_left--;
                junk(m == 0, r, g.recv);
                int rc;
                t[m] = run_cell(c, s, r, g.count, target, maxit, &it[m], &rc);
                prev_t[m] = t[m], prev_b[m] = g.bytes;
                check_cell(c, m == 0, r, g, rc);
            }
            if (t[0] >= 0) {
                if (!sum[c].n++) sum[c].bytes[0] = g.bytes, sum[c].t[0] = t[0];
                sum[c].bytes[1] = g.bytes, sum[c].t[1] = t[0];
            }
            if (rank == 0) {
                char iters[24], dev[16] = "skipped", host[16] = "skipped", ratio[16] = "", bw[16] = "", xl[16] = "", xb[16] = "";
                snprintf(iters, sizeof iters, "%d/%d", it[0], it[1]);
                if (t[1] >= 0) snprintf(host, sizeof host, "%.1f", t[1] * 1e6);
                if (t[0] >= 0) {
                    snprintf(dev, sizeof dev, "%.1f", t[0] * 1e6);
                    snprintf(bw, sizeof bw, "%.2f", (double)g.bytes / t[0] * busbw_factor(c) / 1e9);
                    char k[24];
                    if (launch_us > 0) snprintf(xl, sizeof xl, "%sx", times(t[0] * 1e6 / launch_us, k, sizeof k));
                    if (copy_gbs > 0) snprintf(xb, sizeof xb, "%sx", times(t[0] / (traffic(c, g.bytes) / (copy_gbs * 1e9)), k, sizeof k));
                }
                if (t[0] >= 0 && t[1] > 0) snprintf(ratio, sizeof ratio, "%.2f", t[0] / t[1]);
                printf("%12ld %10s %11s %11s %9s %10s %11s %10s\n", g.bytes, iters, dev, host, ratio, bw, xl, xb);
                fflush(stdout);
            }
        }
    }
    if (rank == 0) {
        if (skipped)
            printf("\ngpucoll: %d of %d cells skipped: the time budget (%g s) was spent\n", skipped, cells, time_budget);
        printf("\ngpucoll: summary: device buffers; the smallest and the largest size measured; the baselines above%s\n",
               stand_in ? " (the stand-in driver: the times mean nothing)" : "");
        for (int c = 0; c < 4; c++) {
            if (!time_coll[c]) continue;
            if (!sum[c].n) {
                printf("summary %s np=%d: no size measured (time budget)\n", coll_names[c], size);
                continue;
            }
            char small[32], large[32], moved[32], k[24], xl[64] = "? x launch+sync (not measured)",
                                                        xb[128] = "? x its traffic bound (the copy bandwidth not measured)";
            if (launch_us > 0)
                snprintf(xl, sizeof xl, "%sx launch+sync (%.2f µs)", times(sum[c].t[0] * 1e6 / launch_us, k, sizeof k), launch_us);
            double tr = traffic((enum coll)c, sum[c].bytes[1]);
            if (copy_gbs > 0)
                snprintf(xb, sizeof xb, "%sx its traffic bound (%s = %s over %.0f GB/s)",
                         times(sum[c].t[1] / (tr / (copy_gbs * 1e9)), k, sizeof k), traffic_formula((enum coll)c),
                         human(tr, moved, sizeof moved), copy_gbs);
            printf("summary %s np=%d: %s in %.1f µs = %s; %s in %.1f µs = %s\n", coll_names[c], size,
                   human((double)sum[c].bytes[0], small, sizeof small), sum[c].t[0] * 1e6, xl,
                   human((double)sum[c].bytes[1], large, sizeof large), sum[c].t[1] * 1e6, xb);
        }
        fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD); /* the table before the ranks' verdicts */
    free(time_rcounts), free(hs), free(hr);
    CU(cu.MemFree(dr));
    CU(cu.MemFree(ds));
}

static const char *usage = "usage: gpucoll [--quick] [--checks ops,order,realloc,misaligned,cudart|none] [--max-bytes N] "
                           "[--no-time] [--colls allreduce,reduce_scatter_block,reduce_scatter,allgather] "
                           "[--time-budget SECS] [--no-special]\n";

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
        else if (!strcmp(argv[i], "--time-budget") && i + 1 < argc) time_budget = atof(argv[++i]);
        else if (!strcmp(argv[i], "--colls") && i + 1 < argc) {
            memset(time_coll, 0, sizeof time_coll);
            for (char *p = strtok(strdup(argv[++i]), ","); p; p = strtok(NULL, ",")) {
                int c = 0;
                while (c < 4 && strcmp(p, coll_args[c])) c++;
                if (c == 4) bad = 1;
                else time_coll[c] = 1;
            }
        } else bad = 1;
    }
    if (max_bytes < 0 || time_budget < 0) bad = 1;
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
    /* The stand-in driver's account of this process (run.sh --self-test
     * counts its IPC handles); a real driver has no such function. */
    void (*stub_report)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gpucoll_stub_report");
    stand_in = stub_report != NULL;
    if (!WANT("none")) {
        if (WANT("ops")) check_ops();
        if (WANT("order")) check_order();
        if (WANT("realloc")) check_realloc();
        if (WANT("cudart")) check_cudart();
        if (WANT("misaligned")) check_misaligned();
    }
    if (stub_report) stub_report();
    if (do_time) time_all();
    /* Each rank's verdict: its checks, and its cells of the table. */
    if (!WANT("none") || do_time) {
        printf("rank %d: %d passed, %d failed\n", rank, passed, failed);
        fflush(stdout);
    }
    MPI_Op_free(&mpi_ops[USER]);
    MPI_Finalize();
    cu.DevicePrimaryCtxRelease(device);
    return failed ? 1 : 0;
}
