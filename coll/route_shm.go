package coll

import (
	"fmt"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/intranode"
	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/ops"
)

// shmRoute runs the call on the communicator's shared-memory segment
// with the shm engine's Go half (package intranode): the shm algorithms,
// which are not schedules. Host memory only (their restriction); the C
// entries run the small ones on the engine's C half without Go.
type shmRoute struct{}

func (shmRoute) start(c *Comm, cl call, pl plan) (stepper, error) {
	return c.startShm(cl.label(), cl.coll, cl.p, cl.in.bytes(), cl.out.bytes(), cl.size, cl.kernel, cl.builtin)
}

// startShm starts a collective on the engine; b names a predefined op
// and datatype (16-bit floats then accumulate in float32), else the
// kernel combines. The hierarchical route runs its intra-node phases
// with it too. c.mu is held, or c is only used by the caller. The
// engine's Progress never waits for a peer; its errors name peers by job
// rank, as the blocking call's do (sharedError).
func (c *Comm) startShm(name string, coll algorithms.Collective, p algorithms.Params, in, out []byte, size int, kernel ops.Kernel, b builtinOp) (stepper, error) {
	if c.shared == nil {
		return nil, &mpierr.Error{Call: name, Class: mpierr.Other, Msg: fmt.Sprintf("%s has no shared segment for the shm algorithm", c.name)}
	}
	r := sharedReduction(p, size, kernel, b)
	var call *intranode.Call
	switch coll {
	case algorithms.Allreduce:
		call = c.shared.StartAllreduce(in, out, r)
	case algorithms.ReduceScatter, algorithms.ReduceScatterBlock:
		call = c.shared.StartReduceScatter(in, out, p.Counts, r)
	case algorithms.Allgather:
		call = c.shared.StartAllgather(in, out, p.Counts, size)
	default:
		return nil, &mpierr.Error{Call: name, Class: mpierr.Other, Msg: fmt.Sprintf("no shm algorithm for %s", coll)}
	}
	return c.steps.step.begin(c, call, name, "shm", "", true), nil
}

// runShm runs a collective on the engine to the end.
func (c *Comm) runShm(name string, coll algorithms.Collective, p algorithms.Params, in, out []byte, size int, kernel ops.Kernel) error {
	s, err := c.startShm(name, coll, p, in, out, size, kernel, builtinOp{})
	if err != nil {
		return err
	}
	return s.Finish()
}

// sharedReduction is how the shm engine combines a call's elements: the
// kernel, or with a predefined op (b) its own Reduction; folded unless
// the call is reproducible. A collective without a kernel gets the zero
// one.
func sharedReduction(p algorithms.Params, size int, kernel ops.Kernel, b builtinOp) ops.Reduction {
	var r ops.Reduction
	if kernel != nil {
		r = ops.UserReduction(kernel, size)
		// The predefined op's own Reduction (16-bit floats in float32)
		// where an element is one of its datatype's: a contiguous derived
		// datatype's element (Args.Mult) is several, which the Reduction's
		// element size would miscount.
		if b.op.Valid() && b.typ.Size() == size {
			if wide, err := ops.ReductionOf(b.op, b.typ); err == nil {
				r = wide
			}
		}
	}
	if !p.Reproducible {
		r = r.Folded()
	}
	return r
}
