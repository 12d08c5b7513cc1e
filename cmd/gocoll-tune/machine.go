package main

import (
	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/model"
	"github.com/gocoll/gocoll/mpi"
	"github.com/gocoll/gocoll/tuner/fit"
)

// The machine of the model is fitted by package tuner/fit, the same
// measurement and fitting math as the in-job fit's, with gocoll-tune's
// options (fit.Tool: 4 B to 4 MiB, -reps timed exchanges each, no time
// bound) over package mpi: mpiComm is a fit.Comm on an mpi.Comm.

// measureMachine fits the machine on c's ranks. Collective over c; every
// rank returns the same Result.
func measureMachine(c *mpi.Comm, reps int) (fit.Result, error) {
	node, err := c.SplitShared(0)
	if err != nil {
		return fit.Result{}, err
	}
	defer node.Free()
	nodes, err := nodesOf(c, node)
	if err != nil {
		return fit.Result{}, err
	}
	return fit.Measure(&mpiComm{c: c, node: node, nodes: nodes}, fit.Tool(reps, model.Default))
}

// nodesOf returns c's node map as MPI programs learn it, from node, the
// communicator of this rank's node (SplitShared): each rank's node is
// named by the lowest rank of c on it.
func nodesOf(c, node *mpi.Comm) (*algorithms.NodeMap, error) {
	first := []int32{int32(c.Rank())}
	if err := mpi.Bcast(node, first, 0); err != nil { // rank 0 of node: the lowest of c's ranks there
		return nil, err
	}
	all := make([]int32, c.Size())
	if err := mpi.Allgather(c, first, all); err != nil {
		return nil, err
	}
	ids := make([]int, len(all))
	for r, f := range all {
		ids[r] = int(f)
	}
	return algorithms.NodeMapOf(ids), nil
}

// mpiComm is a fit.Comm over package mpi: a pair's link is a
// communicator of its two ranks (Split), on which an exchange is a ring
// allgather (one round: n bytes each way).
type mpiComm struct {
	c, node *mpi.Comm
	nodes   *algorithms.NodeMap
}

func (m *mpiComm) Rank() int                  { return m.c.Rank() }
func (m *mpiComm) Nodes() *algorithms.NodeMap { return m.nodes }

func (m *mpiComm) Bcast(vals []float64, root int) error { return mpi.Bcast(m.c, vals, root) }

func (m *mpiComm) Link(pair [2]int) (fit.Link, error) {
	in := m.c.Rank() == pair[0] || m.c.Rank() == pair[1]
	sub, err := m.c.Split(map[bool]int{true: 0, false: -1}[in], m.c.Rank())
	if err != nil || sub == nil {
		return nil, err
	}
	return &pairLink{c: sub}, nil
}

// pairLink is one end of a pair's communicator.
type pairLink struct {
	c   *mpi.Comm
	buf []byte
}

func (l *pairLink) Exchange(send, recv []byte) error {
	n := len(send)
	if cap(l.buf) < 2*n {
		l.buf = make([]byte, 2*n)
	}
	all := l.buf[:2*n]
	if err := mpi.Allgather(l.c, send, all, mpi.WithAlgorithm("ring")); err != nil {
		return err
	}
	copy(recv, all[(1-l.c.Rank())*n:])
	return nil
}

func (l *pairLink) Close() error {
	l.c.Free()
	return nil
}

// SyncStep times an 8-byte shm allreduce (one step of the shm engine) on
// node 0's ranks while the others wait, and gives every rank the time.
func (m *mpiComm) SyncStep(reps int) (float64, error) {
	t := []float64{0}
	var failed error
	if m.nodes.Node(m.c.Rank()) == 0 {
		send, recv := make([]float32, 2), make([]float32, 2)
		t[0], failed = Time(m.node, reps, func() error {
			return mpi.Allreduce(m.node, send, recv, mpi.Sum, mpi.WithAlgorithm("shm"))
		})
		if failed != nil {
			t[0] = -1
		}
	}
	if err := mpi.Bcast(m.c, t, 0); err != nil {
		return 0, err
	}
	if failed != nil {
		return 0, failed
	}
	if t[0] < 0 {
		return 0, errShmStep
	}
	return t[0], nil
}
