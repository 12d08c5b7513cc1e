// Package cfloat holds the reduction kernels on the floating-point types
// that C has and Go lacks: long double (on x86-64 the x87 80-bit format,
// stored in 16 bytes), _Float128 (IEEE binary128, gfortran's REAL*16),
// their complex types and the long double MPI_MAXLOC pair. They are written
// in C so that the results are exactly those of the hardware and of gcc's
// libgcc soft-float routines.
//
// The package exists apart from package ops because Go refuses Go assembly
// in a package that uses cgo. It builds everywhere; Available is false
// where it has no kernels (no cgo, or not amd64).
package cfloat

// Type codes; cfloat.h has the same numbers.
const (
	F80     = 1 + iota // long double
	F128               // _Float128
	C80                // long double _Complex
	C256               // _Float128 _Complex
	PairF80            // struct { long double v; int i; }, MPI_LONG_DOUBLE_INT
)

// Op codes; cfloat.h has the same numbers.
const (
	Sum = 1 + iota
	Prod
	Max
	Min
	Maxloc
	Minloc
)

// Size returns the size in bytes of an element of type t.
func Size(t int) int {
	switch t {
	case F80, F128:
		return 16
	case C80, C256, PairF80:
		return 32
	}
	return 0
}
