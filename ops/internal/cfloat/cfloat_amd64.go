//go:build cgo

package cfloat

// #include "cfloat.h"
import "C"

import "unsafe"

// The codes of cfloat.go and cfloat.h agree, or this does not compile: a
// constant index must lie in the array.
var (
	_ = [1]int{}[F80-C.GOCOLL_C_F80]
	_ = [1]int{}[F128-C.GOCOLL_C_F128]
	_ = [1]int{}[C80-C.GOCOLL_C_C80]
	_ = [1]int{}[C256-C.GOCOLL_C_C256]
	_ = [1]int{}[PairF80-C.GOCOLL_C_PAIRF80]
	_ = [1]int{}[Sum-C.GOCOLL_C_SUM]
	_ = [1]int{}[Prod-C.GOCOLL_C_PROD]
	_ = [1]int{}[Max-C.GOCOLL_C_MAX]
	_ = [1]int{}[Min-C.GOCOLL_C_MIN]
	_ = [1]int{}[Maxloc-C.GOCOLL_C_MAXLOC]
	_ = [1]int{}[Minloc-C.GOCOLL_C_MINLOC]
)

// Available reports whether this build has the kernels.
const Available = true

// Has reports whether there is a kernel of op on type t.
func Has(t, op int) bool {
	return C.gocoll_reduce(C.int(t), C.int(op), nil, nil, nil, 0) == 0
}

// Reduce sets dst[i] = a[i] op b[i] for the len(dst)/Size(t) elements of
// dst, with one cgo call. dst may be a or b, never a partial overlap; a and
// b must be at least as long as dst. It panics if there is no such kernel.
func Reduce(t, op int, dst, a, b []byte) {
	n := len(dst) / Size(t)
	if n == 0 {
		return
	}
	a, b = a[:len(dst)], b[:len(dst)]
	if C.gocoll_reduce(C.int(t), C.int(op), unsafe.Pointer(&dst[0]), unsafe.Pointer(&a[0]), unsafe.Pointer(&b[0]), C.size_t(n)) != 0 {
		panic("cfloat: no kernel")
	}
}
