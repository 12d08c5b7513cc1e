package ops

import "math"

// float is a Go floating-point type.
type float interface{ ~float32 | ~float64 }

// The NaN that MPI_MAX and MPI_MIN return whenever an operand is a NaN: the
// positive quiet NaN with an all-zero payload, in every width. Returning one
// NaN, rather than one of the operands, keeps the ops commutative bit for
// bit.
var (
	nan64 = math.Float64frombits(0x7ff8_0000_0000_0000)
	nan32 = math.Float32frombits(0x7fc0_0000)
)

// floatKernel returns the kernel of op on floats of type T, or nil.
func floatKernel[T float](op Op) Kernel {
	switch op {
	case Sum:
		return sumK[T]
	case Prod:
		return prodK[T]
	case Max:
		return maxFloatK[T]
	case Min:
		return minFloatK[T]
	}
	return nil
}

// fmax is MPI_MAX on floats: the canonical NaN if either operand is a NaN,
// and +0 for (+0, -0) in either order, as Go's max and math.Max.
func fmax[T float](x, y T) T {
	r := max(x, y)
	if r != r {
		return T(nan64)
	}
	return r
}

// fmin is MPI_MIN on floats: the canonical NaN if either operand is a NaN,
// and -0 for (+0, -0) in either order.
func fmin[T float](x, y T) T {
	r := min(x, y)
	if r != r {
		return T(nan64)
	}
	return r
}

func maxFloatK[T float](dst, a, b []byte) {
	d, x, y := view[T](dst, a, b)
	x, y = x[:len(d)], y[:len(d)]
	for i := range d {
		d[i] = fmax(x[i], y[i])
	}
}

func minFloatK[T float](dst, a, b []byte) {
	d, x, y := view[T](dst, a, b)
	x, y = x[:len(d)], y[:len(d)]
	for i := range d {
		d[i] = fmin(x[i], y[i])
	}
}
