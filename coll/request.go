package coll

import (
	"errors"
	"github.com/gocoll/gocoll/internal/pause"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/host"
	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/schedule"
)

// A Request is one collective call that runs while the program goes on:
// a nonblocking call (MPI_Iallreduce), started when it is made, or a
// persistent one (MPI_Allreduce_init), made once and started many times.
//
// A communicator runs its requests one after another in the order they
// were started, as MPI orders collectives, and a blocking call after them.
// The call at the head of a communicator's queue begins (its algorithm is
// chosen, the GOCOLL_CHECK agreement made) and then moves:
//
//   - a schedule on host memory (the host executor), a call of the shm
//     engine (intranode.Call) and a schedule on device memory (the
//     device executor) are stepped by a stepper whose Progress never
//     waits for a peer, from every gocoll call (Test, Wait, other
//     collectives) and, with GOCOLL_PROGRESS_THREAD=1, from a progress
//     goroutine;
//   - the shm form of hierarchical is not resumable yet: it runs as one
//     piece on a goroutine of its own, holding the communicator.
type Request struct {
	c          *Comm
	o          op
	persistent bool
	check      bool // GOCOLL_CHECK: agree on sig when the call begins
	sig        signature

	// Guarded by c.qmu.
	active bool

	// Set by whoever runs the request, with c.mu held.
	begun     bool
	offloaded bool
	rt        route
	routed    bool // rt and sched hold a persistent request's choice
	sched     *schedule.Schedule
	exec      host.Executor
	hc        host.Call
	scratch   []byte
	st        stepper // what moves the begun call
	err       error

	// claimed: someone runs this start's offloaded piece (its goroutine,
	// or a waiter); a new one per start, so that a goroutine left over
	// from an earlier start, whose piece a waiter ran, never runs a later.
	claimed *atomic.Bool
	offDone atomic.Bool   // the offloaded piece has returned
	done    atomic.Bool   // complete; err is final
	doneCh  chan struct{} // closed when done
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
	r.o.form = formName(r.o.call, persistent)
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
	call := r.o.label()
	if r.persistent {
		call = startName(call)
	}
	c.qmu.Lock()
	if r.active {
		c.qmu.Unlock()
		return argError("MPI_Start", mpierr.Request, "the persistent %s request is already active (complete it with MPI_Wait or MPI_Test first)", r.o.label())
	}
	if c.freed.Load() {
		c.qmu.Unlock()
		return argError(call, mpierr.Comm, "communicator %s was freed (or MPI finalized)", c.name)
	}
	r.active, r.begun, r.offloaded, r.err = true, false, false, nil
	r.claimed = new(atomic.Bool)
	r.offDone.Store(false)
	r.done.Store(false)
	r.doneCh = make(chan struct{})
	c.queue = append(c.queue, r)
	first := c.inFlight.Add(1) == 1
	c.qmu.Unlock()
	if first {
		c.eng.add(c)
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
		r.c.eng.progressAll()
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
	// next turn (the thread stands aside meanwhile: progressEngine.waiters).
	c.eng.waiters.Add(1)
	defer c.eng.waiters.Add(-1)
	var pat patience
	for !r.done.Load() {
		if c.eng.comms.Load() == 1 {
			// Only this communicator has requests: finish its head with
			// the transport's own blocking wait.
			c.mu.Lock()
			c.finishHead()
			c.mu.Unlock()
			continue
		}
		// Several communicators' requests: move them all in turn (any of
		// them may be what a peer waits for before it answers r).
		if c.eng.progressAll() {
			pat.moved()
		} else if pat.stalled(c.cfg.Timeout) {
			c.mu.Lock()
			c.finishHead()
			c.mu.Unlock()
		}
	}
}

// patience paces a waiter that moves several communicators' requests in
// turn: it yields, then sleeps briefly, while nothing moves; once nothing
// has moved for the communicator's timeout it says so, and the waiter
// finishes its own call with the transport's blocking wait, whose timeout
// names the peer that does not answer: a stall ends in an error, never a
// hang.
type patience struct {
	b     pause.Backoff
	since time.Time
}

func (p *patience) moved() { p.b.Reset() }

// stalled backs off once and reports whether nothing has moved for
// timeout (0: never).
func (p *patience) stalled(timeout time.Duration) bool {
	if p.b.Rounds() == 0 {
		p.since = time.Now()
	}
	p.b.Idle()
	return timeout > 0 && p.b.Rounds()%256 == 0 && time.Since(p.since) > timeout
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
// held, and is let go while an offloaded head runs on its goroutine
// (which needs it).
func (c *Comm) finishHead() {
	h := c.head()
	if h != nil && h.begun && h.offloaded && h.claimed.CompareAndSwap(false, true) {
		// Its goroutine has not started (it waits for c.mu, which this
		// waiter holds): run it here rather than wake it and wait.
		h.err = c.execute(&h.o, h.rt)
		h.offDone.Store(true)
		c.advance(false)
		return
	}
	if h != nil && h.begun && h.offloaded && !h.offDone.Load() {
		c.mu.Unlock()
		<-h.doneCh
		c.mu.Lock()
		return
	}
	c.advance(true)
}

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
// blocking call on c runs after them.
func (c *Comm) drain() {
	for c.inFlight.Load() > 0 {
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
		if r == nil {
			return moved
		}
		if !r.begun {
			moved = true
			r.begun = true
			if err := c.begin(r, block); err != nil {
				r.err = err
				c.complete(r)
				continue
			}
		}
		if r.offloaded {
			if !r.offDone.Load() {
				return moved
			}
			c.complete(r)
			moved = true
			continue
		}
		done, stepped, err := r.step(block)
		moved = moved || stepped
		if !done {
			return moved
		}
		r.err = c.stepError(r, err)
		c.complete(r)
		moved = true
		block = false // the head is done; go on only as far as is free
	}
}

// A stepper moves one begun call of a Request: Progress does what it can
// without waiting for a peer and says whether the call is done; Finish
// runs it to the end. The host executor is one (a schedule on host
// memory); the shm engine and the device executor have their own
// (stepperOf).
type stepper interface {
	Progress() (done, moved bool, err error)
	Finish() error
}

// stepWithOthers runs a blocking call while other communicators have
// requests in flight: it steps the call and moves theirs while it waits,
// since a peer may need one of them before it can answer this call (MPI's
// progress rule). A route with no stepper runs whole. c.mu is held.
func (c *Comm) stepWithOthers(o *op, rt route) error {
	r := &Request{c: c, o: *o, rt: rt}
	if rt.scheduled() {
		r.sched = c.cache.get(o.coll, rt.alg, o.p)
	}
	st, err := c.stepperOf(r, &r.o, rt)
	if err != nil {
		return err
	}
	if st == nil {
		return c.execute(o, rt)
	}
	r.st = st
	var pat patience
	for {
		done, moved, err := r.step(false)
		if done {
			return c.stepError(r, err)
		}
		if c.eng.progressAll() || moved {
			pat.moved()
		} else if pat.stalled(c.cfg.Timeout) {
			return c.stepError(r, r.st.Finish())
		}
	}
}

// stepError is the error of r's call whose stepper ended with err.
func (c *Comm) stepError(r *Request, err error) error {
	if err == nil {
		return nil
	}
	if _, wrapped := err.(*mpierr.Error); wrapped { // steppers that wrap their own (device)
		return err
	}
	return c.runError(r.o.label(), r.rt.alg.Name, err)
}

// step moves r's call; with block it runs it to the end.
func (r *Request) step(block bool) (done, moved bool, err error) {
	if block {
		return true, true, r.st.Finish()
	}
	return r.st.Progress()
}

// stepperOf starts o on route rt as a resumable call, or returns nil
// where the route runs only as one piece (then r is offloaded). c.mu is
// held and r is at the head of c's queue.
func (c *Comm) stepperOf(r *Request, o *op, rt route) (stepper, error) {
	switch {
	case rt.resumable():
		c.seq++
		n := r.sched.ScratchLen * o.size
		if cap(r.scratch) < n {
			r.scratch = make([]byte, n)
		}
		r.hc = hostCallIn(c, r.sched, o.in, o.out, r.scratch[:n], o.size, o.kernel)
		r.exec.Start(&r.hc)
		return &r.exec, nil
	case rt.alg.Direct && rt.h == nil && !rt.onDevice:
		return c.sharedStepper(r, o, rt)
	case rt.scheduled() && rt.onDevice:
		return c.deviceStepper(r, o, rt)
	}
	return nil, nil
}

// begin starts r's execution: the hooks, the agreement, the choice of
// algorithm; a resumable route starts on its stepper (stepperOf),
// anything else runs on a goroutine of its own (or now, with block).
// c.mu is held and r is at the head of c's queue.
func (c *Comm) begin(r *Request, block bool) error {
	o := &r.o
	if o.pre != nil {
		o.pre()
	}
	if r.check {
		c.pending, c.hasPending = r.sig, true
	}
	if !r.routed {
		rt, err := c.decide(o)
		if err != nil {
			return err
		}
		r.rt = rt
		if rt.scheduled() { // host or device
			r.sched = c.cache.get(o.coll, rt.alg, o.p)
		}
		r.routed = r.persistent // a persistent request keeps its choice
	} else if r.check {
		c.hasPending = false
		if err := c.exchange(o.label(), c.pending, true); err != nil {
			return err
		}
	}
	st, err := c.stepperOf(r, o, r.rt)
	if err != nil {
		return err
	}
	r.st = st
	if st != nil {
		return nil
	}
	r.offloaded = true
	if block {
		r.claimed.Store(true)
		r.err = c.execute(o, r.rt)
		r.offDone.Store(true)
		return nil
	}
	claimed := r.claimed
	go func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !claimed.CompareAndSwap(false, true) {
			return // a waiter ran it (finishHead)
		}
		r.err = c.execute(o, r.rt)
		r.offDone.Store(true)
		c.advance(false) // complete it, begin the next
	}()
	return nil
}

// complete ends r at the head of c's queue; c.mu is held.
func (c *Comm) complete(r *Request) {
	if r.err == nil && r.o.post != nil {
		r.o.post()
	}
	c.qmu.Lock()
	c.queue[0] = nil
	c.queue = c.queue[1:]
	last := c.inFlight.Add(-1) == 0
	c.qmu.Unlock()
	r.done.Store(true)
	close(r.doneCh)
	if last {
		c.eng.remove(c)
	}
}

// progressEngine knows the communicators with requests in flight, so
// that any gocoll call, or the progress goroutine, can move them all.
type progressEngine struct {
	mu    sync.Mutex
	list  []*Comm
	comms atomic.Int32 // len(list), read without the lock
	// waiters counts the goroutines in Request.wait, which move every
	// request themselves: the progress goroutine stands aside meanwhile
	// rather than contend with them for the communicators and the cores.
	waiters atomic.Int32
	wake    chan struct{}
	thread  sync.Once
}

// processEngine is the process's: every communicator of a process shares
// it (tests that run ranks as goroutines give each its own: OwnEngine).
var processEngine = newProgressEngine()

func newProgressEngine() *progressEngine { return &progressEngine{wake: make(chan struct{}, 1)} }

func (e *progressEngine) add(c *Comm) {
	e.mu.Lock()
	e.list = append(e.list, c)
	e.comms.Store(int32(len(e.list)))
	e.mu.Unlock()
	if c.cfg.ProgressThread {
		e.thread.Do(func() { go e.run() })
		select {
		case e.wake <- struct{}{}:
		default:
		}
	}
}

func (e *progressEngine) remove(c *Comm) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, x := range e.list {
		if x == c {
			e.list = append(e.list[:i], e.list[i+1:]...)
			break
		}
	}
	e.comms.Store(int32(len(e.list)))
}

// progressAll moves every communicator's requests; it reports whether
// anything moved.
func (e *progressEngine) progressAll() bool {
	if e.comms.Load() == 0 {
		return false
	}
	e.mu.Lock()
	list := append([]*Comm(nil), e.list...)
	e.mu.Unlock()
	moved := false
	for _, c := range list {
		if c.progress() {
			moved = true
		}
	}
	return moved
}

// run is the progress goroutine (GOCOLL_PROGRESS_THREAD=1): while
// requests are in flight it moves them, polling at once while they move
// and backing off to short sleeps while they wait for peers; with none in
// flight it sleeps until one starts.
// spinRounds is how many idle rounds the progress goroutine polls before
// it starts to sleep: a peer's step typically comes within microseconds,
// and a sleep costs tens (the kernel's timer slack).
const spinRounds = 32

func (e *progressEngine) run() {
	idle := 0
	for {
		if e.comms.Load() == 0 {
			<-e.wake
			idle = 0
			continue
		}
		if e.waiters.Load() > 0 {
			pause.For(50 * time.Microsecond)
			continue
		}
		if e.progressAll() {
			idle = 0
			continue
		}
		idle++
		switch {
		case idle < spinRounds:
			runtime.Gosched()
		default:
			pause.For(time.Duration(min(idle-spinRounds, 200)) * time.Microsecond / 4)
		}
	}
}

// Progress moves every request in flight on; gocoll calls that do not
// otherwise move them (point-to-point) call it.
func Progress() { processEngine.progressAll() }

// InFlight reports whether any communicator of the process has requests
// in flight: a blocking point-to-point call then moves them while it
// waits (Progress), as MPI's progress rule asks.
func InFlight() bool { return processEngine.comms.Load() > 0 }
