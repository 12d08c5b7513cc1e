package mpi

import (
	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/mpierr"
)

// Option changes one call.
type Option func(*coll.Args)

// WithAlgorithm forces the named algorithm for this call, as the
// GOCOLL_<COLLECTIVE>_ALGORITHM variables do for all calls. If it cannot run
// the call (a non-commutative op for ring, say), the tuner's choice runs
// instead, as GOCOLL_FALLBACK says.
func WithAlgorithm(name string) Option { return func(a *coll.Args) { a.Algorithm = name } }

// Reproducible makes a floating-point sum or product (or a commutative
// user-defined op) return the canonical association of the ranks'
// contributions, bit for bit, whatever the algorithm, the count, the
// transport or the node map, as GOCOLL_REPRODUCIBLE=1 does for every
// call: ranks in adjacent pairs, then pairs of pairs, an odd one passing
// up unchanged; float16 and bfloat16 summed in float32 and rounded once.
// Every rank must pass it to the call, as with WithAlgorithm.
func Reproducible() Option { return func(a *coll.Args) { a.Reproducible = true } }

// Displs places Allgatherv's blocks: rank r's counts[r] elements start at
// recv[displs[r]], as MPI_Allgatherv's displs do; recv must reach the end
// of every block. Without it the blocks are packed in rank order. It
// means nothing to other calls.
func Displs(displs []int) Option { return func(a *coll.Args) { a.Displs = displs } }

func args[T Elem](call string, send, recv []T, op *Op, opts []Option) (coll.Args, error) {
	a := coll.Args{Send: asBytes(send), Recv: asBytes(recv), Type: typeOf[T]()}
	if op != nil {
		if op.op.Builtin == 0 && op.elem != a.Type {
			return a, mpierr.New(call, mpierr.Op, "user op made for %v used on %v", op.elem, a.Type)
		}
		a.Op = op.op
	}
	for _, o := range opts {
		o(&a)
	}
	return a, nil
}

// Allreduce combines send from every rank with op and stores the result,
// len(send) elements, in recv on every rank. recv must not overlap send.
func Allreduce[T Elem](c *Comm, send, recv []T, op Op, opts ...Option) error {
	a, err := allreduceArgs(c, send, recv, op, opts)
	if err != nil {
		return err
	}
	return c.c.Allreduce(a)
}

func allreduceArgs[T Elem](c *Comm, send, recv []T, op Op, opts []Option) (coll.Args, error) {
	a, err := args("MPI_Allreduce", send, recv, &op, opts)
	if err != nil {
		return a, c.reject("MPI_Allreduce", err)
	}
	if len(recv) < len(send) {
		return a, c.reject("MPI_Allreduce", mpierr.New("MPI_Allreduce", mpierr.Buffer, "recv holds %d elements, send %d", len(recv), len(send)))
	}
	a.Count = len(send)
	return a, nil
}

// AllreduceInPlace is Allreduce with buf as both input and output
// (MPI_IN_PLACE).
func AllreduceInPlace[T Elem](c *Comm, buf []T, op Op, opts ...Option) error {
	a, err := args("MPI_Allreduce", nil, buf, &op, opts)
	if err != nil {
		return c.reject("MPI_Allreduce", err)
	}
	a.InPlace, a.Count = true, len(buf)
	return c.c.Allreduce(a)
}

// ReduceScatterBlock combines send (Size() blocks of len(recv) elements)
// from every rank with op and stores block r of the result in recv on
// rank r.
func ReduceScatterBlock[T Elem](c *Comm, send, recv []T, op Op, opts ...Option) error {
	a, err := reduceScatterBlockArgs(c, "MPI_Reduce_scatter_block", send, recv, op, opts)
	if err != nil {
		return err
	}
	return c.c.ReduceScatterBlock(a)
}

func reduceScatterBlockArgs[T Elem](c *Comm, call string, send, recv []T, op Op, opts []Option) (coll.Args, error) {
	a, err := args(call, send, recv, &op, opts)
	if err != nil {
		return a, c.reject(call, err)
	}
	if len(send) != len(recv)*c.Size() {
		return a, c.reject(call, mpierr.New(call, mpierr.Count, "send holds %d elements, want len(recv)*Size() = %d", len(send), len(recv)*c.Size()))
	}
	a.Count = len(recv)
	return a, nil
}

// ReduceScatterBlockInPlace is ReduceScatterBlock with buf as the input; the
// result lands in buf[:len(buf)/Size()].
func ReduceScatterBlockInPlace[T Elem](c *Comm, buf []T, op Op, opts ...Option) error {
	a, err := args("MPI_Reduce_scatter_block", nil, buf, &op, opts)
	if err != nil {
		return c.reject("MPI_Reduce_scatter_block", err)
	}
	if len(buf)%c.Size() != 0 {
		return c.reject("MPI_Reduce_scatter_block", mpierr.New("MPI_Reduce_scatter_block", mpierr.Count, "buf holds %d elements, not a multiple of Size() = %d", len(buf), c.Size()))
	}
	a.InPlace, a.Count = true, len(buf)/c.Size()
	return c.c.ReduceScatterBlock(a)
}

// ReduceScatter combines send (sum(recvcounts) elements) from every rank
// with op and stores block r, of recvcounts[r] elements, in recv on rank r.
func ReduceScatter[T Elem](c *Comm, send, recv []T, recvcounts []int, op Op, opts ...Option) error {
	a, err := reduceScatterArgs(c, "MPI_Reduce_scatter", send, recv, recvcounts, op, opts)
	if err != nil {
		return err
	}
	return c.c.ReduceScatter(a)
}

func reduceScatterArgs[T Elem](c *Comm, call string, send, recv []T, recvcounts []int, op Op, opts []Option) (coll.Args, error) {
	a, err := args(call, send, recv, &op, opts)
	if err != nil {
		return a, c.reject(call, err)
	}
	a.Counts = recvcounts
	return a, nil
}

// ReduceScatterInPlace is ReduceScatter with buf as the input; the result
// lands in buf[:recvcounts[Rank()]].
func ReduceScatterInPlace[T Elem](c *Comm, buf []T, recvcounts []int, op Op, opts ...Option) error {
	a, err := args("MPI_Reduce_scatter", nil, buf, &op, opts)
	if err != nil {
		return c.reject("MPI_Reduce_scatter", err)
	}
	a.InPlace, a.Counts = true, recvcounts
	return c.c.ReduceScatter(a)
}

// Allgather gathers send from every rank into recv, rank by rank: recv
// must hold len(send)*Size() elements.
func Allgather[T Elem](c *Comm, send, recv []T, opts ...Option) error {
	a, err := allgatherArgs(c, send, recv, opts)
	if err != nil {
		return err
	}
	return c.c.Allgather(a)
}

func allgatherArgs[T Elem](c *Comm, send, recv []T, opts []Option) (coll.Args, error) {
	a, err := args[T]("MPI_Allgather", send, recv, nil, opts)
	if err != nil {
		return a, c.reject("MPI_Allgather", err)
	}
	if len(recv) != len(send)*c.Size() {
		return a, c.reject("MPI_Allgather", mpierr.New("MPI_Allgather", mpierr.Count, "recv holds %d elements, want len(send)*Size() = %d", len(recv), len(send)*c.Size()))
	}
	a.Count = len(send)
	return a, nil
}

// AllgatherInPlace is Allgather where each rank's contribution already sits
// at buf[Rank()*n:(Rank()+1)*n], n = len(buf)/Size().
func AllgatherInPlace[T Elem](c *Comm, buf []T, opts ...Option) error {
	a, err := args[T]("MPI_Allgather", nil, buf, nil, opts)
	if err != nil {
		return c.reject("MPI_Allgather", err)
	}
	if len(buf)%c.Size() != 0 {
		return c.reject("MPI_Allgather", mpierr.New("MPI_Allgather", mpierr.Count, "buf holds %d elements, not a multiple of Size() = %d", len(buf), c.Size()))
	}
	a.InPlace, a.Count = true, len(buf)/c.Size()
	return c.c.Allgather(a)
}

// Allgatherv gathers send from every rank into recv, rank after rank: rank
// r contributes counts[r] elements, and recv must hold their sum; with
// Displs(d), rank r's block starts at recv[d[r]] instead.
func Allgatherv[T Elem](c *Comm, send, recv []T, counts []int, opts ...Option) error {
	a, err := args[T]("MPI_Allgatherv", send, recv, nil, opts)
	if err != nil {
		return c.reject("MPI_Allgatherv", err)
	}
	a.Counts = counts
	return c.c.Allgatherv(a)
}

// AllgathervInPlace is Allgatherv with MPI_IN_PLACE: this rank's block is
// already in buf, where counts (and Displs) place it.
func AllgathervInPlace[T Elem](c *Comm, buf []T, counts []int, opts ...Option) error {
	a, err := args[T]("MPI_Allgatherv", nil, buf, nil, opts)
	if err != nil {
		return c.reject("MPI_Allgatherv", err)
	}
	a.InPlace, a.Counts = true, counts
	return c.c.Allgatherv(a)
}

// Bcast copies buf on rank root to buf on every rank.
func Bcast[T Elem](c *Comm, buf []T, root int) error {
	a, err := args[T]("MPI_Bcast", nil, buf, nil, nil)
	if err != nil {
		return c.reject("MPI_Bcast", err)
	}
	a.Count, a.Root = len(buf), root
	return c.c.Bcast(a)
}

// reject returns err, an argument error found before the call reached
// coll, after telling the other ranks of it when GOCOLL_CHECK is on (see
// coll.Comm.Rejected).
func (c *Comm) reject(call string, err error) error {
	c.c.Rejected(call)
	return err
}
