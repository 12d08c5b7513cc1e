/*
 * The C half's reduction kernels (kernels.c): dst[i] = a[i] op b[i] for n
 * elements of a GOCOLL_SHM_K_ kind under a GOCOLL_SHM_OP_ op, with the
 * results of package ops' kernels bit for bit. dst may be a or b (the
 * same first byte), never a partial overlap.
 */
#ifndef GOCOLL_ENGINE_KERNELS_H
#define GOCOLL_ENGINE_KERNELS_H
#include "engine_gen.h"

/* Instruction set levels, as package ops names them: "go" (here the
 * x86-64 baseline, SSE2, which Go's own code uses too), "avx2", "avx512"
 * (F, DQ and BW). */
enum { GOCOLL_ISA_BASE, GOCOLL_ISA_AVX2, GOCOLL_ISA_AVX512, GOCOLL_NUM_ISAS };

/* gocoll_shm_set_isa caps the kernels at a level (ops.CapISA's, which the
 * Go side passes on: engine.Attachable and SetISA) and returns the level
 * in use: the lower of the cap and what the CPU and the OS support. */
int gocoll_shm_set_isa(int level);
/* gocoll_shm_isa returns the level in use. */
int gocoll_shm_isa(void);

/* gocoll_shm_combine applies op on kind k with the level in use. */
void gocoll_shm_combine(int k, int op, void *dst, const void *a, const void *b, long n);
/* gocoll_shm_combine_at does it with the kernels of one level (tests). */
void gocoll_shm_combine_at(int level, int k, int op, void *dst, const void *a, const void *b, long n);
#endif
