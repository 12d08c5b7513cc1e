package mpi

import "github.com/gocoll/gocoll/coll"

// A Request is a collective that runs while the program goes on: made
// by Iallreduce, IreduceScatter, IreduceScatterBlock or Iallgather
// (started at once), or by AllreduceInit, ReduceScatterInit,
// ReduceScatterBlockInit or AllgatherInit (persistent: started by Start,
// as often as wanted). The
// buffers belong to the collective until Wait returns or Test reports it
// done. Requests on one communicator run in the order they were started,
// and before any later blocking call on it. They move on inside every
// gocoll call (Test, Wait, other collectives) and, with
// GOCOLL_PROGRESS_THREAD=1, on a goroutine of their own.
type Request struct{ r *coll.Request }

// Wait returns once the collective is done, with its error.
func (r *Request) Wait() error { return r.r.Wait() }

// Test moves requests on and reports whether this one is done (with its
// error once it is). A done request is inactive: Test and Wait return at
// once, and a persistent one can be started again.
func (r *Request) Test() (bool, error) { return r.r.Test() }

// Start starts a persistent request again; it must not be active.
func (r *Request) Start() error { return r.r.Start() }

func request(r *coll.Request, err error) (*Request, error) {
	if err != nil {
		return nil, err
	}
	return &Request{r}, nil
}

// Iallreduce starts Allreduce and returns its request.
func Iallreduce[T Elem](c *Comm, send, recv []T, op Op, opts ...Option) (*Request, error) {
	a, err := allreduceArgs(c, send, recv, op, opts)
	if err != nil {
		return nil, err
	}
	return request(c.c.Iallreduce(a))
}

// AllreduceInit prepares Allreduce of send into recv once, for Start to
// run many times (the data in send may change between starts).
func AllreduceInit[T Elem](c *Comm, send, recv []T, op Op, opts ...Option) (*Request, error) {
	a, err := allreduceArgs(c, send, recv, op, opts)
	if err != nil {
		return nil, err
	}
	return request(c.c.AllreduceInit(a))
}

// Iallgather starts Allgather and returns its request.
func Iallgather[T Elem](c *Comm, send, recv []T, opts ...Option) (*Request, error) {
	a, err := allgatherArgs(c, send, recv, opts)
	if err != nil {
		return nil, err
	}
	return request(c.c.Iallgather(a))
}

// AllgatherInit prepares Allgather once, for Start.
func AllgatherInit[T Elem](c *Comm, send, recv []T, opts ...Option) (*Request, error) {
	a, err := allgatherArgs(c, send, recv, opts)
	if err != nil {
		return nil, err
	}
	return request(c.c.AllgatherInit(a))
}

// IreduceScatterBlock starts ReduceScatterBlock and returns its request.
func IreduceScatterBlock[T Elem](c *Comm, send, recv []T, op Op, opts ...Option) (*Request, error) {
	a, err := reduceScatterBlockArgs(c, "MPI_Ireduce_scatter_block", send, recv, op, opts)
	if err != nil {
		return nil, err
	}
	return request(c.c.IreduceScatterBlock(a))
}

// ReduceScatterBlockInit prepares ReduceScatterBlock once, for Start.
func ReduceScatterBlockInit[T Elem](c *Comm, send, recv []T, op Op, opts ...Option) (*Request, error) {
	a, err := reduceScatterBlockArgs(c, "MPI_Reduce_scatter_block_init", send, recv, op, opts)
	if err != nil {
		return nil, err
	}
	return request(c.c.ReduceScatterBlockInit(a))
}

// IreduceScatter starts ReduceScatter and returns its request.
func IreduceScatter[T Elem](c *Comm, send, recv []T, recvcounts []int, op Op, opts ...Option) (*Request, error) {
	a, err := reduceScatterArgs(c, "MPI_Ireduce_scatter", send, recv, recvcounts, op, opts)
	if err != nil {
		return nil, err
	}
	return request(c.c.IreduceScatter(a))
}

// ReduceScatterInit prepares ReduceScatter once, for Start.
func ReduceScatterInit[T Elem](c *Comm, send, recv []T, recvcounts []int, op Op, opts ...Option) (*Request, error) {
	a, err := reduceScatterArgs(c, "MPI_Reduce_scatter_init", send, recv, recvcounts, op, opts)
	if err != nil {
		return nil, err
	}
	return request(c.c.ReduceScatterInit(a))
}
