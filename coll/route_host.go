package coll

import (
	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/host"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/schedule"
	"github.com/gocoll/gocoll/transport"
)

// hostRoute runs the plan's schedule on host memory with the host
// executor, over the communicator's transport: every algorithm that is a
// schedule, on any node map.
type hostRoute struct{}

func (hostRoute) start(c *Comm, cl call, pl plan) (stepper, error) {
	s := &c.steps
	c.seq++
	s.hc = c.hostCall(pl.sched, cl.in.bytes(), cl.out.bytes(), c.scratchBytes(pl.sched.ScratchLen*cl.size), cl.size, cl.kernel)
	s.host.Start(&s.hc)
	// Progress never waits for a peer.
	return s.step.begin(c, &s.host, cl.label(), pl.alg.Name, "", false), nil
}

// hostCall describes a call of schedule s to the host executor, with the
// call's tag; c.mu is held and c.seq already advanced.
func (c *Comm) hostCall(s *schedule.Schedule, in, out, scratch []byte, size int, kernel ops.Kernel) host.Call {
	return host.Call{
		Sched: s, In: in, Out: out, Scratch: scratch, ElemSize: size, Reduce: host.Kernel(kernel),
		T: c.t, Ranks: c.ranks, Tag: transport.Tag{Context: c.ctx, Seq: c.seq},
	}
}

// scratchBytes returns n bytes of the communicator's scratch memory
// (grown as needed, kept between calls); c.mu is held.
func (c *Comm) scratchBytes(n int) []byte {
	if cap(c.steps.scratch) < n {
		c.steps.scratch = make([]byte, n)
	}
	return c.steps.scratch[:n]
}

// gatherRecords gathers every rank's record of n bytes (mine) with
// Bruck's allgather straight on the host executor, which needs nothing
// that might itself mismatch or be set up yet: gocoll's own exchanges
// (the GOCOLL_CHECK agreement, the device set-up). The result holds rank
// q's record at q*n. c.mu is held; what names the exchange in errors.
func (c *Comm) gatherRecords(name, what string, mine []byte, n int) ([]byte, error) {
	p := c.Size()
	buf := make([]byte, n*p)
	copy(buf[c.rank*n:], mine)
	bruck, _ := algorithms.Lookup(algorithms.Allgather, "bruck")
	params := algorithms.Params{P: p, Rank: c.rank, Counts: c.uniform(n), Commutative: true, InPlace: true}
	c.seq++
	sched, s := bruck.Build(params), &c.steps
	s.hc = c.hostCall(sched, buf[c.rank*n:(c.rank+1)*n], buf, c.scratchBytes(sched.ScratchLen), 1, nil)
	if err := s.host.Run(&s.hc); err != nil {
		return nil, c.runError(name, "bruck ("+what+")", err)
	}
	return buf, nil
}
