/*
 * fakecuda.c: a stand-in for the CUDA driver (built with the soname
 * libcuda.so.1), so that the preload library's device-buffer check can be
 * tested on machines without a GPU. cuPointerGetAttribute reports memory
 * marked with fake_cuda_mark as device memory, anything else as unknown
 * to CUDA (host memory), as the driver does.
 */
#include <stddef.h>
#include <stdint.h>

static uintptr_t lo, hi;

void fake_cuda_mark(void *p, size_t n) {
    lo = (uintptr_t)p;
    hi = lo + n;
}

/* CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2, CU_MEMORYTYPE_DEVICE = 2,
 * CUDA_ERROR_INVALID_VALUE = 1. */
int cuPointerGetAttribute(void *data, int attribute, uintptr_t ptr) {
    if (attribute != 2 || ptr < lo || ptr >= hi) return 1;
    *(unsigned int *)data = 2;
    return 0;
}
