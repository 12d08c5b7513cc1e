package tuner

// Defaults are the built-in rules, tried after any tuning file. Within a
// collective the first match whose restrictions hold wins; each collective
// ends with an order-preserving rule that matches everything, so a
// non-commutative op always finds an algorithm.
//
// How these numbers were derived is in the README ("How the defaults were
// chosen"): measured on this project's reference machine, extended to large
// p with the model executor.
var Defaults = []Rule{
	// On one host, the shared-memory algorithms (they need a shared
	// segment; elsewhere their restriction sends the call on).
	{Collective: "allreduce", Algorithm: "shm"},
	{Collective: "reduce_scatter", Algorithm: "shm"},
	{Collective: "reduce_scatter_block", Algorithm: "shm"},
	{Collective: "allgather", Algorithm: "shm"},

	{Collective: "allreduce", MaxBytes: 8 << 10, Algorithm: "recursive_doubling"},
	{Collective: "allreduce", MinBytes: 1 << 20, Algorithm: "ring"},
	{Collective: "allreduce", Algorithm: "rabenseifner"},

	{Collective: "reduce_scatter", MaxBytes: 8 << 10, Algorithm: "recursive_halving"},
	{Collective: "reduce_scatter", MaxBytes: 8 << 10, Algorithm: "recursive_doubling"},
	{Collective: "reduce_scatter", Algorithm: "ring"},
	{Collective: "reduce_scatter", Algorithm: "pairwise"},

	{Collective: "reduce_scatter_block", MaxBytes: 8 << 10, Algorithm: "recursive_halving"},
	{Collective: "reduce_scatter_block", MaxBytes: 8 << 10, Algorithm: "recursive_doubling"},
	{Collective: "reduce_scatter_block", Algorithm: "ring"},
	{Collective: "reduce_scatter_block", Algorithm: "pairwise"},

	{Collective: "allgather", MaxBytes: 8 << 10, PowerOfTwo: true, Algorithm: "recursive_doubling"},
	{Collective: "allgather", MaxBytes: 8 << 10, Algorithm: "bruck"},
	{Collective: "allgather", Algorithm: "ring"},
}
