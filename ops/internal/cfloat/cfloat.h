// The interface between cfloat_amd64.go and cfloat_amd64.c; the numbers
// are those of cfloat.go.

#include <stddef.h>

enum { GOCOLL_C_F80 = 1, GOCOLL_C_F128, GOCOLL_C_C80, GOCOLL_C_C256, GOCOLL_C_PAIRF80 };
enum { GOCOLL_C_SUM = 1, GOCOLL_C_PROD, GOCOLL_C_MAX, GOCOLL_C_MIN, GOCOLL_C_MAXLOC, GOCOLL_C_MINLOC };

// gocoll_reduce sets dst[i] = a[i] op b[i] for n elements of type and
// returns 0, or returns -1 if it has no such kernel.
int gocoll_reduce(int type, int op, void *dst, const void *a, const void *b, size_t n);
