package coll

import (
	"errors"
	"fmt"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/coll/counters"
	"github.com/gocoll/gocoll/executor/device"
	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/tuner"
)

// peerRoute runs the device algorithms (oneshot, twoshot) on the
// communicator's device group: CUDA memory of one node, each rank's
// kernel reading and writing the others' memory (executor/device.Group).
// A call whose buffers the kernels cannot use directly (ErrNotDirect:
// not shareable or misaligned; every rank alike) runs as the tuner's
// choice without the group instead (deviceFallback), and counts as a
// device fallback.
type peerRoute struct{}

func (peerRoute) start(c *Comm, cl call, pl plan) (stepper, error) {
	g, name := c.device.group, cl.label()
	s := &c.steps
	s.gc = device.GroupCall{In: cl.in.gpu(), Out: cl.out.gpu(), InPlace: cl.p.InPlace, ElemSize: cl.size,
		Op: cl.builtin.op, Elem: gpu.ElemOf(cl.builtin.typ)}
	switch cl.coll {
	case algorithms.Allreduce:
		s.gc.Kind, s.gc.Count = device.GroupAllreduce, cl.p.Count
		// oneshot up to the slots, twoshot beyond (every rank alike:
		// the sizes are).
		s.gc.OneShot = pl.alg.Name == "oneshot" && cl.bytes <= int64(g.Slot())
	case algorithms.ReduceScatter, algorithms.ReduceScatterBlock:
		s.gc.Kind, s.gc.Counts = device.GroupReduceScatter, cl.p.Counts
	default:
		s.gc.Kind, s.gc.Counts = device.GroupAllgather, cl.p.Counts
	}
	staged := g.Stats().Staged
	err := g.Start(&s.gc)
	cc, counted := counters.CallOf(cl.name)
	counted = counted && !cl.own
	if errors.Is(err, device.ErrNotDirect) {
		if counted {
			counters.Add(cc, counters.DeviceFallback)
		}
		return c.deviceFallback(cl)
	}
	if err != nil {
		return nil, c.runError(name, pl.alg.Name+" on device memory", err)
	}
	if counted && g.Stats().Staged != staged {
		counters.Add(cc, counters.DeviceStaged)
	}
	// Progress polls the call's last event; nothing waits for a peer.
	return s.step.begin(c, g, name, pl.alg.Name, " on device memory", false), nil
}

// deviceFallback starts cl as the tuner's choice without the device
// group (hoststaged, or a schedule on the device executor): a call the
// group could not run.
func (c *Comm) deviceFallback(cl call) (stepper, error) {
	p := cl.p
	p.DeviceGroup = false
	cl.p = p
	choice, err := c.cfg.Tuner.Choose(tuner.Query{Collective: cl.coll, Bytes: cl.bytes, Params: p})
	if err != nil {
		return nil, argError(cl.label(), mpierr.Arg, "%v", err)
	}
	if c.cfg.Debug != nil {
		fmt.Fprintf(c.cfg.Debug, "gocoll: rank %d: %s comm=%s: a rank's buffer cannot be shared or is misaligned: algorithm=%s instead\n",
			c.rank, cl.label(), c.name, choice.Alg.Name)
	}
	switch {
	case choice.Alg.HostStaged:
		return hostStagedRoute{}.start(c, cl, plan{alg: choice.Alg, route: hostStagedRoute{}})
	case !choice.Alg.IsSchedule():
		return nil, &mpierr.Error{Call: cl.label(), Class: mpierr.Intern, Msg: fmt.Sprintf("the tuner chose %s for a call on device memory without a device group", choice.Alg.Name)}
	}
	return deviceRoute{}.start(c, cl, plan{alg: choice.Alg, route: deviceRoute{}, sched: c.cache.get(cl.coll, choice.Alg, p)})
}

// deviceGroupFor reports whether cl can run on the communicator's device
// group: the group exists (made here at the first device call, with the
// device executor: collectives every rank makes in the same call), the
// call is one of the four collectives, and a reduction has a GPU kernel
// of its op and type. Every rank answers alike. c.mu is held.
func (c *Comm) deviceGroupFor(cl *call) (bool, error) {
	name := cl.label()
	x, err := c.deviceExecutor(name)
	if err != nil {
		return false, err
	}
	if !c.device.groupTried {
		c.device.groupTried = true
		mem := cl.out.gpu().Mem
		if !mem.OnDevice() {
			mem = cl.in.gpu().Mem
		}
		opts := c.cfg.Device.Group
		opts.Exchange = func(mine []byte) ([]byte, error) { return c.nodeRecords(name, mine) }
		opts.Barrier = c.hostBarrier(name)
		opts.Log = c.cfg.Debug
		g, err := x.NewGroup(mem, c.rank, opts)
		if err != nil && c.cfg.Debug != nil {
			fmt.Fprintf(c.cfg.Debug, "gocoll: rank %d: %s: no device group, device calls run as schedules: %v\n", c.rank, c.name, err)
		}
		c.device.group = g
	}
	g := c.device.group
	switch {
	case g == nil:
		return false, nil
	case cl.in.len() > 0 && !g.Holds(cl.in.gpu().Mem), cl.out.len() > 0 && !g.Holds(cl.out.gpu().Mem):
		// Host memory, or another context's: the executor's schedules
		// copy it (a communicator's ranks make such calls alike, as they
		// must pass device memory alike).
		return false, nil
	case cl.coll != algorithms.Allreduce && cl.coll != algorithms.ReduceScatter && cl.coll != algorithms.ReduceScatterBlock && cl.coll != algorithms.Allgather:
		return false, nil
	case !cl.coll.Reduces():
		return true, nil
	}
	b := cl.builtin
	return cl.kernel != nil && b.typ.Size() == cl.size && gpu.PeerKernel(b.op, gpu.ElemOf(b.typ), false) != "", nil
}

// nodeRecords gathers every rank's record, all of len(mine) bytes, in
// rank order: the device group's exchanges (descriptors of a call's
// buffers), on the shared segment where the communicator has one (one
// synchronisation, about a microsecond), else by messages.
func (c *Comm) nodeRecords(name string, mine []byte) ([]byte, error) {
	if c.shared == nil {
		return c.gatherRecords(name, "device group", mine, len(mine))
	}
	all := make([]byte, len(mine)*c.Size())
	p := algorithms.Params{P: c.Size(), Rank: c.rank, Counts: c.uniform(len(mine)), Commutative: true}
	if err := c.runShm(name, algorithms.Allgather, p, mine, all, 1, nil); err != nil {
		return nil, err
	}
	return all, nil
}

// hostBarrier is the device group's meeting on the host (GOCOLL_CUDA_SYNC
// =host): the shared segment's barrier where the communicator has one,
// else an exchange of one byte.
func (c *Comm) hostBarrier(name string) func() error {
	return func() error {
		if c.shared != nil {
			if err := c.shared.Barrier(); err != nil {
				return c.sharedError(name, err)
			}
			return nil
		}
		_, err := c.gatherRecords(name, "device group barrier", []byte{0}, 1)
		return err
	}
}
