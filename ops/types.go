package ops

import "fmt"

// Type is a predefined MPI datatype. The zero value, TypeNull, is not a
// valid datatype.
//
// Sizes and layouts are those of Linux x86-64 with gcc and gfortran: C long
// is 8 bytes, long double is the x87 80-bit format stored in 16 bytes,
// wchar_t is 4 bytes, Fortran LOGICAL, INTEGER and REAL are 4 bytes, and
// the pair types of MPI_MAXLOC and MPI_MINLOC are C structs with their
// padding.
type Type uint8

// The predefined datatypes, named after MPI without the MPI_ prefix. Synonyms
// of the standard (MPI_LONG_LONG_INT, MPI_C_COMPLEX) map onto the one
// constant here.
const (
	TypeNull Type = iota

	// C
	Char
	SignedChar
	UnsignedChar
	Byte
	WChar
	Short
	UnsignedShort
	Int
	Unsigned
	Long
	UnsignedLong
	LongLong
	UnsignedLongLong
	Float
	Double
	LongDouble
	CBool
	Int8
	Int16
	Int32
	Int64
	Uint8
	Uint16
	Uint32
	Uint64
	Aint
	Offset
	Count
	CFloatComplex
	CDoubleComplex
	CLongDoubleComplex
	CXXBool
	CXXFloatComplex
	CXXDoubleComplex
	CXXLongDoubleComplex
	Packed

	// Fortran
	Character
	Logical
	Integer
	Real
	DoublePrecision
	Complex
	DoubleComplex
	Integer1
	Integer2
	Integer4
	Integer8
	Integer16
	Real2
	Real4
	Real8
	Real16
	Complex4
	Complex8
	Complex16
	Complex32

	// Pair types of MPI_MAXLOC and MPI_MINLOC: a value, then an index.
	FloatInt
	DoubleInt
	LongInt
	TwoInt
	ShortInt
	LongDoubleInt
	TwoReal
	TwoDoublePrecision
	TwoInteger

	// Extensions: IEEE binary16 (MPICH's MPIX_C_FLOAT16) and bfloat16.
	Float16
	BFloat16

	numTypes
)

// kind is the machine representation of a datatype's elements: which kernel
// family reduces it. Datatypes that share a kind share kernels (MPI_INT,
// MPI_INT32_T and MPI_INTEGER are all kI32).
type kind uint8

const (
	kNone kind = iota
	kByte
	kI8
	kU8
	kI16
	kU16
	kI32
	kU32
	kI64
	kU64
	kI128 // Fortran INTEGER*16, two's complement, little endian
	kBool8
	kBool32
	kF16
	kBF16
	kF32
	kF64
	kF80  // x87 extended precision in 16 bytes
	kF128 // IEEE binary128
	kC16  // complex of two binary16
	kC64
	kC128
	kC80  // complex of two x87 extended, 32 bytes
	kC256 // complex of two binary128
	kPairF32I32
	kPairF64I32
	kPairI64I32
	kPairI32I32
	kPairI16I32
	kPairF80I32
	kPairF32F32
	kPairF64F64
	numKinds
)

type typeInfo struct {
	name  string
	size  uint8
	class Class
	kind  kind
}

var types = [numTypes]typeInfo{
	Char:                 {"MPI_CHAR", 1, ClassNone, kNone},
	SignedChar:           {"MPI_SIGNED_CHAR", 1, ClassCInteger, kI8},
	UnsignedChar:         {"MPI_UNSIGNED_CHAR", 1, ClassCInteger, kU8},
	Byte:                 {"MPI_BYTE", 1, ClassByte, kByte},
	WChar:                {"MPI_WCHAR", 4, ClassNone, kNone},
	Short:                {"MPI_SHORT", 2, ClassCInteger, kI16},
	UnsignedShort:        {"MPI_UNSIGNED_SHORT", 2, ClassCInteger, kU16},
	Int:                  {"MPI_INT", 4, ClassCInteger, kI32},
	Unsigned:             {"MPI_UNSIGNED", 4, ClassCInteger, kU32},
	Long:                 {"MPI_LONG", 8, ClassCInteger, kI64},
	UnsignedLong:         {"MPI_UNSIGNED_LONG", 8, ClassCInteger, kU64},
	LongLong:             {"MPI_LONG_LONG", 8, ClassCInteger, kI64},
	UnsignedLongLong:     {"MPI_UNSIGNED_LONG_LONG", 8, ClassCInteger, kU64},
	Float:                {"MPI_FLOAT", 4, ClassFloatingPoint, kF32},
	Double:               {"MPI_DOUBLE", 8, ClassFloatingPoint, kF64},
	LongDouble:           {"MPI_LONG_DOUBLE", 16, ClassFloatingPoint, kF80},
	CBool:                {"MPI_C_BOOL", 1, ClassLogical, kBool8},
	Int8:                 {"MPI_INT8_T", 1, ClassCInteger, kI8},
	Int16:                {"MPI_INT16_T", 2, ClassCInteger, kI16},
	Int32:                {"MPI_INT32_T", 4, ClassCInteger, kI32},
	Int64:                {"MPI_INT64_T", 8, ClassCInteger, kI64},
	Uint8:                {"MPI_UINT8_T", 1, ClassCInteger, kU8},
	Uint16:               {"MPI_UINT16_T", 2, ClassCInteger, kU16},
	Uint32:               {"MPI_UINT32_T", 4, ClassCInteger, kU32},
	Uint64:               {"MPI_UINT64_T", 8, ClassCInteger, kU64},
	Aint:                 {"MPI_AINT", 8, ClassMultiLanguage, kI64},
	Offset:               {"MPI_OFFSET", 8, ClassMultiLanguage, kI64},
	Count:                {"MPI_COUNT", 8, ClassMultiLanguage, kI64},
	CFloatComplex:        {"MPI_C_FLOAT_COMPLEX", 8, ClassComplex, kC64},
	CDoubleComplex:       {"MPI_C_DOUBLE_COMPLEX", 16, ClassComplex, kC128},
	CLongDoubleComplex:   {"MPI_C_LONG_DOUBLE_COMPLEX", 32, ClassComplex, kC80},
	CXXBool:              {"MPI_CXX_BOOL", 1, ClassLogical, kBool8},
	CXXFloatComplex:      {"MPI_CXX_FLOAT_COMPLEX", 8, ClassComplex, kC64},
	CXXDoubleComplex:     {"MPI_CXX_DOUBLE_COMPLEX", 16, ClassComplex, kC128},
	CXXLongDoubleComplex: {"MPI_CXX_LONG_DOUBLE_COMPLEX", 32, ClassComplex, kC80},
	Packed:               {"MPI_PACKED", 1, ClassNone, kNone},

	Character:       {"MPI_CHARACTER", 1, ClassNone, kNone},
	Logical:         {"MPI_LOGICAL", 4, ClassLogical, kBool32},
	Integer:         {"MPI_INTEGER", 4, ClassFortranInteger, kI32},
	Real:            {"MPI_REAL", 4, ClassFloatingPoint, kF32},
	DoublePrecision: {"MPI_DOUBLE_PRECISION", 8, ClassFloatingPoint, kF64},
	Complex:         {"MPI_COMPLEX", 8, ClassComplex, kC64},
	DoubleComplex:   {"MPI_DOUBLE_COMPLEX", 16, ClassComplex, kC128},
	Integer1:        {"MPI_INTEGER1", 1, ClassFortranInteger, kI8},
	Integer2:        {"MPI_INTEGER2", 2, ClassFortranInteger, kI16},
	Integer4:        {"MPI_INTEGER4", 4, ClassFortranInteger, kI32},
	Integer8:        {"MPI_INTEGER8", 8, ClassFortranInteger, kI64},
	Integer16:       {"MPI_INTEGER16", 16, ClassFortranInteger, kI128},
	Real2:           {"MPI_REAL2", 2, ClassFloatingPoint, kF16},
	Real4:           {"MPI_REAL4", 4, ClassFloatingPoint, kF32},
	Real8:           {"MPI_REAL8", 8, ClassFloatingPoint, kF64},
	Real16:          {"MPI_REAL16", 16, ClassFloatingPoint, kF128},
	Complex4:        {"MPI_COMPLEX4", 4, ClassComplex, kC16},
	Complex8:        {"MPI_COMPLEX8", 8, ClassComplex, kC64},
	Complex16:       {"MPI_COMPLEX16", 16, ClassComplex, kC128},
	Complex32:       {"MPI_COMPLEX32", 32, ClassComplex, kC256},

	FloatInt:           {"MPI_FLOAT_INT", 8, ClassPair, kPairF32I32},
	DoubleInt:          {"MPI_DOUBLE_INT", 16, ClassPair, kPairF64I32},
	LongInt:            {"MPI_LONG_INT", 16, ClassPair, kPairI64I32},
	TwoInt:             {"MPI_2INT", 8, ClassPair, kPairI32I32},
	ShortInt:           {"MPI_SHORT_INT", 8, ClassPair, kPairI16I32},
	LongDoubleInt:      {"MPI_LONG_DOUBLE_INT", 32, ClassPair, kPairF80I32},
	TwoReal:            {"MPI_2REAL", 8, ClassPair, kPairF32F32},
	TwoDoublePrecision: {"MPI_2DOUBLE_PRECISION", 16, ClassPair, kPairF64F64},
	TwoInteger:         {"MPI_2INTEGER", 8, ClassPair, kPairI32I32},

	Float16:  {"MPIX_C_FLOAT16", 2, ClassFloatingPoint, kF16},
	BFloat16: {"MPIX_BFLOAT16", 2, ClassFloatingPoint, kBF16},
}

// Valid reports whether t is a predefined datatype.
func (t Type) Valid() bool { return t > TypeNull && t < numTypes }

// Size returns the size of one element in bytes, 0 for an invalid type.
func (t Type) Size() int {
	if !t.Valid() {
		return 0
	}
	return int(types[t].size)
}

// String returns the MPI name of the datatype, such as "MPI_DOUBLE".
func (t Type) String() string {
	if t == TypeNull {
		return "MPI_DATATYPE_NULL"
	}
	if !t.Valid() {
		return fmt.Sprintf("ops.Type(%d)", uint8(t))
	}
	return types[t].name
}

// Class returns the group of the MPI standard's table of reductions that t
// belongs to (MPI-4.0 section 6.9.2), ClassPair for the MPI_MAXLOC / MPI_MINLOC
// types, and ClassNone for datatypes no predefined op accepts.
func (t Type) Class() Class {
	if !t.Valid() {
		return ClassNone
	}
	return types[t].class
}

// Scalar names the machine representation of t's elements when they are
// plain two's-complement integers or IEEE binary32/64 floats ("i8", "u8",
// "i16", "u16", "i32", "u32", "i64", "u64", "f32", "f64"), and is ""
// otherwise. Code outside Go that reduces such types itself (the C half of
// the shared-memory engine, intranode/engine, whose generator reads this)
// follows the kernels of the same name.
func (t Type) Scalar() string {
	switch t.kind() {
	case kI8:
		return "i8"
	case kU8:
		return "u8"
	case kI16:
		return "i16"
	case kU16:
		return "u16"
	case kI32:
		return "i32"
	case kU32:
		return "u32"
	case kI64:
		return "i64"
	case kU64:
		return "u64"
	case kF32:
		return "f32"
	case kF64:
		return "f64"
	}
	return ""
}

func (t Type) kind() kind {
	if !t.Valid() {
		return kNone
	}
	return types[t].kind
}

// Types returns every valid datatype, in the order of the constants.
func Types() []Type {
	ts := make([]Type, 0, numTypes-1)
	for t := TypeNull + 1; t < numTypes; t++ {
		ts = append(ts, t)
	}
	return ts
}

// kindSize returns the element size of a kind.
func kindSize(k kind) int {
	for t := range types {
		if types[t].kind == k {
			return int(types[t].size)
		}
	}
	return 0
}
