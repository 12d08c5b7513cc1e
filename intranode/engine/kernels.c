/*
 * The C half's reduction kernels (kernels.h): MPI_SUM, MPI_PROD, MPI_MAX
 * and MPI_MIN on the 8- to 64-bit integers, float and double, with the
 * results of package ops' kernels bit for bit (kernels_test.go checks
 * every op, kind and level against them over random and special values).
 *
 * Each level is the same source (kernels_level.h) compiled for its
 * instruction set with a target attribute: the x86-64 baseline (SSE2,
 * 16-byte vectors), AVX2 (32) and AVX-512 F/DQ/BW (64). The level in use
 * is the lower of what the CPU and the OS support (libgcc's cpu checks,
 * which read XGETBV as package ops does) and the cap package ops has
 * (GOCOLL_OPS_ISA through ops.CapISA), which the Go side passes on with
 * gocoll_shm_set_isa, so the C half never runs instructions the user
 * ruled out for the Go half.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "kernels.h"

/* The scalar kernels: the elements after the last whole vector. */

#define SCALAR_INT(NAME, T, U)                                                                                         \
    static inline __attribute__((always_inline)) void scalar_int_##NAME(int op, void *dst, const void *a,              \
                                                                        const void *b, long i, long n) {               \
        for (; i < n; i++) {                                                                                           \
            T x, y, r = 0;                                                                                             \
            memcpy(&x, (const char *)a + i * (long)sizeof(T), sizeof(T));                                              \
            memcpy(&y, (const char *)b + i * (long)sizeof(T), sizeof(T));                                              \
            switch (op) {                                                                                              \
            case GOCOLL_SHM_OP_SUM: r = (T)((U)x + (U)y); break;                                                       \
            case GOCOLL_SHM_OP_PROD: r = (T)((U)x * (U)y); break;                                                      \
            case GOCOLL_SHM_OP_MAX: r = x > y ? x : y; break;                                                          \
            case GOCOLL_SHM_OP_MIN: r = x < y ? x : y; break;                                                          \
            }                                                                                                          \
            memcpy((char *)dst + i * (long)sizeof(T), &r, sizeof(T));                                                  \
        }                                                                                                              \
    }

/* Integer sums and products wrap: computed in an unsigned type at least
 * as wide as int (narrower ones would be promoted to int, and overflow). */
SCALAR_INT(i8, int8_t, uint32_t)
SCALAR_INT(u8, uint8_t, uint32_t)
SCALAR_INT(i16, int16_t, uint32_t)
SCALAR_INT(u16, uint16_t, uint32_t)
SCALAR_INT(i32, int32_t, uint32_t)
SCALAR_INT(u32, uint32_t, uint32_t)
SCALAR_INT(i64, int64_t, uint64_t)
SCALAR_INT(u64, uint64_t, uint64_t)

/* MAX and MIN as package ops (its fmax, fmin): a NaN operand gives the
 * canonical NaN, max(+0, -0) = +0 and min(+0, -0) = -0 in either order. */
#define SCALAR_FLOAT(NAME, T, QNAN)                                                                                    \
    static inline __attribute__((always_inline)) void scalar_float_##NAME(int op, void *dst, const void *a,            \
                                                                          const void *b, long i, long n) {             \
        for (; i < n; i++) {                                                                                           \
            T x, y, r = 0;                                                                                             \
            memcpy(&x, (const char *)a + i * (long)sizeof(T), sizeof(T));                                              \
            memcpy(&y, (const char *)b + i * (long)sizeof(T), sizeof(T));                                              \
            switch (op) {                                                                                              \
            case GOCOLL_SHM_OP_SUM: r = x + y; break;                                                                  \
            case GOCOLL_SHM_OP_PROD: r = x * y; break;                                                                 \
            case GOCOLL_SHM_OP_MAX:                                                                                    \
                r = isnan(x) || isnan(y) ? QNAN : x > y ? x : y > x ? y : signbit(x) ? y : x;                          \
                break;                                                                                                 \
            case GOCOLL_SHM_OP_MIN:                                                                                    \
                r = isnan(x) || isnan(y) ? QNAN : x < y ? x : y < x ? y : signbit(x) ? x : y;                          \
                break;                                                                                                 \
            }                                                                                                          \
            memcpy((char *)dst + i * (long)sizeof(T), &r, sizeof(T));                                                  \
        }                                                                                                              \
    }

SCALAR_FLOAT(f32, float, __builtin_nanf(""))
SCALAR_FLOAT(f64, double, __builtin_nan(""))

#define LEVEL base
#define VB 16
#define ATTR
#include "kernels_level.h"
#undef LEVEL
#undef VB
#undef ATTR

#define LEVEL avx2
#define VB 32
#define ATTR __attribute__((target("avx2")))
#include "kernels_level.h"
#undef LEVEL
#undef VB
#undef ATTR

#define LEVEL avx512
#define VB 64
#define ATTR __attribute__((target("avx512f,avx512dq,avx512bw")))
#include "kernels_level.h"
#undef LEVEL
#undef VB
#undef ATTR

typedef void (*combine_fn)(int k, int op, void *dst, const void *a, const void *b, long n);
static const combine_fn levels[GOCOLL_NUM_ISAS] = {combine_base, combine_avx2, combine_avx512};

/* supported is the best level the CPU and the OS support. */
static int supported(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw"))
        return GOCOLL_ISA_AVX512;
    if (__builtin_cpu_supports("avx2")) return GOCOLL_ISA_AVX2;
    return GOCOLL_ISA_BASE;
}

/* active is the level in use plus one; 0: not chosen yet (the best). */
static int active;

int gocoll_shm_set_isa(int level) {
    int best = supported();
    if (level < GOCOLL_ISA_BASE) level = GOCOLL_ISA_BASE;
    if (level > best) level = best;
    __atomic_store_n(&active, level + 1, __ATOMIC_RELAXED);
    return level;
}

int gocoll_shm_isa(void) {
    int level = __atomic_load_n(&active, __ATOMIC_RELAXED) - 1;
    return level < 0 ? gocoll_shm_set_isa(GOCOLL_NUM_ISAS) : level;
}

void gocoll_shm_combine(int k, int op, void *dst, const void *a, const void *b, long n) {
    levels[gocoll_shm_isa()](k, op, dst, a, b, n);
}

void gocoll_shm_combine_at(int level, int k, int op, void *dst, const void *a, const void *b, long n) {
    if (level < GOCOLL_ISA_BASE || level > supported()) level = supported();
    levels[level](k, op, dst, a, b, n);
}
