package ops

import "fmt"

// allowed is the standard's table (MPI-4.0 section 6.9.2 for the first ten
// ops, 6.9.4 for MPI_MAXLOC and MPI_MINLOC): the classes each op accepts.
var allowed = [numOps][]Class{
	Max:    {ClassCInteger, ClassFortranInteger, ClassFloatingPoint, ClassMultiLanguage},
	Min:    {ClassCInteger, ClassFortranInteger, ClassFloatingPoint, ClassMultiLanguage},
	Sum:    {ClassCInteger, ClassFortranInteger, ClassFloatingPoint, ClassComplex, ClassMultiLanguage},
	Prod:   {ClassCInteger, ClassFortranInteger, ClassFloatingPoint, ClassComplex, ClassMultiLanguage},
	Land:   {ClassCInteger, ClassLogical, ClassMultiLanguage},
	Lor:    {ClassCInteger, ClassLogical, ClassMultiLanguage},
	Lxor:   {ClassCInteger, ClassLogical, ClassMultiLanguage},
	Band:   {ClassCInteger, ClassFortranInteger, ClassByte, ClassMultiLanguage},
	Bor:    {ClassCInteger, ClassFortranInteger, ClassByte, ClassMultiLanguage},
	Bxor:   {ClassCInteger, ClassFortranInteger, ClassByte, ClassMultiLanguage},
	Maxloc: {ClassPair},
	Minloc: {ClassPair},
}

// why says, for an error message, what an op needs.
var why = [numOps]string{
	Max:    "ordering ops need an integer or floating-point type",
	Min:    "ordering ops need an integer or floating-point type",
	Sum:    "arithmetic ops need an integer, floating-point or complex type",
	Prod:   "arithmetic ops need an integer, floating-point or complex type",
	Land:   "logical ops need a C integer or a logical type",
	Lor:    "logical ops need a C integer or a logical type",
	Lxor:   "logical ops need a C integer or a logical type",
	Band:   "bitwise ops need an integer or MPI_BYTE",
	Bor:    "bitwise ops need an integer or MPI_BYTE",
	Bxor:   "bitwise ops need an integer or MPI_BYTE",
	Maxloc: "location ops need a value-index pair such as MPI_DOUBLE_INT",
	Minloc: "location ops need a value-index pair such as MPI_DOUBLE_INT",
}

// Allowed reports whether the MPI standard defines op on t. It does not say
// whether this build has the kernel: Lookup does (long double and binary128
// kernels need cgo on amd64).
func Allowed(op Op, t Type) bool {
	if !op.Valid() || !t.Valid() {
		return false
	}
	c := t.Class()
	for _, a := range allowed[op] {
		if a == c {
			return true
		}
	}
	return false
}

// Error reports an (op, datatype) pair that has no kernel: the standard
// forbids it, one of them is invalid, or this build lacks the kernel.
type Error struct {
	Op   Op
	Type Type
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Lookup returns the kernel of op on t. It returns an *Error when the
// standard forbids the pair, when op or t is invalid, and when this build
// has no kernel for t (see Allowed).
//
// The kernel is safe for concurrent use: predefined kernels keep no state.
func Lookup(op Op, t Type) (Kernel, error) {
	switch {
	case !op.Valid():
		return nil, &Error{op, t, fmt.Sprintf("%v is not a predefined reduction op", op)}
	case !t.Valid():
		return nil, &Error{op, t, fmt.Sprintf("%v is not a predefined datatype", t)}
	case t.Class() == ClassNone:
		return nil, &Error{op, t, fmt.Sprintf("%v is not defined on %v (no predefined op reduces characters or packed data)", op, t)}
	case !Allowed(op, t):
		return nil, &Error{op, t, fmt.Sprintf("%v is not defined on %v (%s)", op, t, why[op])}
	}
	k := active.Load().table[op][t.kind()]
	if k == nil {
		return nil, &Error{op, t, fmt.Sprintf("%v on %v is not available in this build (%s)", op, t, missingReason(t.kind()))}
	}
	return k, nil
}
