package mpi

import (
	"unsafe"

	"github.com/gocoll/gocoll/ops"
)

// Elem is every Go type the collectives take, with the MPI datatype each
// stands for: int8..int64 and int (MPI_INT8_T..MPI_INT64_T; int is 64-bit),
// uint8..uint64 and uint, float32 (MPI_FLOAT), float64 (MPI_DOUBLE),
// complex64 (MPI_C_FLOAT_COMPLEX), complex128 (MPI_C_DOUBLE_COMPLEX), bool
// (MPI_C_BOOL), Float16, BFloat16, and the MAXLOC/MINLOC pairs FloatInt,
// DoubleInt, LongInt, IntInt and ShortInt.
type Elem interface {
	int8 | int16 | int32 | int64 | int |
		uint8 | uint16 | uint32 | uint64 | uint |
		float32 | float64 | complex64 | complex128 | bool |
		Float16 | BFloat16 |
		FloatInt | DoubleInt | LongInt | IntInt | ShortInt
}

// Float16 is an IEEE 754 half-precision number, as bits (MPIX_C_FLOAT16).
type Float16 uint16

// BFloat16 is a bfloat16 number, as bits (MPIX_BFLOAT16).
type BFloat16 uint16

// The value-and-index pairs of MPI_MAXLOC and MPI_MINLOC, laid out like the
// C structs of MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_LONG_INT, MPI_2INT and
// MPI_SHORT_INT.
type (
	FloatInt struct {
		Val float32
		Loc int32
	}
	DoubleInt struct {
		Val float64
		Loc int32
	}
	LongInt struct {
		Val int64
		Loc int32
	}
	IntInt   struct{ Val, Loc int32 }
	ShortInt struct {
		Val int16
		Loc int32
	}
)

// typeOf returns the MPI datatype of T.
func typeOf[T Elem]() ops.Type {
	var z T
	switch any(z).(type) {
	case int8:
		return ops.Int8
	case int16:
		return ops.Int16
	case int32:
		return ops.Int32
	case int64, int:
		return ops.Int64
	case uint8:
		return ops.Uint8
	case uint16:
		return ops.Uint16
	case uint32:
		return ops.Uint32
	case uint64, uint:
		return ops.Uint64
	case float32:
		return ops.Float
	case float64:
		return ops.Double
	case complex64:
		return ops.CFloatComplex
	case complex128:
		return ops.CDoubleComplex
	case bool:
		return ops.CBool
	case Float16:
		return ops.Float16
	case BFloat16:
		return ops.BFloat16
	case FloatInt:
		return ops.FloatInt
	case DoubleInt:
		return ops.DoubleInt
	case LongInt:
		return ops.LongInt
	case IntInt:
		return ops.TwoInt
	case ShortInt:
		return ops.ShortInt
	}
	panic("mpi: unreachable")
}

// asBytes views a slice as its bytes.
func asBytes[T Elem](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

// fromBytes views bytes as a slice of n elements.
func fromBytes[T Elem](b []byte, n int) []T {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}
