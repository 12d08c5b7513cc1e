package device

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/gocoll/gocoll/internal/pause"

	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/schedule"
	"github.com/gocoll/gocoll/transport"
)

// A task is a part of a round in progress: a transfer, or a reduction on
// the host. poll does what it can without waiting for a peer or the GPU
// and reports whether the task has ended (its error is then final);
// after a failure a task waits for the transport to let go of its
// buffers and for the GPU to be done with its slots, as the blocking
// executor did.
type task interface {
	poll() (done, moved bool, err error)
	// next is what the task waits for: an event, when one gates
	// anything it would do, else the transport ops it tests first.
	next() (gpu.Event, []transport.Op)
}

// Start begins a call on the calling thread: it orders the call after
// the application's work on the default streams (run.order, which must
// run on the application's thread) and places the buffers; Progress or
// Finish run it. One call at a time.
func (x *Executor) Start(c *Call) error {
	if x.cur != nil {
		return errors.New("device executor: a call is already in progress")
	}
	mem := c.Out.Mem
	if !mem.OnDevice() {
		mem = c.In.Mem
	}
	if !mem.OnDevice() {
		return errors.New("device executor: neither buffer is device memory")
	}
	st, leave, err := x.state(mem)
	if err != nil {
		return err
	}
	defer leave()
	r := &run{x: x, st: st, e: st.e, drv: st.e.drv, c: c}
	if err := r.begin(); err != nil {
		// A failed call leaves the streams in an unknown state: wait for
		// what was queued before anyone reuses the buffers.
		r.syncAll()
		return err
	}
	x.cur = r
	return nil
}

// Progress moves the started call as far as it can without waiting for
// a peer or the GPU; it reports whether the call is done (then its error
// is final, and the caller's buffers hold the result) and whether
// anything moved.
func (x *Executor) Progress() (done, moved bool, err error) {
	return x.advance(false)
}

// Finish runs the started call to the end.
func (x *Executor) Finish() error {
	_, _, err := x.advance(true)
	return err
}

// Run executes the call: Start, then Finish. Errors name the driver call
// or the transfer that failed.
func (x *Executor) Run(c *Call) error {
	if err := x.Start(c); err != nil {
		return err
	}
	return x.Finish()
}

func (x *Executor) advance(block bool) (done, moved bool, err error) {
	r := x.cur
	if r == nil {
		return true, false, nil
	}
	leave, err := r.e.enter()
	if err != nil {
		// Nothing more can be done in the context: the call ends here.
		x.cur = nil
		return true, true, err
	}
	defer leave()
	done, moved, err = r.advance(block)
	if err != nil {
		r.syncAll()
	}
	if done {
		x.cur = nil
	}
	return done, moved, err
}

// begin checks the call and places its buffers: a buffer elsewhere (host
// memory, another device), or one a reduction kernel could not read (not
// aligned for its element type), is copied into a temporary first;
// cuMemcpyAsync takes any byte address.
func (r *run) begin() error {
	c, st := r.c, r.st
	drv, comp := r.drv, st.comp
	if len(c.Sched.Rounds) >= maxRounds {
		return fmt.Errorf("device executor: %d rounds is too many", len(c.Sched.Rounds))
	}
	r.count = make([]int, len(c.Ranks))

	// Before anything touches the caller's buffers: the application's
	// work on its default streams.
	if err := r.order(); err != nil {
		return err
	}
	r.out, r.outMem = c.Out.Ptr, c.Out.Mem
	inPlace := c.In.Len > 0 && c.In.Ptr >= c.Out.Ptr && c.In.Ptr+uintptr(c.In.Len) <= c.Out.Ptr+uintptr(c.Out.Len)
	align := r.kernelAlign()
	if c.Out.Len > 0 && (!r.sameContext(c.Out.Mem) || c.Out.Ptr%align != 0) {
		if err := st.ensure(&st.tmpOut, c.Out.Len); err != nil {
			return err
		}
		r.out, r.outMem, r.copyOut = st.tmpOut.ptr, st.tmpOut.mem, true
		if inPlace {
			if err := drv.MemcpyAsync(r.out, c.Out.Ptr, c.Out.Len, comp); err != nil {
				return err
			}
		}
	}
	switch {
	case inPlace:
		r.in, r.inMem = r.out+(c.In.Ptr-c.Out.Ptr), r.outMem
	case c.In.Len > 0 && (!r.sameContext(c.In.Mem) || c.In.Ptr%align != 0):
		if err := st.ensure(&st.tmpIn, c.In.Len); err != nil {
			return err
		}
		r.in, r.inMem = st.tmpIn.ptr, st.tmpIn.mem
		if err := drv.MemcpyAsync(r.in, c.In.Ptr, c.In.Len, comp); err != nil {
			return err
		}
	default:
		r.in, r.inMem = c.In.Ptr, c.In.Mem
	}
	if n := c.Sched.ScratchLen * c.ElemSize; n > 0 {
		if err := st.ensure(&st.scratch, n); err != nil {
			return err
		}
		r.scratch, r.scratchMem = st.scratch.ptr, st.scratch.mem
	}
	return nil
}

// advance runs the call's rounds until it ends or, unless block, until
// it would have to wait.
func (r *run) advance(block bool) (done, moved bool, err error) {
	rounds := r.c.Sched.Rounds
	for r.round < len(rounds) {
		i := r.round
		rd := &rounds[i]
		if rd.Communicates() && !r.transferred {
			if !r.posted {
				if err := r.post(i, rd); err != nil {
					return true, true, fmt.Errorf("round %d: %w", i, err)
				}
				r.posted, moved = true, true
			}
			ended, m, err := r.pollTasks(block)
			moved = moved || m
			if !ended {
				return false, moved, nil
			}
			r.putEvents(r.fence)
			if err == nil {
				err = r.received()
			}
			if err != nil {
				return true, true, fmt.Errorf("round %d: %w", i, err)
			}
			r.transferred = true
		}
		for r.stepIdx < len(rd.Steps) {
			s := rd.Steps[r.stepIdx]
			if r.tasks == nil {
				t, err := r.step(s)
				if err != nil {
					return true, true, fmt.Errorf("round %d: %v: %w", i, s, err)
				}
				if t == nil {
					r.stepIdx++
					moved = true
					continue
				}
				r.setTasks(t)
			}
			ended, m, err := r.pollTasks(block)
			moved = moved || m
			if !ended {
				return false, moved, nil
			}
			if err != nil {
				return true, true, fmt.Errorf("round %d: %v: %w", i, s, err)
			}
			r.stepIdx++
		}
		r.round, r.stepIdx, r.posted, r.transferred = i+1, 0, false, false
		moved = true
	}
	// The call ends when the compute stream has caught up: it waited for
	// every copy of the last round.
	if r.final == 0 {
		if r.copyOut {
			if err := r.drv.MemcpyAsync(r.c.Out.Ptr, r.out, r.c.Out.Len, r.st.comp); err != nil {
				return true, true, err
			}
		}
		ev, err := r.event()
		if err != nil {
			return true, true, err
		}
		r.final, moved = ev, true
		if err := r.drv.EventRecord(ev, r.st.comp); err != nil {
			return true, true, err
		}
	}
	if block {
		err = r.wait(r.final)
	} else {
		var ok bool
		if ok, err = r.drv.EventQuery(r.final); err == nil && !ok {
			return false, moved, nil
		}
	}
	r.putEvents(r.final)
	r.final = 0
	return true, true, err
}

// post starts a round: the fence (its copies wait for the steps before
// it), then its receives, then its sends, each a task.
func (r *run) post(i int, rd *schedule.Round) error {
	st, drv := r.st, r.drv
	clear(r.count)
	for _, t := range rd.Recvs {
		if r.count[t.Peer]++; r.count[t.Peer] > maxTransfers {
			return fmt.Errorf("more than %d transfers from rank %d in one round", maxTransfers, t.Peer)
		}
	}
	clear(r.count)
	for _, t := range rd.Sends {
		if r.count[t.Peer]++; r.count[t.Peer] > maxTransfers {
			return fmt.Errorf("more than %d transfers to rank %d in one round", maxTransfers, t.Peer)
		}
	}
	ev, err := r.event()
	if err != nil {
		return err
	}
	if err := drv.EventRecord(ev, st.comp); err != nil {
		r.putEvents(ev)
		return err
	}
	for _, s := range []gpu.Stream{st.down, st.up} {
		if err := drv.StreamWaitEvent(s, ev); err != nil {
			r.putEvents(ev)
			return err
		}
	}
	r.fence, r.ready = ev, false

	tasks := make([]task, 0, len(rd.Recvs)+len(rd.Sends))
	clear(r.count)
	for _, t := range rd.Recvs {
		idx := r.count[t.Peer]
		r.count[t.Peer]++
		k, err := r.newRecv(i, idx, t)
		if err != nil {
			return err
		}
		tasks = append(tasks, k)
	}
	clear(r.count)
	for _, t := range rd.Sends {
		idx := r.count[t.Peer]
		r.count[t.Peer]++
		tasks = append(tasks, r.newSend(i, idx, t))
	}
	r.setTasks(tasks...)
	return nil
}

// received makes the round's steps wait for what it received.
func (r *run) received() error {
	ev, err := r.event()
	if err != nil {
		return err
	}
	defer r.putEvents(ev)
	if err := r.drv.EventRecord(ev, r.st.up); err != nil {
		return err
	}
	return r.drv.StreamWaitEvent(r.st.comp, ev)
}

func (r *run) setTasks(ts ...task) {
	r.tasks = ts
	r.ended = slices.Grow(r.ended[:0], len(ts))[:len(ts)]
	clear(r.ended)
	r.errs = r.errs[:0]
}

// pollTasks polls the tasks until all have ended or, unless block, until
// none moves. A blocking poll that has found nothing to do for a while
// waits for a GPU event some task waits for; for a transport op only
// when a single task is left and no event gates it (waiting on one peer
// while another task of the round could answer a third would deadlock a
// ring); else it sleeps a little.
func (r *run) pollTasks(block bool) (ended, moved bool, err error) {
	for idle := 0; ; {
		left, m := 0, false
		for i, t := range r.tasks {
			if r.ended[i] {
				continue
			}
			done, tm, err := t.poll()
			m = m || tm
			if !done {
				left++
				continue
			}
			r.ended[i] = true
			if err != nil {
				r.errs = append(r.errs, err)
			}
		}
		moved = moved || m
		if left == 0 {
			err := errors.Join(r.errs...)
			r.tasks = nil
			return true, moved, err
		}
		if !block {
			return false, moved, nil
		}
		if m {
			idle = 0
			continue
		}
		if idle++; idle < 32 {
			runtime.Gosched() // poll every task a while before sleeping on one
			continue
		}
		var ops []transport.Op
		waited := false
		for i, t := range r.tasks {
			if r.ended[i] {
				continue
			}
			ev, o := t.next()
			if ev != 0 {
				r.wait(ev) // its error comes back from the task's poll
				waited = true
				break
			}
			ops = o
		}
		switch {
		case waited:
		case left == 1 && ops != nil:
			r.c.T.Wait(ops) // likewise
		default:
			pause.For(20 * time.Microsecond)
		}
	}
}
