/*
 * gpucoll: gocoll's collectives on CUDA device memory, checked and timed.
 *
 * Every rank allocates its buffers with cudaMalloc and calls
 * MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Reduce_scatter and
 * MPI_Allgather on them, for every op and datatype gocoll reduces on the
 * GPU (MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN on int32, uint32, int64,
 * uint64, float, double, and float16/bfloat16 where the MPI has them),
 * in place and not, on counts from 1 to past one staging segment, plus
 * ops that gocoll reduces on the host (MPI_BAND, a user-defined op). Each
 * result is copied back and compared, bit for bit, with a reference the
 * program computes itself on the host (never by asking MPI). Each rank
 * judges its own results: it prints each of its failures, then
 * "rank R: N passed, N failed", and exits non-zero if any of its checks
 * failed (the launcher's exit status combines the ranks'; no verdict is
 * combined through MPI). Then rank 0 prints a table of MPI_Allreduce times
 * on device and on host buffers from 8 B up.
 *
 * It compiles against gocoll's mpi.h (build/bin/mpicc) or a host MPI's
 * (for LD_PRELOAD runs), with CUDA's runtime header when
 * GPUCOLL_CUDA_HEADERS is defined, else with the few declarations below;
 * link with -lcudart. See tests/gpu/run.sh.
 *
 *   gpucoll [--quick] [--max-bytes N] [--no-check] [--no-time] [--no-special]
 *
 * --no-special leaves out the NaNs and signed zeros of MPI_MAX and
 * MPI_MIN, whose results MPI leaves open: gocoll returns the canonical NaN
 * and orders -0 < +0, but under LD_PRELOAD the host MPI may run a call.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>

#ifdef GPUCOLL_CUDA_HEADERS
#include <cuda_runtime_api.h>
#else
/* The CUDA runtime calls used here, as libcudart exports them. */
typedef int cudaError_t;
enum { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaMalloc(void **p, size_t n);
cudaError_t cudaFree(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, int kind);
cudaError_t cudaDeviceSynchronize(void);
const char *cudaGetErrorString(cudaError_t err);
#endif

static int rank, size, quick, special = 1;
static long max_bytes = 256L << 20;
static int passed, failed;

#define CUDA(call)                                                                                 \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != 0) {                                                                             \
            fprintf(stderr, "gpucoll: rank %d: %s failed: %s\n", rank, #call, cudaGetErrorString(e_)); \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                          \
        }                                                                                          \
    } while (0)

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

/* canon makes every NaN the canonical one of its width, as MPI_MAX and
 * MPI_MIN produce; sums and products of NaNs may carry any payload. */
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

/* value returns element i of rank r's input for an op on kind k: small
 * numbers, so that sums and products are exact in every type and any
 * order; unsigned types get values past 2^31 (2^63) so that MAX and MIN
 * must compare them unsigned; floats get signed zeros and a NaN for MAX
 * and MIN. */
static void value(enum kind k, enum op op, int r, long i, void *out) {
    long v = (i * 7 + r * 13) % 11 - 3;
    if (op == PROD) v = (long[]){1, 2, -1, 1, 3}[(i + r) % 5];
    switch (k) {
    case I32: *(int32_t *)out = (int32_t)v; return;
    case I64: *(int64_t *)out = (int64_t)v * 1000000007L; return;
    case U32: *(uint32_t *)out = (op == MAX || op == MIN) && (i + r) % 3 == 0 ? 0x80000000u + (uint32_t)(i % 5) : (uint32_t)v; return;
    case U64: *(uint64_t *)out = (op == MAX || op == MIN) && (i + r) % 3 == 0 ? 0x8000000000000000ull + (uint64_t)(i % 5) : (uint64_t)v; return;
    default: break;
    }
    double d = (double)v;
    if (op == PROD) d = (double[]){1, 2, -0.5, 1, 4}[(i + r) % 5];
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

/* ---- the correctness cases ---- */

enum coll { ALLREDUCE, RSB, RS, ALLGATHER };
static const char *coll_names[] = {"MPI_Allreduce", "MPI_Reduce_scatter_block", "MPI_Reduce_scatter", "MPI_Allgather"};

static void *dev_alloc(size_t n) {
    void *p = NULL;
    CUDA(cudaMalloc(&p, n ? n : 1));
    return p;
}

/* check runs one case on every rank and counts it on rank 0. */
static void check(enum coll c, const struct type *t, enum op op, long count, int inplace) {
    int es = t->size;
    /* Per-rank block sizes: count each, or irregular with zeros for RS. */
    long *counts = malloc(sizeof(long) * size), total = 0, lo = 0;
    for (int q = 0; q < size; q++) {
        counts[q] = c == RS ? (count + q) % 4 == 3 ? 0 : count + q % 3 : count;
        if (q < rank) lo += counts[q];
        total += counts[q];
    }
    long in_n = c == ALLREDUCE ? count : c == ALLGATHER ? count : total; /* elements of my input */
    long out_n = c == ALLREDUCE ? count : c == ALLGATHER ? count * size : counts[rank];
    char *mine = malloc((size_t)in_n * es + 1), *want = malloc((size_t)out_n * es + 1), *x = malloc(es);
    for (long i = 0; i < in_n; i++) value(t->kind, op, rank, i, mine + i * es);
    /* The reference: inputs combined in rank order, or concatenated. */
    for (long i = 0; i < out_n; i++) {
        if (c == ALLGATHER) {
            value(t->kind, op, (int)(i / count), i % count, want + i * es);
            continue;
        }
        long gi = c == ALLREDUCE ? i : (c == RSB ? rank * count : lo) + i;
        value(t->kind, op, 0, gi, want + i * es);
        for (int q = 1; q < size; q++) {
            value(t->kind, op, q, gi, x);
            combine(t->kind, op, want + i * es, x);
        }
    }
    size_t recv_bytes = (size_t)(inplace && c != ALLGATHER ? (c == ALLREDUCE ? count : total) : out_n) * es;
    char *dsend = dev_alloc((size_t)in_n * es), *drecv = dev_alloc(recv_bytes);
    if (inplace) {
        if (c == ALLGATHER) CUDA(cudaMemcpy(drecv + (size_t)rank * count * es, mine, (size_t)count * es, cudaMemcpyHostToDevice));
        else CUDA(cudaMemcpy(drecv, mine, (size_t)in_n * es, cudaMemcpyHostToDevice));
    } else {
        CUDA(cudaMemcpy(dsend, mine, (size_t)in_n * es, cudaMemcpyHostToDevice));
    }
    const void *sbuf = inplace ? MPI_IN_PLACE : dsend;
    int rc = MPI_SUCCESS, *rcounts = malloc(sizeof(int) * size);
    for (int q = 0; q < size; q++) rcounts[q] = (int)counts[q];
    switch (c) {
    case ALLREDUCE: rc = MPI_Allreduce(sbuf, drecv, (int)count, t->dt, mpi_ops[op], MPI_COMM_WORLD); break;
    case RSB: rc = MPI_Reduce_scatter_block(sbuf, drecv, (int)count, t->dt, mpi_ops[op], MPI_COMM_WORLD); break;
    case RS: rc = MPI_Reduce_scatter(sbuf, drecv, rcounts, t->dt, mpi_ops[op], MPI_COMM_WORLD); break;
    case ALLGATHER: rc = MPI_Allgather(sbuf, (int)count, t->dt, drecv, (int)count, t->dt, MPI_COMM_WORLD); break;
    }
    char *got = malloc((size_t)out_n * es + 1);
    CUDA(cudaMemcpy(got, drecv, (size_t)out_n * es, cudaMemcpyDeviceToHost));
    long bad = -1;
    for (long i = 0; i < out_n && bad < 0; i++) {
        if (memcmp(got + i * es, want + i * es, es) == 0) continue;
        /* Sums and products of NaNs: any NaN will do. */
        if (op != MAX && op != MIN && (t->kind == F32 || t->kind == F64)) {
            double g = t->kind == F32 ? *(float *)(got + i * es) : *(double *)(got + i * es);
            double w = t->kind == F32 ? *(float *)(want + i * es) : *(double *)(want + i * es);
            if (isnan(g) && isnan(w)) continue;
        }
        bad = i;
    }
    int ok = rc == MPI_SUCCESS && bad < 0;
    if (ok) passed++;
    else {
        failed++;
        fprintf(stderr, "gpucoll: FAIL %s %s%s%s count=%ld%s on rank %d: ", coll_names[c], t->name, c == ALLGATHER ? "" : " ",
                c == ALLGATHER ? "" : op_names[op], count, inplace ? " in place" : "", rank);
        if (rc != MPI_SUCCESS) fprintf(stderr, "MPI error %d\n", rc);
        else {
            fprintf(stderr, "element %ld is", bad);
            for (int j = es - 1; j >= 0; j--) fprintf(stderr, "%s%02x", j == es - 1 ? " 0x" : "", (unsigned char)got[bad * es + j]);
            for (int j = es - 1; j >= 0; j--) fprintf(stderr, "%s%02x", j == es - 1 ? ", want 0x" : "", (unsigned char)want[bad * es + j]);
            fprintf(stderr, "\n");
        }
    }
    CUDA(cudaFree(dsend));
    CUDA(cudaFree(drecv));
    free(counts), free(mine), free(want), free(x), free(got), free(rcounts);
}

static void check_all(void) {
    long counts[] = {1, 1007, 300007};
    int ncounts = quick ? 2 : 3;
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
        void *ds = dev_alloc((size_t)n * 4), *dr = dev_alloc((size_t)n * 4);
        float *hs = calloc((size_t)n, 4), *hr = calloc((size_t)n, 4);
        CUDA(cudaMemcpy(ds, hs, (size_t)n * 4, cudaMemcpyHostToDevice));
        double td = time_allreduce(ds, dr, n, iters), th = time_allreduce(hs, hr, n, iters);
        double f = 2.0 * (size - 1) / size * (double)n * 4 / 1e9;
        if (rank == 0)
            printf("%12ld %12.1f %12.1f %9.2f GB/s %7.2f GB/s %8.2f\n", n * 4, td * 1e6, th * 1e6, f / td, f / th, td / th);
        CUDA(cudaFree(ds));
        CUDA(cudaFree(dr));
        free(hs), free(hr);
    }
}

int main(int argc, char **argv) {
    int do_check = 1, do_time = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--no-check")) do_check = 0;
        else if (!strcmp(argv[i], "--no-time")) do_time = 0;
        else if (!strcmp(argv[i], "--no-special")) special = 0;
        else if (!strcmp(argv[i], "--max-bytes") && i + 1 < argc) max_bytes = atol(argv[++i]);
        else {
            if (rank == 0) fprintf(stderr, "usage: gpucoll [--quick] [--max-bytes N] [--no-check] [--no-time] [--no-special]\n");
            MPI_Finalize();
            return 2;
        }
    }
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != 0 || ndev == 0) {
        fprintf(stderr, "gpucoll: rank %d: no CUDA device (%s)\n", rank, e ? cudaGetErrorString(e) : "0 devices");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    CUDA(cudaSetDevice(rank % ndev)); /* one GPU: every rank shares it */
    mpi_ops[SUM] = MPI_SUM, mpi_ops[PROD] = MPI_PROD, mpi_ops[MAX] = MPI_MAX, mpi_ops[MIN] = MPI_MIN, mpi_ops[BAND] = MPI_BAND;
    MPI_Op_create(user_sum, 1, &mpi_ops[USER]);
    if (rank == 0) printf("gpucoll: %d ranks on %d GPU(s)%s\n", size, ndev, quick ? ", quick" : "");
    if (do_check) {
        check_all();
        printf("rank %d: %d passed, %d failed\n", rank, passed, failed);
        fflush(stdout);
    }
    if (do_time) time_all();
    MPI_Op_free(&mpi_ops[USER]);
    MPI_Finalize();
    return failed ? 1 : 0;
}
