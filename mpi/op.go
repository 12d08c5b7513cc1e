package mpi

import (
	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/ops"
)

// Op is a reduction operation: one of the predefined ones below, or one
// made with NewOp.
type Op struct {
	op   coll.Op
	elem ops.Type // the element type of a user op
	name string
}

func builtin(o ops.Op) Op { return Op{op: coll.Op{Builtin: o}, name: o.String()} }

// The predefined operations. Each is defined on the types the MPI standard
// allows; using one on another type (MPI_BAND on float64, say) is an error.
var (
	Sum    = builtin(ops.Sum)
	Prod   = builtin(ops.Prod)
	Max    = builtin(ops.Max)
	Min    = builtin(ops.Min)
	Land   = builtin(ops.Land)
	Lor    = builtin(ops.Lor)
	Lxor   = builtin(ops.Lxor)
	Band   = builtin(ops.Band)
	Bor    = builtin(ops.Bor)
	Bxor   = builtin(ops.Bxor)
	Maxloc = builtin(ops.Maxloc)
	Minloc = builtin(ops.Minloc)
)

// String returns the op's name.
func (o Op) String() string { return o.name }

// NewOp makes a user-defined operation on elements of type T, like
// MPI_Op_create: f must set inout[i] = in[i] op inout[i] for every i, and
// op must be associative. If commutative is false, gocoll combines the
// contributions in rank order, x0 op x1 op ... op x(p-1), and uses only
// algorithms that keep that order.
func NewOp[T Elem](f func(in, inout []T), commutative bool) Op {
	var z T
	size := int(sizeOf(z))
	user := func(ops.Type) ops.Kernel {
		return ops.UserKernel(func(in, inout []byte, n int) {
			f(fromBytes[T](in, n), fromBytes[T](inout, n))
		}, size)
	}
	return Op{op: coll.Op{User: user, Commutative: commutative}, elem: typeOf[T](), name: "user op"}
}
