/*
 * The exact checker: MPI_Allreduce, MPI_Reduce_scatter_block and
 * MPI_Reduce_scatter on every predefined (op, datatype) pair gocoll
 * reduces, with random values over the full ranges of the integer types
 * (their signed and unsigned extremes mostly) and floats whose sums and
 * products are exact, each result compared exactly with a reference
 * folded here. Each call is also made on the host MPI directly
 * (PMPI_...): where the host's result is wrong, the call through MPI_
 * must not have gone to the host (gocoll_test_counter's "<call>.host",
 * when the library is preloaded). Prints a `host-wrong <call> <op>
 * <datatype>` line for each pair the host's collective got wrong (rank
 * 0), a `FAIL ...` line for each failure, and `N passed, N failed`.
 *
 *   exact [-quick] [-f16]
 *
 * -quick: fewer counts. -f16: MPIX_C_FLOAT16 only (MPICH), whose
 * reductions abort MPICH 4.0: never made on the host directly.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum kind { I8, U8, I16, U16, I32, U32, I64, U64, BOOL8, LOG32, F16, F32, F64, F80, F128, CF, CD, CLD,
            P_FI, P_DI, P_LI, P_II, P_SI, P_LDI, P_FF, P_DD };
enum { INTS = 1, FINT = 2 }; /* C integer (logical ops too), Fortran integer */

struct type {
    MPI_Datatype dt;
    const char *name;
    enum kind k;
    int size, flags;
};

#define T(dt, k, size, flags) {dt, #dt, k, size, flags}
static struct type types[] = {
    T(MPI_SIGNED_CHAR, I8, 1, INTS), T(MPI_UNSIGNED_CHAR, U8, 1, INTS), T(MPI_SHORT, I16, 2, INTS),
    T(MPI_UNSIGNED_SHORT, U16, 2, INTS), T(MPI_INT, I32, 4, INTS), T(MPI_UNSIGNED, U32, 4, INTS),
    T(MPI_LONG, I64, 8, INTS), T(MPI_UNSIGNED_LONG, U64, 8, INTS), T(MPI_LONG_LONG, I64, 8, INTS),
    T(MPI_UNSIGNED_LONG_LONG, U64, 8, INTS), T(MPI_INT8_T, I8, 1, INTS), T(MPI_INT16_T, I16, 2, INTS),
    T(MPI_INT32_T, I32, 4, INTS), T(MPI_INT64_T, I64, 8, INTS), T(MPI_UINT8_T, U8, 1, INTS),
    T(MPI_UINT16_T, U16, 2, INTS), T(MPI_UINT32_T, U32, 4, INTS), T(MPI_UINT64_T, U64, 8, INTS),
    T(MPI_AINT, I64, 8, INTS), T(MPI_OFFSET, I64, 8, INTS), T(MPI_COUNT, I64, 8, INTS),
    T(MPI_INTEGER, I32, 4, FINT), T(MPI_INTEGER1, I8, 1, FINT), T(MPI_INTEGER2, I16, 2, FINT),
    T(MPI_INTEGER8, I64, 8, FINT), T(MPI_BYTE, U8, 1, 0), T(MPI_C_BOOL, BOOL8, 1, 0), T(MPI_LOGICAL, LOG32, 4, 0),
    T(MPI_FLOAT, F32, 4, 0), T(MPI_DOUBLE, F64, 8, 0), T(MPI_LONG_DOUBLE, F80, 16, 0), T(MPI_REAL, F32, 4, 0),
    T(MPI_DOUBLE_PRECISION, F64, 8, 0), T(MPI_REAL16, F128, 16, 0), /* gfortran's REAL(16): binary128 */
    T(MPI_C_FLOAT_COMPLEX, CF, 8, 0), T(MPI_C_DOUBLE_COMPLEX, CD, 16, 0),
    T(MPI_C_LONG_DOUBLE_COMPLEX, CLD, 32, 0), T(MPI_CXX_FLOAT_COMPLEX, CF, 8, 0), T(MPI_CXX_DOUBLE_COMPLEX, CD, 16, 0),
    T(MPI_CXX_LONG_DOUBLE_COMPLEX, CLD, 32, 0), T(MPI_COMPLEX, CF, 8, 0), T(MPI_DOUBLE_COMPLEX, CD, 16, 0),
    T(MPI_CXX_BOOL, BOOL8, 1, 0), T(MPI_INTEGER4, I32, 4, FINT), T(MPI_REAL4, F32, 4, 0), T(MPI_REAL8, F64, 8, 0),
    T(MPI_2REAL, P_FF, 8, 0), T(MPI_2DOUBLE_PRECISION, P_DD, 16, 0), T(MPI_FLOAT_INT, P_FI, 8, 0), T(MPI_DOUBLE_INT, P_DI, 16, 0),
    T(MPI_LONG_INT, P_LI, 16, 0), T(MPI_2INT, P_II, 8, 0), T(MPI_SHORT_INT, P_SI, 8, 0),
    T(MPI_LONG_DOUBLE_INT, P_LDI, 32, 0), T(MPI_2INTEGER, P_II, 8, 0),
};
#ifdef MPIX_C_FLOAT16
static struct type f16type = T(MPIX_C_FLOAT16, F16, 2, 0);
#endif

enum op { SUM, PROD, MAX, MIN, LAND, LOR, LXOR, BAND, BOR, BXOR, MAXLOC, MINLOC, NOPS };
static const char *opnames[NOPS] = {"MPI_SUM", "MPI_PROD", "MPI_MAX", "MPI_MIN", "MPI_LAND", "MPI_LOR",
                                    "MPI_LXOR", "MPI_BAND", "MPI_BOR", "MPI_BXOR", "MPI_MAXLOC", "MPI_MINLOC"};
static MPI_Op mpiop(enum op o) {
    MPI_Op m[NOPS] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN, MPI_LAND, MPI_LOR,
                      MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR, MPI_MAXLOC, MPI_MINLOC};
    return m[o];
}

static int is_int(enum kind k) { return k <= U64; }
static int is_signed(enum kind k) { return k == I8 || k == I16 || k == I32 || k == I64; }
static int is_float(enum kind k) { return k >= F16 && k <= F128; }
static int is_complex(enum kind k) { return k >= CF && k <= CLD; }
static int is_pair(enum kind k) { return k >= P_FI; }

/* defined: whether the standard defines o on t (as gocoll does). */
static int defined(const struct type *t, enum op o) {
    enum kind k = t->k;
    if (is_pair(k)) return o == MAXLOC || o == MINLOC;
    if (k == BOOL8 || k == LOG32) return o == LAND || o == LOR || o == LXOR;
    if (is_complex(k)) return o == SUM || o == PROD;
    if (is_float(k)) return o <= MIN;
    if (t->dt == MPI_BYTE) return o >= BAND && o <= BXOR;
    if (t->flags & FINT) return o <= MIN || (o >= BAND && o <= BXOR);
    return o <= BXOR;
}

/* ---- values ---- */

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static int intsize(enum kind k) { return k <= U8 ? 1 : k <= U16 ? 2 : k <= U32 ? 4 : 8; }

/* extreme: mostly a value where signed and unsigned arithmetic part. */
static uint64_t extreme(uint64_t r, int size) {
    int bits = 8 * size;
    uint64_t ones = bits == 64 ? ~0ull : (1ull << bits) - 1, top = 1ull << (bits - 1), v;
    switch (r % 14) {
    case 0: v = 0; break;
    case 1: v = 1; break;
    case 2: v = 2; break;
    case 3: v = ones; break;
    case 4: v = ones - 1; break;
    case 5: v = top - 1; break;
    case 6: v = top; break;
    case 7: v = top + 1; break;
    case 8: v = 100; break;
    case 9: v = 200; break;
    case 10: v = top >> 1; break;
    default: v = mix(r);
    }
    return v & ones;
}

static void put_uint(void *p, uint64_t v, int size) { memcpy(p, &v, size); } /* little endian */

static uint64_t get_uint(const void *p, int size) {
    uint64_t v = 0;
    memcpy(&v, p, size);
    return v;
}

static int64_t get_int(const void *p, int size) {
    uint64_t v = get_uint(p, size);
    int sh = 64 - 8 * size;
    return (int64_t)(v << sh) >> sh;
}

static uint16_t to_half(float f) { /* exact small values only */
    uint32_t b;
    memcpy(&b, &f, 4);
    if (f == 0) return (uint16_t)((b >> 16) & 0x8000);
    return (uint16_t)(((b >> 16) & 0x8000) | ((((b >> 23) & 0xff) - 127 + 15) << 10) | ((b >> 13) & 0x3ff));
}

static float from_half(uint16_t h) {
    if ((h & 0x7fff) == 0) return (h & 0x8000) ? -0.0f : 0.0f;
    uint32_t b = ((uint32_t)(h & 0x8000) << 16) | ((((h >> 10) & 0x1f) - 15 + 127) << 23) | ((uint32_t)(h & 0x3ff) << 13);
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static long double get_float(const void *p, enum kind k) {
    switch (k) {
    case F16: return from_half(*(const uint16_t *)p);
    case F32: case CF: case P_FI: case P_FF: return *(const float *)p;
    case F64: case CD: case P_DI: case P_DD: return *(const double *)p;
    case F128: return (long double)*(const __float128 *)p;
    default: return *(const long double *)p;
    }
}

static void put_float(void *p, enum kind k, long double v) {
    switch (k) {
    case F16: *(uint16_t *)p = to_half((float)v); break;
    case F32: case CF: case P_FI: case P_FF: *(float *)p = (float)v; break;
    case F64: case CD: case P_DI: case P_DD: *(double *)p = (double)v; break;
    case F128: *(__float128 *)p = (__float128)v; break;
    default: *(long double *)p = v;
    }
}

/* Pairs: the value at offset 0, then the index (an int, but a float in
 * MPI_2REAL and a double in MPI_2DOUBLE_PRECISION). */
static int index_off(enum kind k) { return k == P_FI || k == P_II || k == P_SI || k == P_FF ? 4 : k == P_LDI ? 16 : 8; }
static int index_size(enum kind k) { return k == P_DD ? 8 : 4; }
static int pair_vsize(enum kind k) { return k == P_SI ? 2 : k == P_II || k == P_FI || k == P_FF ? 4 : 8; }

static long double get_idx(const char *e, enum kind k) {
    e += index_off(k);
    return k == P_FF ? *(const float *)e : k == P_DD ? *(const double *)e : *(const int *)e;
}

static void put_idx(char *e, enum kind k, int v) {
    e += index_off(k);
    if (k == P_FF) *(float *)e = (float)v;
    else if (k == P_DD) *(double *)e = v;
    else memcpy(e, &v, 4);
}

static long double pair_value(const char *e, enum kind k) {
    switch (k) {
    case P_LI: case P_II: case P_SI: return (long double)get_int(e, pair_vsize(k));
    default: return get_float(e, k);
    }
}

/* gen writes element i of rank r's input of call seed. */
static void gen(char *e, const struct type *t, enum op o, uint64_t seed, int r, long i, int p) {
    uint64_t x = mix(seed ^ mix((uint64_t)r << 32 ^ (uint64_t)i));
    enum kind k = t->k;
    memset(e, 0, t->size);
    if (is_int(k)) {
        uint64_t v = extreme(x, intsize(k));
        if ((o == LAND || o == LOR || o == LXOR) && (x >> 40) % 2) v = 0;
        put_uint(e, v, intsize(k));
    } else if (k == BOOL8 || k == LOG32) {
        put_uint(e, (x >> 20) % 2, k == BOOL8 ? 1 : 4);
    } else if (is_pair(k)) {
        if (k == P_LI || k == P_II || k == P_SI)
            put_uint(e, extreme(x % 12, pair_vsize(k)), pair_vsize(k)); /* extremes: ties are common */
        else
            put_float(e, k, (long double)((int)(x % 7) - 3));
        put_idx(e, k, (int)((x >> 32) % 5) - 2);
    } else {
        /* Products of p <= 5 stay exact: 2^5 in binary16, |5+5i|^5 in binary32. */
        int range = o == PROD && k == F16 ? 2 : o == PROD && is_complex(k) ? 5 : 15;
        int parts = is_complex(k) ? 2 : 1, half = t->size / parts;
        for (int j = 0; j < parts; j++) {
            uint64_t y = mix(x + j);
            long double v = (int)(y % (2 * range + 1)) - range;
            if (o == MAX || o == MIN) {
                int ex = (int)((y >> 32) % 21) - 10;
                for (; ex > 0; ex--) v *= 2;
                for (; ex < 0; ex++) v /= 2;
            }
            put_float(e + j * half, k, v);
        }
    }
}

/* fold sets acc = acc op x, for one element. */
static void fold(char *acc, const char *x, const struct type *t, enum op o) {
    enum kind k = t->k;
    if (is_int(k) || k == BOOL8 || k == LOG32) {
        int s = k == BOOL8 ? 1 : k == LOG32 ? 4 : intsize(k);
        uint64_t a = get_uint(acc, s), b = get_uint(x, s), r = 0;
        int64_t sa = get_int(acc, s), sb = get_int(x, s);
        int lt = is_signed(k) ? sb < sa : b < a; /* x < acc */
        switch (o) {
        case SUM: r = a + b; break;
        case PROD: r = a * b; break;
        case MAX: r = lt ? a : b; break;
        case MIN: r = lt ? b : a; break;
        case LAND: r = a && b; break;
        case LOR: r = a || b; break;
        case LXOR: r = !a != !b; break;
        case BAND: r = a & b; break;
        case BOR: r = a | b; break;
        case BXOR: r = a ^ b; break;
        default: break;
        }
        put_uint(acc, r, s);
    } else if (is_float(k)) {
        long double a = get_float(acc, k), b = get_float(x, k);
        put_float(acc, k, o == SUM ? a + b : o == PROD ? a * b : o == MAX ? (a > b ? a : b) : (a < b ? a : b));
    } else if (is_complex(k)) {
        int half = t->size / 2;
        long double ar = get_float(acc, k), ai = get_float(acc + half, k), br = get_float(x, k), bi = get_float(x + half, k);
        long double r = o == SUM ? ar + br : ar * br - ai * bi, i = o == SUM ? ai + bi : ar * bi + ai * br;
        put_float(acc, k, r);
        put_float(acc + half, k, i);
    } else {
        long double a = pair_value(acc, k), b = pair_value(x, k);
        if ((o == MAXLOC && b > a) || (o == MINLOC && b < a) || (a == b && get_idx(x, k) < get_idx(acc, k))) {
            memcpy(acc, x, k == P_LDI ? 10 : pair_vsize(k));
            memcpy(acc + index_off(k), x + index_off(k), index_size(k));
        }
    }
}

/* same compares one element's defined bytes (no padding). */
static int same(const char *a, const char *b, const struct type *t) {
    enum kind k = t->k;
    if (k == F80) return !memcmp(a, b, 10);
    if (k == CLD) return !memcmp(a, b, 10) && !memcmp(a + 16, b + 16, 10);
    if (is_pair(k)) {
        int vs = k == P_LDI ? 10 : pair_vsize(k);
        return !memcmp(a, b, vs) && !memcmp(a + index_off(k), b + index_off(k), index_size(k));
    }
    return !memcmp(a, b, t->size);
}

/* ---- the calls ---- */

enum coll { ALLREDUCE, RSB, RS, NCOLLS };
static const char *collnames[NCOLLS] = {"MPI_Allreduce", "MPI_Reduce_scatter_block", "MPI_Reduce_scatter"};
static long long (*counter)(const char *);
static int rank, size, passed, failed;

/* call makes one collective through MPI_ (host 0) or PMPI_ (host 1). */
static int call(enum coll c, int host, const void *s, void *r, int n, const int *counts, MPI_Datatype dt, MPI_Op op) {
    switch (c) {
    case ALLREDUCE: return host ? PMPI_Allreduce(s, r, n, dt, op, MPI_COMM_WORLD) : MPI_Allreduce(s, r, n, dt, op, MPI_COMM_WORLD);
    case RSB:
        return host ? PMPI_Reduce_scatter_block(s, r, n, dt, op, MPI_COMM_WORLD)
                    : MPI_Reduce_scatter_block(s, r, n, dt, op, MPI_COMM_WORLD);
    default:
        return host ? PMPI_Reduce_scatter(s, r, counts, dt, op, MPI_COMM_WORLD)
                    : MPI_Reduce_scatter(s, r, counts, dt, op, MPI_COMM_WORLD);
    }
}

/* check runs one case: the call's result on this rank, right or wrong. */
static int check_call(enum coll c, int host, const struct type *t, enum op o, int n, uint64_t seed) {
    int *counts = malloc(size * sizeof *counts), total = 0, off = 0;
    for (int i = 0; i < size; i++) {
        counts[i] = c == ALLREDUCE ? n : c == RSB ? n : n + i % 2;
        if (i < rank) off += counts[i];
        total += counts[i];
    }
    int in = c == ALLREDUCE ? n : total, out = c == ALLREDUCE ? n : counts[rank];
    if (c == ALLREDUCE) off = 0;
    char *sbuf = calloc(in + 1, t->size), *rbuf = calloc(out + 1, t->size), *acc = calloc(1, t->size), *x = calloc(1, t->size);
    for (int i = 0; i < in; i++) gen(sbuf + (size_t)i * t->size, t, o, seed, rank, i, size);
    int ok = call(c, host, sbuf, rbuf, c == RS ? 0 : n, counts, t->dt, mpiop(o)) == MPI_SUCCESS;
    for (int i = 0; ok && i < out; i++) {
        gen(acc, t, o, seed, 0, off + i, size);
        for (int r = 1; r < size; r++) {
            gen(x, t, o, seed, r, off + i, size);
            fold(acc, x, t, o);
        }
        ok = same(acc, rbuf + (size_t)i * t->size, t);
    }
    free(sbuf), free(rbuf), free(acc), free(x), free(counts);
    return ok;
}

static void run_case(enum coll c, const struct type *t, enum op o, int n, uint64_t seed, int hostcheck) {
    char key[64];
    snprintf(key, sizeof key, "%s.host", collnames[c]);
    long long before = counter ? counter(key) : 0;
    int ok = check_call(c, 0, t, o, n, seed);
    long long host_calls = counter ? counter(key) - before : 0;
    if (ok) passed++;
    else {
        failed++;
        printf("FAIL rank %d: %s %s on %s, %d elements: wrong result\n", rank, collnames[c], opnames[o], t->name, n);
    }
    if (!hostcheck) return;
    int host_ok = check_call(c, 1, t, o, n, seed), any_wrong = 0, wrong = !host_ok;
    PMPI_Allreduce(&wrong, &any_wrong, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_wrong && rank == 0) printf("host-wrong %s %s %s %d\n", collnames[c], opnames[o], t->name, n);
    if (!host_ok && host_calls > 0) {
        failed++;
        printf("FAIL rank %d: %s %s on %s, %d elements: went to the host MPI, which is wrong on it\n", rank,
               collnames[c], opnames[o], t->name, n);
    }
}

int main(int argc, char **argv) {
    int quick = 0, f16 = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-quick")) quick = 1;
        if (!strcmp(argv[i], "-f16")) f16 = 1;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    counter = (long long (*)(const char *))dlsym(RTLD_DEFAULT, "gocoll_test_counter");
    struct type *ts = types;
    int nt = sizeof types / sizeof types[0];
    if (f16) {
#ifdef MPIX_C_FLOAT16
        ts = &f16type, nt = 1;
#else
        nt = 0;
#endif
    }
    static const int full[] = {1, 3, 33, 257}, few[] = {3, 33};
    const int *ns = quick ? few : full;
    int nn = quick ? 2 : 4;
    uint64_t seed = 1;
    for (int ti = 0; ti < nt; ti++)
        for (int o = 0; o < NOPS; o++) {
            if (!defined(&ts[ti], o)) continue;
            for (int c = 0; c < NCOLLS; c++)
                for (int j = 0; j < nn; j++) run_case(c, &ts[ti], o, ns[j], seed++, !f16);
        }
    int mine[2] = {passed, failed}, all[2];
    PMPI_Allreduce(mine, all, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    fflush(stdout);
    if (rank == 0) printf("%d passed, %d failed\n", all[0], all[1]);
    MPI_Finalize();
    return 0;
}
