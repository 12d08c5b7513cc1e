package coll

import (
	"errors"
	"strings"
	"sync/atomic"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/mpierr"
)

// A Request is one collective call that runs while the program goes on:
// a nonblocking call (MPI_Iallreduce), started when it is made, or a
// persistent one (MPI_Allreduce_init), made once and started many times.
//
// A communicator runs its requests one after another in the order they
// were started, as MPI orders collectives, and a blocking call after them.
// The call at the head of a communicator's queue begins (decide: its
// route, the GOCOLL_CHECK agreement) and its route starts it; its stepper
// then moves it, never waiting for a peer, from every gocoll call (Test,
// Wait, other collectives) and, with GOCOLL_PROGRESS_THREAD=1, from the
// progress goroutine (progress.go). The shm form of hierarchical, which
// is not resumable, runs as one piece on a goroutine of its own
// (pieceStep).
type Request struct {
	c          *Comm
	cl         call
	persistent bool
	check      bool // GOCOLL_CHECK: agree on sig when the call begins
	sig        signature

	// Guarded by c.qmu.
	active bool

	// Set by whoever runs the request, with c.mu held.
	begun     bool
	beginning bool // begin is under way (it may run gocoll's own calls on c)
	pl        plan
	planned   bool    // pl holds a persistent request's choice
	st        stepper // what moves the begun call
	err       error

	done   atomic.Bool   // complete; err is final
	doneCh chan struct{} // closed when done
}

// Comm returns the communicator the request runs on.
func (r *Request) Comm() *Comm { return r.c }

// Persistent reports whether the request is persistent.
func (r *Request) Persistent() bool { return r.persistent }

// Active reports whether the request was started and has not been
// completed by Wait or a successful Test.
func (r *Request) Active() bool {
	r.c.qmu.Lock()
	defer r.c.qmu.Unlock()
	return r.active
}

// newRequest checks a call's arguments with build (a collective's
// lower-case method) and returns its request, not started.
func (c *Comm) newRequest(sig signature, persistent bool, build func(r *Request) error) (*Request, error) {
	r := &Request{c: c, persistent: persistent, sig: sig, check: c.cfg.Check}
	err := build(r)
	var me *mpierr.Error
	if errors.As(err, &me) {
		me.Call = formName(me.Call, persistent)
	}
	if err != nil {
		if c.cfg.Check {
			// The other ranks wait for this rank's signature: send it,
			// marked invalid, in this call's place.
			c.mu.Lock()
			c.drain()
			c.exchange("", sig, false)
			c.mu.Unlock()
		}
		return nil, err
	}
	r.cl.form = formName(r.cl.name, persistent)
	return r, nil
}

// formName is the name of a blocking call's nonblocking or persistent
// form, for messages: MPI_Allreduce: MPI_Iallreduce, MPI_Allreduce_init.
func formName(call string, persistent bool) string {
	name, ok := strings.CutPrefix(call, "MPI_")
	if !ok || name == "" {
		return call
	}
	if persistent {
		return call + "_init"
	}
	return "MPI_I" + strings.ToLower(name[:1]) + name[1:]
}

// Iallreduce starts Allreduce and returns its request.
func (c *Comm) Iallreduce(a Args) (*Request, error) {
	return c.startNew(signatureOf(algorithms.Allreduce, a), func(r *Request) error { return c.allreduce(a, r) })
}

// IreduceScatter starts ReduceScatter and returns its request.
func (c *Comm) IreduceScatter(a Args) (*Request, error) {
	return c.startNew(signatureOf(algorithms.ReduceScatter, a), func(r *Request) error { return c.reduceScatterV(a, r) })
}

// IreduceScatterBlock starts ReduceScatterBlock and returns its request.
func (c *Comm) IreduceScatterBlock(a Args) (*Request, error) {
	return c.startNew(signatureOf(algorithms.ReduceScatterBlock, a), func(r *Request) error { return c.reduceScatterBlock(a, r) })
}

// Iallgather starts Allgather and returns its request.
func (c *Comm) Iallgather(a Args) (*Request, error) {
	return c.startNew(signatureOf(algorithms.Allgather, a), func(r *Request) error { return c.allgather("MPI_Allgather", a, r) })
}

// AllreduceInit returns a persistent Allreduce, to be started by Start.
func (c *Comm) AllreduceInit(a Args) (*Request, error) {
	return c.newRequest(signatureOf(algorithms.Allreduce, a), true, func(r *Request) error { return c.allreduce(a, r) })
}

// ReduceScatterInit returns a persistent ReduceScatter.
func (c *Comm) ReduceScatterInit(a Args) (*Request, error) {
	return c.newRequest(signatureOf(algorithms.ReduceScatter, a), true, func(r *Request) error { return c.reduceScatterV(a, r) })
}

// ReduceScatterBlockInit returns a persistent ReduceScatterBlock.
func (c *Comm) ReduceScatterBlockInit(a Args) (*Request, error) {
	return c.newRequest(signatureOf(algorithms.ReduceScatterBlock, a), true, func(r *Request) error { return c.reduceScatterBlock(a, r) })
}

// AllgatherInit returns a persistent Allgather.
func (c *Comm) AllgatherInit(a Args) (*Request, error) {
	return c.newRequest(signatureOf(algorithms.Allgather, a), true, func(r *Request) error { return c.allgather("MPI_Allgather", a, r) })
}

func (c *Comm) startNew(sig signature, build func(r *Request) error) (*Request, error) {
	r, err := c.newRequest(sig, false, build)
	if err != nil {
		return nil, err
	}
	return r, r.Start()
}

// Start starts the request: a nonblocking one once (when it is made), a
// persistent one again after each completion.
func (r *Request) Start() error {
	c := r.c
	call := r.cl.label()
	if r.persistent {
		call = startName(call)
	}
	c.qmu.Lock()
	if r.active {
		c.qmu.Unlock()
		return argError("MPI_Start", mpierr.Request, "the persistent %s request is already active (complete it with MPI_Wait or MPI_Test first)", r.cl.label())
	}
	if c.freed.Load() {
		c.qmu.Unlock()
		return argError(call, mpierr.Comm, "communicator %s was freed (or MPI finalized)", c.name)
	}
	r.active, r.begun, r.err = true, false, nil
	r.done.Store(false)
	r.doneCh = make(chan struct{})
	c.queue = append(c.queue, r)
	first := c.inFlight.Add(1) == 1
	c.qmu.Unlock()
	if first {
		c.loop.add(c)
	}
	c.progress() // begin at once where the communicator is free
	return nil
}

// startName is the name of a persistent call's start in messages.
func startName(call string) string { return "MPI_Start (" + call + ")" }

// Test moves every request on and reports whether r is complete, with its
// error. A complete request is inactive again (persistent: it can be
// started again); testing an inactive one reports true and no error.
func (r *Request) Test() (bool, error) {
	if !r.done.Load() {
		r.c.loop.progressAll()
	}
	return r.finish()
}

// finish reports whether r is complete and, if it is, makes it inactive.
func (r *Request) finish() (bool, error) {
	c := r.c
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if !r.active {
		return true, nil
	}
	if !r.done.Load() {
		return false, nil
	}
	r.active = false
	return true, r.err
}

// Wait moves requests on until r completes and returns its error.
func (r *Request) Wait() error {
	r.wait()
	_, err := r.finish()
	return err
}

// Done reports, without moving anything, whether r has completed.
func (r *Request) Done() bool { return r.done.Load() }

// wait returns once r is complete (or inactive).
func (r *Request) wait() {
	c := r.c
	c.qmu.Lock()
	active := r.active
	c.qmu.Unlock()
	if !active {
		return
	}
	// With the progress thread too, a rank in Wait has nothing else to do:
	// it drives its requests itself rather than sleep until the thread's
	// next turn (the thread stands aside meanwhile: progressLoop.waiters).
	c.loop.waiters.Add(1)
	defer c.loop.waiters.Add(-1)
	var pat patience
	for !r.done.Load() {
		if c.loop.comms.Load() == 1 {
			// Only this communicator has requests: finish its head with
			// the transport's own blocking wait.
			c.mu.Lock()
			c.finishHead()
			c.mu.Unlock()
			continue
		}
		// Several communicators' requests: move them all in turn (any of
		// them may be what a peer waits for before it answers r).
		if c.loop.progressAll() {
			pat.moved()
		} else if pat.stalled(c.cfg.Timeout) {
			c.mu.Lock()
			c.finishHead()
			c.mu.Unlock()
		}
	}
}

// head returns the first request of c's queue, or nil.
func (c *Comm) head() *Request {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if len(c.queue) == 0 {
		return nil
	}
	return c.queue[0]
}

// finishHead completes the request at the head of c's queue; c.mu is
// held.
func (c *Comm) finishHead() { c.advance(true) }

// progress moves c's requests on unless another goroutine is running on
// c; it reports whether anything moved.
func (c *Comm) progress() bool {
	if c.inFlight.Load() == 0 || !c.mu.TryLock() {
		return false
	}
	defer c.mu.Unlock()
	return c.advance(false)
}

// drain completes every request started on c, in order; c.mu is held. A
// blocking call on c runs after them. Within the head's begin (which may
// run gocoll's own calls on c: the node and slice communicators' splits)
// it leaves the queue alone: those calls are the head's own.
func (c *Comm) drain() {
	for c.inFlight.Load() > 0 {
		if h := c.head(); h != nil && h.beginning {
			return
		}
		c.finishHead()
	}
}

// advance moves the requests at the head of c's queue; with block it
// completes at least the head. c.mu is held. It reports whether anything
// moved.
func (c *Comm) advance(block bool) bool {
	moved := false
	for {
		r := c.head()
		if r == nil || r.beginning {
			return moved
		}
		if !r.begun {
			moved = true
			r.begun = true
			if err := c.begin(r); err != nil {
				r.err = err
				c.complete(r)
				continue
			}
		}
		var done, stepped bool
		var err error
		if block {
			done, stepped, err = true, true, r.st.Finish()
		} else {
			done, stepped, err = r.st.Progress()
		}
		moved = moved || stepped
		if !done {
			return moved
		}
		r.err = err
		c.complete(r)
		moved = true
		block = false // the head is done; go on only as far as is free
	}
}

// begin starts r's call: the hooks, the agreement, the choice of route
// (kept by a persistent request), and the route's start. c.mu is held and
// r is at the head of c's queue.
func (c *Comm) begin(r *Request) error {
	r.beginning = true
	defer func() { r.beginning = false }()
	cl := &r.cl
	if cl.pre != nil {
		cl.pre()
	}
	if r.check {
		c.pending, c.hasPending = r.sig, true
	}
	if !r.planned {
		pl, err := c.decide(cl)
		if err != nil {
			return err
		}
		r.pl, r.planned = pl, r.persistent // a persistent request keeps its choice
	} else if r.check {
		c.hasPending = false
		if err := c.exchange(cl.label(), c.pending, true); err != nil {
			return err
		}
	}
	st, err := r.pl.route.start(c, *cl, r.pl)
	if err != nil {
		return err
	}
	r.st = st
	return nil
}

// complete ends r at the head of c's queue; c.mu is held.
func (c *Comm) complete(r *Request) {
	if r.err == nil && r.cl.post != nil {
		r.cl.post()
	}
	c.qmu.Lock()
	c.queue[0] = nil
	c.queue = c.queue[1:]
	last := c.inFlight.Add(-1) == 0
	c.qmu.Unlock()
	r.done.Store(true)
	close(r.doneCh)
	if last {
		c.loop.remove(c)
	}
}
