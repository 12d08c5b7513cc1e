package algorithms

// The shm algorithms are not schedules: when every rank of a communicator
// shares a host, package intranode runs the collective on a segment all
// of them map. Each rank copies its data into its slot and raises a flag;
// each rank then reads what it needs from every slot directly. A step
// costs one flag exchange instead of a message per peer, and data is
// copied into shared memory once instead of through a transport.
//
//	Allreduce: up to a slot (128 KiB), every rank reduces every slot (one
//	  step); beyond, chunks: every rank reduces one slice
//	  of the chunk into a shared result, which all then copy out (two
//	  steps per chunk).
//	Reduce_scatter(_block): every rank reduces its own block from all
//	  slots, a piece of every block per step.
//	Allgather(v): every rank copies every slot out, a piece per step;
//	  from 32 KiB a block (1 MiB with more ranks than cores), every rank
//	  reads every peer's block from the peer's buffer with
//	  process_vm_readv instead (one copy, two steps), where the kernel
//	  allows it.
//
//	Whoever reduces an element reads all p contributions and combines
//	them in the canonical association T(0, p) (ops.Reduction, and the
//	engine's C half alike), 16-bit floats in float32 rounded once: every
//	count, chunk and path, so the shm algorithms run in reproducible mode.
//
//	restrictions: all ranks on one host; any op (reductions keep rank
//	              order), any counts
//	cost:         one synchronisation per step; memory traffic about 4n
//	              per rank, mostly cache-resident for chunked messages
//	memory:       the segment: 2(p+1) slots
var (
	allreduceShm = &Algorithm{Name: "shm", Collective: Allreduce, Direct: true, Canonical: always,
		Summary: "shared segment: copy in, reduce from every rank's slot, copy out",
		Cost:    "1 sync per 128 KiB step; ~4n bytes moved per rank"}
	reduceScatterShm = &Algorithm{Name: "shm", Collective: ReduceScatter, Direct: true, Canonical: always,
		Summary: "shared segment: copy in, reduce own block from every rank's slot",
		Cost:    "1 sync per step; ~3n bytes moved per rank"}
	allgatherShm = &Algorithm{Name: "shm", Collective: Allgather, Direct: true,
		Summary: "shared segment: copy own block in, every block out; large blocks read from peers' buffers (CMA)",
		Cost:    "1 sync per step; ~(1+p)n/p bytes moved per rank, n by CMA from 32 KiB a block"}
)

// always: the engine's reductions are T(0, p) on every call
// (intranode/engine's TestCanonical proves both halves against
// ops.CanonicalReduce).
func always(Params) bool { return true }

func init() {
	register(allreduceShm, reduceScatterShm, blockVariant(reduceScatterShm), allgatherShm)
}
