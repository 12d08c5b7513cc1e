package coll

import (
	"fmt"

	"github.com/gocoll/gocoll/executor/device"
	"github.com/gocoll/gocoll/executor/host"
	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/internal/linuxsys"
	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/transport"
)

// deviceRoute runs the plan's schedule (never an shm algorithm: their
// restriction says host memory only) on the device executor, for calls
// with a buffer in CUDA memory. The communicator's first device call
// makes the executor, with an exchange among its ranks (deviceExecutor).
type deviceRoute struct{}

func (deviceRoute) start(c *Comm, cl call, pl plan) (stepper, error) {
	name := cl.label()
	if pl.sched == nil {
		return nil, &mpierr.Error{Call: name, Class: mpierr.Other, Msg: fmt.Sprintf("algorithm %s is not a schedule and cannot run on device memory", pl.alg.Name)}
	}
	c.seq++
	x, err := c.deviceExecutor(name)
	if err != nil {
		return nil, err
	}
	s := &c.steps
	s.dc = device.Call{
		Sched: pl.sched, ElemSize: cl.size, Reduce: host.Kernel(cl.kernel),
		In: cl.in.gpu(), Out: cl.out.gpu(),
		T: c.t, Ranks: c.ranks, Tag: transport.Tag{Context: c.ctx, Seq: c.seq},
	}
	if cl.kernel != nil {
		// The GPU kernel of a predefined op and type; none: the host's.
		if s.dc.Kernel = gpu.Kernel(cl.builtin.op, cl.builtin.typ); s.dc.Kernel != "" {
			s.dc.Elem = gpu.ElemOf(cl.builtin.typ)
		}
	}
	// Progress posts transfers, polls them (transport.Test) and the GPU's
	// events (cuEventQuery) and queues kernels and copies; it never waits
	// for a peer or the GPU.
	st := s.step.begin(c, x, name, pl.alg.Name, " on device memory", false)
	if err := x.Start(&s.dc); err != nil {
		return nil, st.wrap(err)
	}
	return st, nil
}

// deviceExecutor returns the communicator's device executor, made at its
// first device call together with the exchange that tells each rank how
// it reaches the others' GPU memory (CUDA IPC on one node). Collective:
// every rank passes device memory to the same call. c.mu is held.
func (c *Comm) deviceExecutor(name string) (*device.Executor, error) {
	if c.device.exec != nil {
		return c.device.exec, nil
	}
	rt := c.cuda()
	buf, err := c.gatherRecords(name, "CUDA set-up", device.Record(rt, !c.cfg.Device.NoIPC), device.RecordLen)
	if err != nil {
		return nil, err
	}
	records := make([][]byte, c.Size())
	for q := range records {
		records[q] = buf[q*device.RecordLen : (q+1)*device.RecordLen]
	}
	peers, err := device.Peers(records, c.rank)
	if err != nil {
		return nil, &mpierr.Error{Call: name, Class: mpierr.Other, Msg: err.Error()}
	}
	c.seq++ // the call's own messages
	opts := c.cfg.Device.Options
	if opts.Log == nil && c.cfg.Debug != nil {
		opts.Log = c.cfg.Debug // GOCOLL_DEBUG=info: mappings that failed, retried
	}
	opts.Crowded = opts.Crowded || c.ranksOnNode() >= linuxsys.NodeCPUs() // the node's CPUs, not this rank's binding
	c.device.exec = device.New(rt, opts, peers)
	if c.cfg.Debug != nil {
		fmt.Fprintf(c.cfg.Debug, "gocoll: rank %d: %s: device memory: peers %v\n", c.rank, c.name, peers)
	}
	return c.device.exec, nil
}

// ranksOnNode is how many of the communicator's ranks share this rank's
// node (all of them where the node map is unknown).
func (c *Comm) ranksOnNode() int {
	if c.nodes == nil {
		return c.Size()
	}
	return c.nodes.Size(c.nodes.Node(c.rank))
}
