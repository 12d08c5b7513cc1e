package ops

import "github.com/gocoll/gocoll/ops/internal/cfloat"

// cKernel returns the kernel of op on a kind that only C has, or nil: long
// double (kF80), binary128 (kF128), their complex types and
// MPI_LONG_DOUBLE_INT. They live in package cfloat, in C, and exist only
// with cgo on amd64. Each call is one cgo call, some tens of nanoseconds:
// these kernels are for correctness, not speed. Their semantics are those
// of the Go kernels of the same op.
func cKernel(op Op, k kind) Kernel {
	ct, cop := cTypes[k], cOps[op]
	if ct == 0 || cop == 0 || !cfloat.Has(ct, cop) {
		return nil
	}
	return func(dst, a, b []byte) { cfloat.Reduce(ct, cop, dst, a, b) }
}

// The codes of package cfloat; 0 where it has none.
var (
	cTypes = [numKinds]int{kF80: cfloat.F80, kF128: cfloat.F128, kC80: cfloat.C80,
		kC256: cfloat.C256, kPairF80I32: cfloat.PairF80}
	cOps = [numOps]int{Sum: cfloat.Sum, Prod: cfloat.Prod, Max: cfloat.Max,
		Min: cfloat.Min, Maxloc: cfloat.Maxloc, Minloc: cfloat.Minloc}
)

// missingReason says why Lookup found no kernel for an allowed pair.
func missingReason(k kind) string {
	switch k {
	case kF80, kF128, kC80, kC256, kPairF80I32:
		if !cfloat.Available {
			return "long double and binary128 kernels are written in C and need cgo on amd64"
		}
	}
	return "no kernel"
}
