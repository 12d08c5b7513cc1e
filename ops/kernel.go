package ops

import "unsafe"

// Kernel sets dst[i] = a[i] op b[i] for every element i. The three slices
// have the same length, a multiple of the element size; a kernel panics if a
// or b is shorter than dst. dst may be the very same slice as a or as b
// (same first byte), never a partial overlap. a is the left operand, which
// matters only for user-defined ops that are not commutative.
//
// Slices should be aligned to the element size; on amd64 and arm64 any
// alignment works, at some cost.
type Kernel func(dst, a, b []byte)

// view returns dst, a and b as slices of T, all of len(dst)/sizeof(T)
// elements; the bounds checks of the reslicing let the compiler drop those
// of the loops that follow.
func view[T any](dst, a, b []byte) (d, x, y []T) {
	var z T
	n := len(dst) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil, nil, nil
	}
	a, b = a[:len(dst)], b[:len(dst)]
	d = unsafe.Slice((*T)(unsafe.Pointer(&dst[0])), n)
	x = unsafe.Slice((*T)(unsafe.Pointer(&a[0])), n)
	y = unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
	return d, x, y
}

// view2 returns dst and src as slices of D and S with as many elements
// as src has S (dst must hold them).
func view2[D, S any](dst, src []byte) (d []D, s []S) {
	var z S
	n := len(src) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil, nil
	}
	s = unsafe.Slice((*S)(unsafe.Pointer(&src[0])), n)
	var zd D
	_ = dst[n*int(unsafe.Sizeof(zd))-1]
	d = unsafe.Slice((*D)(unsafe.Pointer(&dst[0])), n)
	return d, s
}
