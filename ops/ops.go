package ops

import "fmt"

// Op is a predefined MPI reduction operation. The zero value, OpNull, is
// not a valid op.
type Op uint8

// The predefined ops, named after MPI without the MPI_ prefix.
const (
	OpNull Op = iota
	Sum
	Prod
	Max
	Min
	Land
	Lor
	Lxor
	Band
	Bor
	Bxor
	Maxloc
	Minloc
	numOps
)

var opNames = [numOps]string{
	OpNull: "MPI_OP_NULL",
	Sum:    "MPI_SUM",
	Prod:   "MPI_PROD",
	Max:    "MPI_MAX",
	Min:    "MPI_MIN",
	Land:   "MPI_LAND",
	Lor:    "MPI_LOR",
	Lxor:   "MPI_LXOR",
	Band:   "MPI_BAND",
	Bor:    "MPI_BOR",
	Bxor:   "MPI_BXOR",
	Maxloc: "MPI_MAXLOC",
	Minloc: "MPI_MINLOC",
}

// String returns the MPI name of the op, such as "MPI_SUM".
func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("ops.Op(%d)", uint8(o))
}

// Valid reports whether o is a predefined op other than OpNull.
func (o Op) Valid() bool { return o > OpNull && o < numOps }

// Commutative reports whether the op is commutative. Every predefined op
// is, with the kernels of this package: MPI_MAX and MPI_MIN order NaN and
// signed zeros (see the package documentation), and MPI_MAXLOC and
// MPI_MINLOC break ties on the index. Floating-point MPI_SUM and MPI_PROD
// are commutative but not associative.
func (o Op) Commutative() bool { return o.Valid() }

// Ops returns every valid op, in the order of the constants.
func Ops() []Op {
	os := make([]Op, 0, numOps-1)
	for o := OpNull + 1; o < numOps; o++ {
		os = append(os, o)
	}
	return os
}
