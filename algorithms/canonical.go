package algorithms

// The canonical association: in reproducible mode (GOCOLL_REPRODUCIBLE=1)
// every reduction whose result depends on the order of its terms (MPI_SUM
// and MPI_PROD on floating-point types, user-defined ops) returns, at every
// element, one fixed combination of the p contributions x0 .. x(p-1):
//
//	T(lo, hi) = x(lo)                                 if hi-lo == 1
//	T(lo, hi) = T(lo, lo+h) op T(lo+h, hi)            h: the largest power of two < hi-lo
//
// and the result is T(0, p): adjacent pairs, then pairs of pairs, an odd one
// out passing up unchanged. For p = 5 that is ((x0+x1)+(x2+x3))+x4. It is
// the tree recursive doubling and distance-doubling recursive halving build
// when p is a power of two, and a block of 2^k ranks (a node of 2^k
// consecutive ranks) is one of its subtrees. IEEE 754 addition and
// multiplication are commutative bit for bit, so a op b and b op a are the
// same node. float16 and bfloat16 are combined in float32 and rounded once.

// CanonicalSplit returns where T(lo, hi) splits: lo plus the largest power
// of two below hi-lo. It needs hi-lo >= 2.
func CanonicalSplit(lo, hi int) int {
	h := 1
	for 2*h < hi-lo {
		h *= 2
	}
	return lo + h
}

// Reproducible reports whether a may run call p in reproducible mode: every
// element of its result is T(0, p). That holds for every algorithm of a
// collective that does not reduce, and for every algorithm at p <= 2 (one
// combination, commutative bit for bit); otherwise the algorithm must say
// so through Canonical.
func (a *Algorithm) Reproducible(p Params) bool {
	if !a.Collective.Reduces() || p.P <= 2 {
		return true
	}
	return a.Canonical != nil && a.Canonical(p)
}
