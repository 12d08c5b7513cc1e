package ops

import (
	"encoding/binary"
	"math"
)

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
// to float32 in dst, exactly; dst holds twice the bytes of src.
func Widen(t Type, dst, src []byte) {
	toF32 := f16ToF32
	if t.kind() == kBF16 {
		toF32 = bf16ToF32
	}
	for i := 0; i+1 < len(src); i += 2 {
		binary.LittleEndian.PutUint32(dst[2*i:], math.Float32bits(toF32(binary.LittleEndian.Uint16(src[i:]))))
	}
}

// Narrow rounds the float32 values in src to type t's 16-bit format in dst
// (to nearest, ties to even): the one rounding of a widened reduction.
func Narrow(t Type, dst, src []byte) {
	fromF32 := f32ToF16
	if t.kind() == kBF16 {
		fromF32 = f32ToBF16
	}
	for i := 0; i+3 < len(src); i += 4 {
		binary.LittleEndian.PutUint16(dst[i/2:], fromF32(math.Float32frombits(binary.LittleEndian.Uint32(src[i:]))))
	}
}
