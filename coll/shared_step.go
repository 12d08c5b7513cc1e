package coll

import (
	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/intranode"
)

// sharedStepper starts o on the shm engine as a resumable call, an
// intranode.Call that Progress steps without waiting for a peer; nil
// (a collective the engine has no call for): it runs as one piece.
func (c *Comm) sharedStepper(r *Request, o *op, rt route) (stepper, error) {
	if c.shared == nil {
		return nil, nil
	}
	var g []gpuOp
	if o.hasG {
		g = []gpuOp{o.g}
	}
	red := sharedReduction(o.p, o.size, o.kernel, g...)
	var call *intranode.Call
	switch o.coll {
	case algorithms.Allreduce:
		call = c.shared.StartAllreduce(o.in, o.out, red)
	case algorithms.ReduceScatter, algorithms.ReduceScatterBlock:
		call = c.shared.StartReduceScatter(o.in, o.out, o.p.Counts, red)
	case algorithms.Allgather:
		call = c.shared.StartAllgather(o.in, o.out, o.p.Counts, o.size)
	default:
		return nil, nil
	}
	if s, ok := r.st.(*sharedStep); ok { // a persistent request's, from its last start
		s.call = call
		return s, nil
	}
	return &sharedStep{c: c, call: call}, nil
}

// sharedStep is a Request's call on the shm engine. Its errors name
// peers by job rank, as the blocking call's do (sharedPeer); Request
// wraps them with the call, as sharedError does the blocking call's.
type sharedStep struct {
	c    *Comm
	call *intranode.Call
}

func (s *sharedStep) Progress() (done, moved bool, err error) {
	done, moved, err = s.call.Progress()
	return done, moved, s.c.sharedPeer(err)
}

func (s *sharedStep) Finish() error { return s.c.sharedPeer(s.call.Finish()) }
