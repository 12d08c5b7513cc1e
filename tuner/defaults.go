package tuner

// Defaults are the built-in rules, tried after any tuning file. Within a
// collective the first match whose restrictions hold wins; each collective
// ends with an order-preserving rule that matches every size, so a
// non-commutative op always finds an algorithm.
//
// How these numbers were derived is in docs/performance.md ("How the
// defaults were chosen"): measured on this project's reference machine, 2 cores, at up
// to 8 ranks on that one node. So they apply there only (MaxRanks 8,
// MaxNodes 1); beyond, the model decides (model.go).
var Defaults = []Rule{
	// On one host, the shared-memory algorithms (they need a shared
	// segment; elsewhere their restriction sends the call on).
	{Collective: "allreduce", MaxRanks: 8, MaxNodes: 1, Algorithm: "shm"},
	{Collective: "reduce_scatter", MaxRanks: 8, MaxNodes: 1, Algorithm: "shm"},
	{Collective: "reduce_scatter_block", MaxRanks: 8, MaxNodes: 1, Algorithm: "shm"},
	{Collective: "allgather", MaxRanks: 8, MaxNodes: 1, Algorithm: "shm"},

	{Collective: "allreduce", MaxRanks: 8, MaxNodes: 1, MaxBytes: 8 << 10, Algorithm: "recursive_doubling"},
	{Collective: "allreduce", MaxRanks: 8, MaxNodes: 1, MinBytes: 1 << 20, Algorithm: "ring"},
	{Collective: "allreduce", MaxRanks: 8, MaxNodes: 1, Algorithm: "rabenseifner"},

	{Collective: "reduce_scatter", MaxRanks: 8, MaxNodes: 1, MaxBytes: 8 << 10, Algorithm: "recursive_halving"},
	{Collective: "reduce_scatter", MaxRanks: 8, MaxNodes: 1, MaxBytes: 8 << 10, Algorithm: "recursive_doubling"},
	{Collective: "reduce_scatter", MaxRanks: 8, MaxNodes: 1, Algorithm: "ring"},
	{Collective: "reduce_scatter", MaxRanks: 8, MaxNodes: 1, Algorithm: "pairwise"},

	{Collective: "reduce_scatter_block", MaxRanks: 8, MaxNodes: 1, MaxBytes: 8 << 10, Algorithm: "recursive_halving"},
	{Collective: "reduce_scatter_block", MaxRanks: 8, MaxNodes: 1, MaxBytes: 8 << 10, Algorithm: "recursive_doubling"},
	{Collective: "reduce_scatter_block", MaxRanks: 8, MaxNodes: 1, Algorithm: "ring"},
	{Collective: "reduce_scatter_block", MaxRanks: 8, MaxNodes: 1, Algorithm: "pairwise"},

	{Collective: "allgather", MaxRanks: 8, MaxNodes: 1, MaxBytes: 8 << 10, PowerOfTwo: true, Algorithm: "recursive_doubling"},
	{Collective: "allgather", MaxRanks: 8, MaxNodes: 1, MaxBytes: 8 << 10, Algorithm: "bruck"},
	{Collective: "allgather", MaxRanks: 8, MaxNodes: 1, Algorithm: "ring"},
}
