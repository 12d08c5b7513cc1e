package route

import (
	"errors"
	"fmt"

	"github.com/gocoll/gocoll/transport"
)

type router struct {
	rank, size int
	ts         []transport.Transport
	via        []int // the transport of each peer; -1 for this rank
}

// New returns a transport for rank of size that sends each op to the
// transport ts[pick(peer)]. pick is called once per peer, here. Every
// transport in ts must have this rank and size; New panics if one has
// not, or if pick names no transport in ts, since routing anyway would
// deliver messages to the wrong ranks.
func New(rank, size int, ts []transport.Transport, pick func(peer int) int) transport.Transport {
	for i, t := range ts {
		if t.Rank() != rank || t.Size() != size {
			panic(fmt.Sprintf("route: transport %d is rank %d of %d, want %d of %d", i, t.Rank(), t.Size(), rank, size))
		}
	}
	r := &router{rank: rank, size: size, ts: ts, via: make([]int, size)}
	for peer := range size {
		if peer == rank {
			r.via[peer] = -1
			continue
		}
		j := pick(peer)
		if j < 0 || j >= len(ts) {
			panic(fmt.Sprintf("route: pick(%d) = %d, want 0..%d", peer, j, len(ts)-1))
		}
		r.via[peer] = j
	}
	return r
}

func (r *router) Rank() int { return r.rank }
func (r *router) Size() int { return r.size }

// route returns the transport of an op, or -1 for an invalid peer.
func (r *router) route(op *transport.Op) int {
	if op.Peer < 0 || op.Peer >= r.size {
		return -1
	}
	return r.via[op.Peer]
}

// run returns the end of the run of ops that starts at i, and its
// transport (-1: the op at i alone, with an invalid peer).
func (r *router) run(ops []transport.Op, i int) (int, int) {
	j := r.route(&ops[i])
	if j < 0 {
		return i + 1, -1
	}
	k := i + 1
	for k < len(ops) && r.route(&ops[k]) == j {
		k++
	}
	return k, j
}

func (r *router) Start(ops []transport.Op) error {
	var first error
	for i := 0; i < len(ops); {
		k, j := r.run(ops, i)
		if j < 0 {
			op := &ops[i]
			op.Reset()
			op.Complete(0, transport.CheckPeer(op, r.rank, r.size))
		} else if err := r.ts[j].Start(ops[i:k]); err != nil && first == nil {
			first = err
		}
		i = k
	}
	return first
}

func (r *router) Wait(ops []transport.Op) error {
	var first error
	for i := 0; i < len(ops); {
		k, j := r.run(ops, i)
		if j >= 0 {
			if err := r.ts[j].Wait(ops[i:k]); err != nil && first == nil {
				first = err
			}
		}
		i = k
	}
	if err := transport.FirstError(ops); err != nil {
		return err
	}
	return first
}

func (r *router) Test(ops []transport.Op) (bool, error) {
	all := true
	for i := 0; i < len(ops); {
		k, j := r.run(ops, i)
		if j >= 0 {
			if done, _ := r.ts[j].Test(ops[i:k]); !done {
				all = false
			}
		}
		i = k
	}
	if !all {
		return false, nil
	}
	return true, transport.FirstError(ops)
}

func (r *router) Close() error {
	var errs []error
	for _, t := range r.ts {
		errs = append(errs, t.Close())
	}
	return errors.Join(errs...)
}
