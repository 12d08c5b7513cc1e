package algorithms

// FlatFor is flatFor, for the external tests: the flat algorithm a
// hierarchical algorithm runs where there is nothing to compose.
func FlatFor(c Collective, q, n int, commutative bool) *Algorithm {
	return flatFor(c, q, small(n), commutative)
}
