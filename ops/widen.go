package ops

// OrderDependent reports whether op on t gives a result that depends on
// the order in which the terms are combined: MPI_SUM and MPI_PROD on
// floating-point and complex types. Every other predefined pair (integers,
// logical and bitwise ops, MIN, MAX, MINLOC, MAXLOC) is exact in any order.
func OrderDependent(op Op, t Type) bool {
	if op != Sum && op != Prod {
		return false
	}
	c := t.Class()
	return c == ClassFloatingPoint || c == ClassComplex
}

// Wide returns the type in which reductions of a 16-bit floating type
// accumulate when they must round once (reproducible mode): float32 for
// float16 and bfloat16, a complex of two float32 for a complex of two
// float16. ok is false for every other type.
func Wide(t Type) (wide Type, ok bool) {
	switch t.kind() {
	case kF16, kBF16:
		return Float, true
	case kC16:
		return CFloatComplex, true
	}
	return TypeNull, false
}

// Widen converts the 16-bit values of type t in src (t as Wide accepts)
// to float32 in dst, exactly; dst holds twice the bytes of src. It is the
// conversion the Reductions widen with (vector instructions where the CPU
// has them), so a call widened here and one the shm engine widens start
// from the same bits.
func Widen(t Type, dst, src []byte) { widening16(t).widen(dst, src) }

// Narrow rounds the float32 values in src to type t's 16-bit format in dst
// (to nearest, ties to even): the one rounding of a widened reduction.
func Narrow(t Type, dst, src []byte) { widening16(t).narrow(dst, src) }

// widening16 is the active level's widening of t's 16-bit parts:
// bfloat16's, or binary16's (float16 and the complex of two).
func widening16(t Type) *widening {
	if t.kind() == kBF16 {
		return active.Load().bf16
	}
	return active.Load().f16
}
