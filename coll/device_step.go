package coll

import (
	"github.com/gocoll/gocoll/executor/device"
)

// deviceStep is a Request's call on the device executor, started by
// deviceStepper: Progress posts transfers, polls them (transport.Test)
// and the GPU's events (cuEventQuery) and queues kernels and copies, and
// never waits for a peer or the GPU; Finish runs it to the end as the
// blocking call does. Its errors are the blocking call's.
type deviceStep struct {
	c    *Comm
	x    *device.Executor
	dc   device.Call
	call string
	alg  string
}

// deviceStepper starts o on the device executor as a resumable call. c.mu
// is held and r is at the head of c's queue; its schedule is r.sched. The
// first device call of a communicator makes its executor here, with a
// blocking exchange among its ranks (deviceExecutor).
func (c *Comm) deviceStepper(r *Request, o *op, rt route) (stepper, error) {
	c.seq++ // as execute does before runDevice
	x, err := c.deviceExecutor(o.label())
	if err != nil {
		return nil, err
	}
	var g []gpuOp
	if o.hasG {
		g = []gpuOp{o.g}
	}
	// A persistent request's next start reuses its step.
	s, ok := r.st.(*deviceStep)
	if !ok {
		s = &deviceStep{}
	}
	*s = deviceStep{c: c, x: x, dc: c.deviceCall(r.sched, rt.pl, o.in, o.out, o.size, o.kernel, g), call: o.label(), alg: rt.alg.Name}
	if err := x.Start(&s.dc); err != nil {
		return nil, deviceError(c, o.label(), s.alg, err)
	}
	return s, nil
}

func (s *deviceStep) Progress() (done, moved bool, err error) {
	done, moved, err = s.x.Progress()
	if err != nil {
		err = deviceError(s.c, s.call, s.alg, err)
	}
	return done, moved, err
}

func (s *deviceStep) Finish() error {
	if err := s.x.Finish(); err != nil {
		return deviceError(s.c, s.call, s.alg, err)
	}
	return nil
}
