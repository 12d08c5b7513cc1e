package device

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/internal/pause"
	"github.com/gocoll/gocoll/schedule"
	"github.com/gocoll/gocoll/transport"
)

// run is one call in progress. It moves by advance, which never waits
// for a peer or the GPU unless asked to block: each round posts its
// transfers as tasks (transfer.go), polls them until all have ended, then
// queues the round's steps on the compute stream; the call ends when an
// event recorded after the last step has completed.
type run struct {
	x   *Executor
	st  *state
	w   *workspace
	drv gpu.Driver
	c   *Call

	in, out, scratch          uintptr    // the schedule's buffers, in the workspace's context
	inMem, outMem, scratchMem gpu.Memory // their allocations
	copyOut                   bool       // out is a temporary: copy it to the caller's at the end

	fence gpu.Event // recorded on the compute stream at the start of the round
	ready bool      // fence has completed (peers may read our memory)
	count []int     // per peer: transfers of the round so far

	round       int    // the round in progress
	posted      bool   // its transfers are tasks
	transferred bool   // they have all ended
	stepIdx     int    // its next step
	tasks       []task // what the round (or a host reduction) waits for
	ended       []bool
	errs        []error
	final       gpu.Event // recorded after the last step; 0 until then
	finished    bool
}

// Message kinds, in the top bits of the tag's round: a round's data
// segments, IPC descriptors and acknowledgements never match each other.
// Bits 20..27 hold the transfer's index among the round's transfers
// between the same two ranks, so every transfer has tags of its own.
const (
	kindData = 0
	kindDesc = 1
	kindAck  = 2

	maxRounds    = 1 << 20
	maxTransfers = 1 << 8
)

func (r *run) tag(round, idx int, kind uint32) transport.Tag {
	t := r.c.Tag
	t.Round = uint32(round) | uint32(idx)<<20 | kind<<28
	return t
}

func (r *run) sameContext(m gpu.Memory) bool {
	return m.OnDevice() && (m.Context == r.w.ctx || m.Context == 0 && m.Device == r.w.dev)
}

// order makes the call wait for the work the application queued before
// it on the legacy default stream and on the calling thread's per-thread
// default stream of the workspace's context (gocoll's streams are
// non-blocking and would not): an event recorded on each, waited for by
// the compute stream. That is enough for every stream: the first copies
// of the caller's buffers and every kernel are on the compute stream, and
// before each round's transfers the copy streams wait for a fence
// recorded on it (run.post), which direct and IPC peers wait for too
// (descSend). It runs on the thread that called Start, locked to it, the
// application's thread when called from C: the per-thread stream is that
// thread's.
func (r *run) order() error { return waitForApplication(r.drv, r.st) }

// waitForApplication makes st's compute stream wait for the work queued
// so far on the context's legacy default stream and on the calling
// thread's per-thread default stream: an event recorded on each (the
// thread's context must be st's).
func waitForApplication(drv gpu.Driver, st *state) error {
	var evs [2]gpu.Event
	defer func() {
		for _, ev := range evs {
			if ev != 0 {
				st.putEvents(ev)
			}
		}
	}()
	for i, s := range []gpu.Stream{gpu.StreamLegacy, gpu.StreamPerThread} {
		ev, err := st.event()
		if err != nil {
			return err
		}
		evs[i] = ev
		if err := drv.EventRecord(ev, s); err != nil {
			return fmt.Errorf("waiting for the application's default stream: %w", err)
		}
	}
	for _, ev := range evs {
		if err := drv.StreamWaitEvent(st.comp, ev); err != nil {
			return err
		}
	}
	return nil
}

// kernelAlign returns the alignment a reduction kernel needs of its
// operands: the size of its element type (the PTX loads and stores one
// element at a time, ld.global/st.global of 2, 4 or 8 bytes, which must
// be naturally aligned), or 1 when the call launches no kernel. step
// checks every launch's operands again: what staging cannot align (an
// in-place input at an odd offset into the output) is reduced on the
// host.
func (r *run) kernelAlign() uintptr {
	if r.c.Kernel == "" || r.c.Elem == gpu.ElemNone {
		return 1
	}
	return uintptr(r.c.Elem.Size())
}

// syncAll waits for everything queued on the state's streams, after a
// failure.
func (r *run) syncAll() {
	for _, s := range []gpu.Stream{r.st.up, r.st.down, r.st.comp} {
		if ev, err := r.event(); err == nil {
			if r.drv.EventRecord(ev, s) == nil {
				r.drv.EventSynchronize(ev)
			}
			r.putEvents(ev)
		}
	}
}

func (r *run) event() (gpu.Event, error) { return r.st.event() }

func (r *run) putEvents(evs ...gpu.Event) {
	r.st.putEvents(evs...)
}

// wait blocks until ev's work is done (waitEvent: it spins, then backs
// off; it never sleeps until an interrupt).
func (r *run) wait(ev gpu.Event) error { return r.st.waitEvent(r.drv, ev) }

// addr returns the device address of a range.
func (r *run) addr(rg schedule.Range) uintptr {
	off := uintptr(rg.Off * r.c.ElemSize)
	switch rg.Buf {
	case schedule.Input:
		return r.in + off
	case schedule.Output:
		return r.out + off
	}
	return r.scratch + off
}

// memOf returns the allocation behind a buffer.
func (r *run) memOf(b schedule.Buffer) gpu.Memory {
	switch b {
	case schedule.Input:
		return r.inMem
	case schedule.Output:
		return r.outMem
	}
	return r.scratchMem
}

// segments returns the number of segments of an n-byte message.
func (r *run) segments(n int) int { return (n + r.w.opts.Segment - 1) / r.w.opts.Segment }

// segment returns the offset and length of segment k of an n-byte message.
func (r *run) segment(k, n int) (int, int) {
	off := k * r.w.opts.Segment
	return off, min(r.w.opts.Segment, n-off)
}

// hostBytes views n bytes of host memory at p (pinned memory the driver
// allocated) as a slice.
func hostBytes(p uintptr, n int) []byte {
	return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&p))), n)
}

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
			// Poll every task a while before waiting on one. A yield
			// hands the locked thread over twice: only where the node is
			// crowded, and a peer (a goroutine rank, or a process on this
			// core) may need it to send what this rank waits for.
			if r.st.crowded {
				runtime.Gosched()
			}
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
