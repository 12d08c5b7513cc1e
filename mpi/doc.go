// Package mpi is gocoll's Go API: MPI's collectives for Go programs.
//
// A job's ranks reach each other through a Comm. Init returns the world
// communicator of a program started by gocollrun, MPICH's mpiexec (PMI-1
// or PMI-2), Slurm's srun (PMI-2 or PMIx) or Open MPI's mpirun (PMIx), or
// of a single rank where there is no launcher; RunLocal runs n ranks as
// goroutines of one process, which is the quickest way to try things:
//
//	err := mpi.RunLocal(4, func(c *mpi.Comm) error {
//		x := []float64{float64(c.Rank())}
//		sum := make([]float64, 1)
//		return mpi.Allreduce(c, x, sum, mpi.Sum) // sum[0] == 6 on every rank
//	})
//
// The collectives are generic over the element types of Elem: Allreduce,
// ReduceScatter, ReduceScatterBlock, Allgather and Allgatherv, each with an
// InPlace form (MPI_IN_PLACE), and Bcast. Reductions take a predefined Op
// (Sum, Max, Band, Maxloc, ...) or one made with NewOp; non-commutative
// user ops are combined in rank order. The nonblocking forms (Iallreduce,
// ...) and the persistent ones (AllreduceInit, ...) return a Request to
// Wait for or Test; the ...Device forms (AllreduceDevice, ...) take CUDA
// device memory (DevicePtr). Counters says how many calls of each
// collective this process made.
//
// Dup, Split and SplitShared make communicators from one; SplitShared
// gives the ranks of this rank's node (as MPI_Comm_split_type with
// MPI_COMM_TYPE_SHARED), whose collectives can use shared memory even when
// the parent spans several nodes. Every communicator knows which of its
// ranks share a node, learned from the job at Init.
//
// Every call picks its algorithm with gocoll's tuner. WithAlgorithm forces
// one for a call, Reproducible asks for the canonical sum whatever the
// algorithm (docs/reproducible.md); the GOCOLL_<COLLECTIVE>_ALGORITHM
// environment variables force one for all calls of a collective (see
// docs/tuning.md for the list).
//
// Errors are *Error values naming the MPI call and the argument at fault,
// with the MPI error class.
package mpi
