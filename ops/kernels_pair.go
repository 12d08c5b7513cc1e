package ops

// The pair types of MPI_MAXLOC and MPI_MINLOC: a value, then an index, laid
// out as the C structs of the standard (pair[float64, int32] is
// MPI_DOUBLE_INT: 8 bytes of value, 4 of index, 4 of padding). Go lays out
// these structs exactly as gcc does on amd64.
type pair[V, I ordered] struct {
	V V
	I I
}

type ordered interface{ integer | float }

// pairKernel returns the kernel of op on pairs of value V and index I, or
// nil.
func pairKernel[V, I ordered](op Op) Kernel {
	switch op {
	case Maxloc:
		return maxlocK[V, I]
	case Minloc:
		return minlocK[V, I]
	}
	return nil
}

// MPI_MAXLOC keeps the larger value and its index; on equal values it keeps
// the smaller index, which makes the op commutative. A NaN value is larger
// than any number (it wins, as in MPI_MAX) and becomes the canonical NaN;
// two NaNs are equal. +0 and -0 are equal; the value kept is MPI_MAX's,
// +0. MPI_MINLOC is the mirror image: a NaN also wins.

func maxlocK[V, I ordered](dst, a, b []byte) {
	d, x, y := view[pair[V, I]](dst, a, b)
	for i := range d {
		d[i] = loc(x[i], y[i], true)
	}
}

func minlocK[V, I ordered](dst, a, b []byte) {
	d, x, y := view[pair[V, I]](dst, a, b)
	for i := range d {
		d[i] = loc(x[i], y[i], false)
	}
}

func loc[V, I ordered](x, y pair[V, I], isMax bool) pair[V, I] {
	xnan, ynan := x.V != x.V, y.V != y.V
	switch {
	case xnan || ynan:
		var nan V
		nan = V(nan64) // only reached when V is a float type
		switch {
		case !ynan:
			return pair[V, I]{nan, x.I}
		case !xnan:
			return pair[V, I]{nan, y.I}
		}
		return pair[V, I]{nan, min(x.I, y.I)}
	case x.V == y.V:
		v := min(x.V, y.V) // -0 for MPI_MINLOC
		if isMax {
			v = max(x.V, y.V) // +0 for MPI_MAXLOC
		}
		return pair[V, I]{v, min(x.I, y.I)}
	case (x.V > y.V) == isMax:
		return x
	}
	return y
}
