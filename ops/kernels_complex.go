package ops

// complexKernel returns the kernel of op on complex numbers made of two T,
// or nil. MPI_SUM adds the parts, so it is the float kernel; MPI_PROD is
// the textbook product (ac-bd) + (ad+bc)i, each part rounded to T, without
// the infinity recovery of C's Annex G.
func complexKernel[T float](op Op) Kernel {
	switch op {
	case Sum:
		return sumK[T]
	case Prod:
		return cprodK[T]
	}
	return nil
}

func cprodK[T float](dst, a, b []byte) {
	d, x, y := view[[2]T](dst, a, b)
	for i := range d {
		d[i] = cmul(x[i], y[i])
	}
}

// cmul multiplies x and y, rounding each product to T (the conversions keep
// the compiler from fusing a multiply and an add).
func cmul[T float](x, y [2]T) [2]T {
	ac, bd := T(x[0]*y[0]), T(x[1]*y[1])
	ad, bc := T(x[0]*y[1]), T(x[1]*y[0])
	return [2]T{ac - bd, ad + bc}
}
