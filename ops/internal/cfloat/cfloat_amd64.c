//go:build cgo

// Kernels on the x86-64 C types that Go lacks: long double (the x87 80-bit
// format, stored in 16 bytes), _Float128 (IEEE binary128, gfortran's
// REAL*16) and their complex and MAXLOC pairs. gcc computes long double on
// the x87 unit and _Float128 with the soft-float routines of libgcc
// (__addtf3, __multf3, __lttf2, ...), which every gcc link includes:
// libquadmath is not needed. The semantics are those of the Go kernels;
// see package ops.

#include <stddef.h>
#include "cfloat.h"

typedef long double f80;
typedef _Float128 f128;

typedef struct { f80 re, im; } c80;
typedef struct { f128 re, im; } c256;
typedef struct { f80 v; int i; } pairf80;

// MPI_MAX and MPI_MIN: the canonical NaN if either operand is a NaN; +0 is
// larger than -0.
#define MAXMIN(T, NAN)                                                  \
	static inline T max_##T(T x, T y) {                             \
		if (x != x || y != y) return NAN;                       \
		if (x > y) return x;                                    \
		if (y > x) return y;                                    \
		return __builtin_signbit(x) ? y : x;                    \
	}                                                               \
	static inline T min_##T(T x, T y) {                             \
		if (x != x || y != y) return NAN;                       \
		if (x < y) return x;                                    \
		if (y < x) return y;                                    \
		return __builtin_signbit(x) ? x : y;                    \
	}
MAXMIN(f80, __builtin_nanl(""))
MAXMIN(f128, __builtin_nanf128(""))

// LOOP applies EXPR to every element; u and v are the operands, read
// before d[i] is written, so d may be x or y.
#define LOOP(T, EXPR)                                                   \
	do {                                                            \
		T *d = dst;                                             \
		const T *x = a, *y = b;                                 \
		for (size_t i = 0; i < n; i++) {                        \
			T u = x[i], v = y[i];                           \
			EXPR;                                           \
		}                                                       \
	} while (0)

#define REAL(T)                                                         \
	switch (op) {                                                   \
	case GOCOLL_C_SUM: LOOP(T, d[i] = u + v); return 0;             \
	case GOCOLL_C_PROD: LOOP(T, d[i] = u * v); return 0;            \
	case GOCOLL_C_MAX: LOOP(T, d[i] = max_##T(u, v)); return 0;     \
	case GOCOLL_C_MIN: LOOP(T, d[i] = min_##T(u, v)); return 0;     \
	}                                                               \
	return -1

// The textbook product, each part rounded to the element type: no C
// Annex G infinity recovery, as the Go complex kernels.
#define COMPLEX(T)                                                      \
	switch (op) {                                                   \
	case GOCOLL_C_SUM:                                              \
		LOOP(T, d[i].re = u.re + v.re; d[i].im = u.im + v.im);  \
		return 0;                                               \
	case GOCOLL_C_PROD:                                             \
		LOOP(T, d[i].re = u.re * v.re - u.im * v.im;            \
		     d[i].im = u.re * v.im + u.im * v.re);              \
		return 0;                                               \
	}                                                               \
	return -1

// MPI_MAXLOC and MPI_MINLOC: the winner's value and index; on equal values
// the smaller index. A NaN wins and becomes the canonical NaN. The
// padding after the index is left as it was.
static inline void loc(pairf80 *d, pairf80 u, pairf80 v, int isMax) {
	int unan = u.v != u.v, vnan = v.v != v.v;
	int i = u.i < v.i ? u.i : v.i;
	f80 w;
	if (unan || vnan) {
		w = __builtin_nanl("");
		if (!vnan) i = u.i;
		else if (!unan) i = v.i;
	} else if (u.v == v.v) {
		w = isMax ? max_f80(u.v, v.v) : min_f80(u.v, v.v);
	} else if ((u.v > v.v) == isMax) {
		w = u.v, i = u.i;
	} else {
		w = v.v, i = v.i;
	}
	d->v = w;
	d->i = i;
}

#define PAIR()                                                          \
	switch (op) {                                                   \
	case GOCOLL_C_MAXLOC: LOOP(pairf80, loc(&d[i], u, v, 1)); return 0; \
	case GOCOLL_C_MINLOC: LOOP(pairf80, loc(&d[i], u, v, 0)); return 0; \
	}                                                               \
	return -1

int gocoll_reduce(int type, int op, void *dst, const void *a, const void *b, size_t n) {
	switch (type) {
	case GOCOLL_C_F80: REAL(f80);
	case GOCOLL_C_F128: REAL(f128);
	case GOCOLL_C_C80: COMPLEX(c80);
	case GOCOLL_C_C256: COMPLEX(c256);
	case GOCOLL_C_PAIRF80: PAIR();
	}
	return -1;
}
