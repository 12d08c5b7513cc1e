package ops

import "fmt"

// Class is a group of datatypes in the MPI standard's table of the allowed
// combinations of predefined op and datatype (MPI-4.0 section 6.9.2), plus
// ClassPair for the datatypes of MPI_MAXLOC and MPI_MINLOC (section 6.9.4)
// and ClassNone for datatypes that no predefined op accepts.
//
// The constants carry a Class prefix because MPI names both a class and a
// datatype "logical", "complex" and "byte".
type Class uint8

const (
	// ClassNone: MPI_CHAR, MPI_WCHAR, MPI_PACKED, MPI_CHARACTER. They may
	// be moved (MPI_Allgather) but never reduced.
	ClassNone Class = iota
	// ClassCInteger: the C integer types, MPI_SIGNED_CHAR and
	// MPI_UNSIGNED_CHAR included.
	ClassCInteger
	// ClassFortranInteger: MPI_INTEGER and MPI_INTEGER1..16.
	ClassFortranInteger
	// ClassFloatingPoint: MPI_FLOAT, MPI_DOUBLE, MPI_LONG_DOUBLE, the
	// Fortran REALs, and the 16-bit extensions.
	ClassFloatingPoint
	// ClassLogical: MPI_LOGICAL, MPI_C_BOOL, MPI_CXX_BOOL.
	ClassLogical
	// ClassComplex: every C, C++ and Fortran complex type.
	ClassComplex
	// ClassByte: MPI_BYTE.
	ClassByte
	// ClassMultiLanguage: MPI_AINT, MPI_OFFSET, MPI_COUNT. The standard
	// allows them with every op that accepts C integers, which is every op
	// that accepts Fortran integers too.
	ClassMultiLanguage
	// ClassPair: the value-index pairs of MPI_MAXLOC and MPI_MINLOC.
	ClassPair
	numClasses
)

var classNames = [numClasses]string{
	ClassNone:           "none",
	ClassCInteger:       "C integer",
	ClassFortranInteger: "Fortran integer",
	ClassFloatingPoint:  "floating point",
	ClassLogical:        "logical",
	ClassComplex:        "complex",
	ClassByte:           "byte",
	ClassMultiLanguage:  "multi-language",
	ClassPair:           "pair",
}

// String returns the standard's name of the class, such as "C integer".
func (c Class) String() string {
	if c < numClasses {
		return classNames[c]
	}
	return fmt.Sprintf("ops.Class(%d)", uint8(c))
}
