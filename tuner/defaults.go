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
	// CUDA memory on one node. Not measured yet (no GPU was lent while
	// they were written); the GPU bundle's tables (docs/cuda.md: the
	// time-npN-ALG runs compare the small-call algorithms) are what will
	// replace them.
	//
	// Up to 8 KiB, hoststaged: two copies and the shm engine, no wait on
	// the GPU for another process, which on a GPU shared time-sliced
	// (the lent machine's case) may cost a context switch each; the
	// copies' ~10 µs each are within the 30 µs target.
	{Collective: "allreduce", MaxRanks: 8, MaxNodes: 1, MaxBytes: 8 << 10, Algorithm: "hoststaged"},
	{Collective: "reduce_scatter", MaxRanks: 8, MaxNodes: 1, MaxBytes: 8 << 10, Algorithm: "hoststaged"},
	{Collective: "reduce_scatter_block", MaxRanks: 8, MaxNodes: 1, MaxBytes: 8 << 10, Algorithm: "hoststaged"},
	{Collective: "allgather", MaxRanks: 8, MaxNodes: 1, MaxBytes: 8 << 10, Algorithm: "hoststaged"},
	// Where the communicator has a device group (every rank mapping the
	// others'; their restriction sends every other call on): oneshot up
	// to 256 KiB, where a oneshot's p reads of n per rank start to cost
	// more than a twoshot's second synchronisation at 8 ranks by the
	// H200's bandwidth (3.9 TB/s) and a synchronisation's ~10 µs; twoshot
	// beyond, the least memory traffic there is.
	{Collective: "allreduce", MaxRanks: 8, MaxNodes: 1, MaxBytes: 256 << 10, Algorithm: "oneshot"},
	{Collective: "allreduce", MaxRanks: 8, MaxNodes: 1, Algorithm: "twoshot"},
	{Collective: "reduce_scatter", MaxRanks: 8, MaxNodes: 1, Algorithm: "twoshot"},
	{Collective: "reduce_scatter_block", MaxRanks: 8, MaxNodes: 1, Algorithm: "twoshot"},
	{Collective: "allgather", MaxRanks: 8, MaxNodes: 1, Algorithm: "twoshot"},
	// No group (GPUs that cannot reach each other, GOCOLL_CUDA_IPC=0, an
	// op without a GPU kernel): hoststaged up to 16 MiB, one copy each
	// way and the engine at memory speed, where the schedules' staging
	// crosses the host link once per round; beyond, the pinned images
	// (2n per rank) would cost more memory than a schedule's segments.
	{Collective: "allreduce", MaxRanks: 8, MaxNodes: 1, MaxBytes: 16 << 20, Algorithm: "hoststaged"},
	{Collective: "reduce_scatter", MaxRanks: 8, MaxNodes: 1, MaxBytes: 16 << 20, Algorithm: "hoststaged"},
	{Collective: "reduce_scatter_block", MaxRanks: 8, MaxNodes: 1, MaxBytes: 16 << 20, Algorithm: "hoststaged"},
	{Collective: "allgather", MaxRanks: 8, MaxNodes: 1, MaxBytes: 16 << 20, Algorithm: "hoststaged"},

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
