package coll

import (
	"fmt"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/coll/counters"
	"github.com/gocoll/gocoll/executor/device"
	"github.com/gocoll/gocoll/executor/host"
	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/schedule"
	"github.com/gocoll/gocoll/tuner"
)

// A route is one way of running a call: a schedule on the host executor
// (hostRoute), the shared-memory engine (shmRoute), a schedule on the
// device executor on CUDA memory (deviceRoute), the device group's
// algorithms on CUDA memory of one node (peerRoute), CUDA memory through
// host memory and the shm engine (hostStagedRoute), or the
// shared-memory form of a hierarchical algorithm (hierRoute). decide
// picks it, once per call.
//
// start begins cl as planned and returns what moves it on: a blocking
// call is start, then the stepper's Finish (run); a request's is stepped
// (Request). The stepper's errors are the call's MPI errors. c.mu is
// held, and no other call of c is in progress (c.steps is the route's).
// The call and plan come by value: through an interface a pointer would
// make every blocking call allocate them.
type route interface {
	start(c *Comm, cl call, pl plan) (stepper, error)
}

// A stepper moves one started call: Progress does what it can without
// waiting for a peer and says whether the call is done (then with its
// error); Finish runs it to the end.
type stepper interface {
	Progress() (done, moved bool, err error)
	Finish() error
}

// plan is how one call runs: the tuner's algorithm and the route that
// runs it, with what the route needs of it.
type plan struct {
	alg   *algorithms.Algorithm
	route route
	sched *schedule.Schedule // the schedule routes' (host, device)
	h     *hierarchy         // hierRoute's node and slice communicators
}

// steps holds what the routes keep from one call of a communicator to
// the next, so that a call in steady state allocates nothing: the host
// executor and its scratch memory, the device call, the stepper.
type steps struct {
	host    host.Executor
	hc      host.Call
	scratch []byte
	dc      device.Call
	gc      device.GroupCall
	staged  stagedStep
	step    routeStep
	piece   pieceStep
}

// routeStep is the stepper of the host, shm and device routes: their
// executor's own (the host executor, an intranode.Call, the device
// executor), with errors that name the call, the communicator, the
// algorithm and the peer.
type routeStep struct {
	c     *Comm
	inner stepper
	name  string // the call's
	alg   string
	where string // what errors add to the algorithm: " on device memory"
	shm   bool   // the engine names peers by communicator rank (sharedError)
}

// begin makes s the stepper of a call on inner.
func (s *routeStep) begin(c *Comm, inner stepper, name, alg, where string, shm bool) *routeStep {
	*s = routeStep{c: c, inner: inner, name: name, alg: alg, where: where, shm: shm}
	return s
}

func (s *routeStep) Progress() (done, moved bool, err error) {
	done, moved, err = s.inner.Progress()
	return done, moved, s.wrap(err)
}

func (s *routeStep) Finish() error { return s.wrap(s.inner.Finish()) }

func (s *routeStep) wrap(err error) error {
	switch {
	case err == nil:
		return nil
	case s.shm:
		return s.c.sharedError(s.name, err)
	}
	return s.c.runError(s.name, s.alg+s.where, err)
}

// decide establishes, once per call, what the routes need: where the
// buffers live, the GOCOLL_CHECK agreement, the algorithm and the route.
// It prints the call (GOCOLL_DEBUG) and counts it (package counters)
// unless cl.own. c.mu is held.
func (c *Comm) decide(cl *call) (plan, error) {
	name, p := cl.label(), cl.p
	onDevice := cl.onDevice()
	if c.hasPending { // GOCOLL_CHECK: agree on the call before running it
		c.pending.device = onDevice
		c.hasPending = false
		if err := c.exchange(name, c.pending, true); err != nil {
			return plan{}, err
		}
	}
	p.SharedMemory = c.shared != nil
	p.DeviceMemory = onDevice
	p.Nodes = c.nodes
	if onDevice {
		ok, err := c.deviceGroupFor(cl)
		if err != nil {
			return plan{}, err
		}
		p.DeviceGroup = ok
	}
	cl.p = p
	choice, err := c.choose(name, tuner.Query{Collective: cl.coll, Bytes: cl.bytes, Params: p, Force: cl.force})
	if err != nil {
		return plan{}, argError(name, mpierr.Arg, "%v", err)
	}
	pl := plan{alg: choice.Alg}
	// A hierarchical call takes the shm form where the communicator has
	// its node and slice communicators and the memory is the host's.
	composes := c.composes(cl.coll, choice.Alg)
	if composes {
		pl.h = c.hierarchyFor(onDevice)
	}
	switch {
	case choice.Alg.Device:
		pl.route = peerRoute{}
	case choice.Alg.HostStaged:
		pl.route = hostStagedRoute{}
	case onDevice:
		pl.route = deviceRoute{}
	case choice.Alg.Direct:
		pl.route = shmRoute{}
	case pl.h != nil:
		pl.route = hierRoute{}
	default:
		pl.route = hostRoute{}
	}
	if choice.Alg.IsSchedule() && pl.h == nil {
		pl.sched = c.cache.get(cl.coll, choice.Alg, p)
	}
	if c.cfg.Debug != nil {
		how := choice.How()
		if choice.Why != "" {
			how += ": " + choice.Why // the rule or the model's estimate
		}
		form := ""
		if composes {
			form = formNote(pl.h)
		}
		fmt.Fprintf(c.cfg.Debug, "gocoll: rank %d: %s comm=%s bytes=%d p=%d algorithm=%s (%s)%s%s\n",
			c.rank, name, c.name, cl.bytes, p.P, choice.Alg.Name, how, form, memoryNote(onDevice))
	}
	if cc, ok := counters.CallOf(cl.name); ok && !cl.own && choice.Alg != nil {
		counters.Ran(cc, choice.Alg, choice.Fallback)
		if onDevice {
			counters.Add(cc, counters.Device)
		}
	}
	return pl, nil
}

// memoryNote is the end of GOCOLL_DEBUG's line for a call.
func memoryNote(onDevice bool) string {
	if onDevice {
		return " memory=device"
	}
	return ""
}
