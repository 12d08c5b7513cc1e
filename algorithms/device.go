package algorithms

// The device algorithms are not schedules: on CUDA memory of one node,
// where every rank maps the others' memory (CUDA IPC, or one process),
// the communicator's device group (executor/device.Group) runs them
// straight on the ranks' buffers, with one kernel per rank and the
// ranks synchronised by flags in mapped memory, not by messages.
//
//	oneshot (allreduce): each rank copies its input into its slot of
//	  the group's region; one kernel per rank reads every rank's slot
//	  and reduces them. The smallest latency: one copy, one
//	  synchronisation, one launch. Up to the slot size
//	  (GOCOLL_CUDA_SLOT); a larger call runs as twoshot.
//	twoshot: rank r reduces slice r of every rank's input and writes it
//	  into every rank's output (reduce-scatter, then allgather, through
//	  the peers' memory): 2n bytes of memory traffic per rank, the
//	  least there is. Reduce_scatter(_block) is its first half (block
//	  r of every input into rank r's output), allgather its second
//	  (rank r's block into every output). Buffers without an IPC handle
//	  go through the slots in chunks (allreduce) or as a schedule.
//
//	Every element is T(0, p) (canonical.go) bit for bit, 16-bit floats
//	in float32 rounded once: the peer kernels (gpu.PeerKernel) run in
//	reproducible mode.
//
//	restrictions: a device group (CUDA memory on one node, every rank
//	              mapping the others'); a reduction needs a GPU kernel
//	              of its op and type (MPI_SUM, MPI_PROD, MPI_MAX,
//	              MPI_MIN on the float and integer types gpu.ElemOf
//	              knows)
//	cost:         oneshot: 1 copy of n, 1 synchronisation, p reads of n;
//	              twoshot: 2 synchronisations, 2n bytes per rank
var (
	allreduceOneshot = &Algorithm{Name: "oneshot", Collective: Allreduce, Device: true, Canonical: always,
		Summary: "device group: copy into my slot, one kernel reduces every rank's slot",
		Cost:    "1 sync; p reads of n per rank; up to GOCOLL_CUDA_SLOT bytes"}
	allreduceTwoshot = &Algorithm{Name: "twoshot", Collective: Allreduce, Device: true, Canonical: always,
		Summary: "device group: reduce my slice of every input, write it into every output",
		Cost:    "2 syncs; 2n bytes per rank"}
	reduceScatterTwoshot = &Algorithm{Name: "twoshot", Collective: ReduceScatter, Device: true, Canonical: always,
		Summary: "device group: reduce my block of every rank's input into my output",
		Cost:    "2 syncs; n bytes read per rank"}
	allgatherTwoshot = &Algorithm{Name: "twoshot", Collective: Allgather, Device: true,
		Summary: "device group: copy my block into every rank's output",
		Cost:    "2 syncs; p copies of the block per rank"}
)

// hoststaged runs a call on CUDA memory through pinned host memory:
// each rank copies its input down, the ranks run the shm algorithm on
// the host copies, each copies its result up (executor/device.Stage).
// Two copies and the engine's synchronisation on the CPU: no exchange
// through the GPU, so nothing waits on the GPU for another process (on a
// GPU that processes share time-sliced, such a wait costs a context
// switch), and any op and type (user-defined ops too: the engine runs
// them). For the smallest calls; the data crosses PCIe or C2C twice.
//
//	restrictions: CUDA device memory, every rank on one host (a shared
//	              segment)
//	cost:         2 copies of n between the GPU and the host; the shm
//	              algorithm's
var (
	allreduceHoststaged = &Algorithm{Name: "hoststaged", Collective: Allreduce, HostStaged: true, Canonical: always,
		Summary: "CUDA memory through the host: copy down, the shm algorithm, copy up",
		Cost:    "2 copies of n over the host link; the shm algorithm's syncs"}
	reduceScatterHoststaged = &Algorithm{Name: "hoststaged", Collective: ReduceScatter, HostStaged: true, Canonical: always,
		Summary: allreduceHoststaged.Summary, Cost: "copies of n down and n/p up; the shm algorithm's syncs"}
	allgatherHoststaged = &Algorithm{Name: "hoststaged", Collective: Allgather, HostStaged: true,
		Summary: allreduceHoststaged.Summary, Cost: "copies of n/p down and n up; the shm algorithm's syncs"}
)

func init() {
	register(allreduceOneshot, allreduceTwoshot, reduceScatterTwoshot, blockVariant(reduceScatterTwoshot), allgatherTwoshot,
		allreduceHoststaged, reduceScatterHoststaged, blockVariant(reduceScatterHoststaged), allgatherHoststaged)
}
