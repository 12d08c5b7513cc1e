/*
 * One level of the C half's kernels, included by kernels.c once per
 * instruction set level with LEVEL (a name), VB (bytes of a vector) and
 * ATTR (the level's target attribute) defined. The loops are written
 * with GCC's vector extensions, so that every level's are vector code
 * whatever the optimisation flags (objdump -d shows them: xmm, ymm or
 * zmm operations on whole vectors), then finish the elements after the
 * last whole vector with the scalar code of kernels.c, which defines the
 * same results.
 */
#define CAT_(a, b) a##_##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, LEVEL)

typedef uint8_t FN(vu8) __attribute__((vector_size(VB)));
typedef int8_t FN(vi8) __attribute__((vector_size(VB)));
typedef uint16_t FN(vu16) __attribute__((vector_size(VB)));
typedef int16_t FN(vi16) __attribute__((vector_size(VB)));
typedef uint32_t FN(vu32) __attribute__((vector_size(VB)));
typedef int32_t FN(vi32) __attribute__((vector_size(VB)));
typedef uint64_t FN(vu64) __attribute__((vector_size(VB)));
typedef int64_t FN(vi64) __attribute__((vector_size(VB)));
typedef float FN(vf32) __attribute__((vector_size(VB)));
typedef double FN(vf64) __attribute__((vector_size(VB)));

/* VLOOP runs BODY on whole vectors of VT (elements of T): x and y loaded from a and b at
 * element i (unaligned loads: memcpy), r stored to dst, four vectors an
 * iteration where there are that many. i is left at the first element
 * not done. */
#define VLOOP(T, VT, RT, BODY)                                                                                         \
    do {                                                                                                               \
        const long per_ = VB / (long)sizeof(T);                                                                        \
        _Pragma("GCC unroll 4") for (; i + per_ <= n; i += per_) {                                                     \
            VT x, y;                                                                                                   \
            RT r;                                                                                                      \
            memcpy(&x, (const char *)a + i * (long)sizeof(T), VB);                                                     \
            memcpy(&y, (const char *)b + i * (long)sizeof(T), VB);                                                     \
            BODY;                                                                                                      \
            memcpy((char *)dst + i * (long)sizeof(T), &r, VB);                                                         \
        }                                                                                                              \
    } while (0)

/* Integers: sums and products wrap (computed unsigned, the same bits as
 * signed); MAX and MIN compare as the type's signedness. */
#define INT_KERNEL(NAME, T, VS, VU)                                                                                    \
    static ATTR void FN(NAME)(int op, void *dst, const void *a, const void *b, long n) {                               \
        long i = 0;                                                                                                    \
        switch (op) {                                                                                                  \
        case GOCOLL_SHM_OP_SUM: VLOOP(T, VU, VU, r = x + y); break;                                                       \
        case GOCOLL_SHM_OP_PROD: VLOOP(T, VU, VU, r = x * y); break;                                                      \
        case GOCOLL_SHM_OP_MAX: VLOOP(T, VS, VU, VU m = (VU)(x > y); r = ((VU)x & m) | ((VU)y & ~m)); break;              \
        case GOCOLL_SHM_OP_MIN: VLOOP(T, VS, VU, VU m = (VU)(x < y); r = ((VU)x & m) | ((VU)y & ~m)); break;              \
        }                                                                                                              \
        scalar_int_##NAME(op, dst, a, b, i, n);                                                                        \
    }

INT_KERNEL(i8, int8_t, FN(vi8), FN(vu8))
INT_KERNEL(u8, uint8_t, FN(vu8), FN(vu8))
INT_KERNEL(i16, int16_t, FN(vi16), FN(vu16))
INT_KERNEL(u16, uint16_t, FN(vu16), FN(vu16))
INT_KERNEL(i32, int32_t, FN(vi32), FN(vu32))
INT_KERNEL(u32, uint32_t, FN(vu32), FN(vu32))
INT_KERNEL(i64, int64_t, FN(vi64), FN(vu64))
INT_KERNEL(u64, uint64_t, FN(vu64), FN(vu64))

/* Floats: one IEEE operation per element for SUM and PROD. MAX and MIN
 * as package ops: the larger (smaller) where the operands are ordered
 * and differ; where they compare equal the AND (OR) of their bits, which
 * is either operand unless they are +0 and -0, and then +0 (-0); where
 * either is a NaN, the canonical NaN. */
#define FLOAT_KERNEL(NAME, T, VF, VI, QNAN)                                                                            \
    static ATTR void FN(NAME)(int op, void *dst, const void *a, const void *b, long n) {                               \
        long i = 0;                                                                                                    \
        switch (op) {                                                                                                  \
        case GOCOLL_SHM_OP_SUM: VLOOP(T, VF, VF, r = x + y); break;                                                       \
        case GOCOLL_SHM_OP_PROD: VLOOP(T, VF, VF, r = x * y); break;                                                      \
        case GOCOLL_SHM_OP_MAX:                                                                                        \
            VLOOP(T, VF, VI, VI gt = x > y; VI lt = x < y; VI eq = x == y;                                                \
                  r = ((VI)x & gt) | ((VI)y & lt) | ((VI)x & (VI)y & eq) | (~(gt | lt | eq) & QNAN));                  \
            break;                                                                                                     \
        case GOCOLL_SHM_OP_MIN:                                                                                        \
            VLOOP(T, VF, VI, VI gt = x > y; VI lt = x < y; VI eq = x == y;                                                \
                  r = ((VI)y & gt) | ((VI)x & lt) | (((VI)x | (VI)y) & eq) | (~(gt | lt | eq) & QNAN));               \
            break;                                                                                                     \
        }                                                                                                              \
        scalar_float_##NAME(op, dst, a, b, i, n);                                                                      \
    }

FLOAT_KERNEL(f32, float, FN(vf32), FN(vi32), (int32_t)0x7fc00000)
FLOAT_KERNEL(f64, double, FN(vf64), FN(vi64), (int64_t)0x7ff8000000000000)

static ATTR void FN(combine)(int k, int op, void *dst, const void *a, const void *b, long n) {
    switch (k) {
    case GOCOLL_SHM_K_I8: FN(i8)(op, dst, a, b, n); break;
    case GOCOLL_SHM_K_U8: FN(u8)(op, dst, a, b, n); break;
    case GOCOLL_SHM_K_I16: FN(i16)(op, dst, a, b, n); break;
    case GOCOLL_SHM_K_U16: FN(u16)(op, dst, a, b, n); break;
    case GOCOLL_SHM_K_I32: FN(i32)(op, dst, a, b, n); break;
    case GOCOLL_SHM_K_U32: FN(u32)(op, dst, a, b, n); break;
    case GOCOLL_SHM_K_I64: FN(i64)(op, dst, a, b, n); break;
    case GOCOLL_SHM_K_U64: FN(u64)(op, dst, a, b, n); break;
    case GOCOLL_SHM_K_F32: FN(f32)(op, dst, a, b, n); break;
    case GOCOLL_SHM_K_F64: FN(f64)(op, dst, a, b, n); break;
    }
}

#undef INT_KERNEL
#undef FLOAT_KERNEL
#undef VLOOP
#undef FN
#undef CAT
#undef CAT_
