package device

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/gocoll/gocoll/gpu"
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
	e   *Engine
	drv gpu.Driver
	c   *Call

	in, out, scratch          uintptr    // the schedule's buffers, in the engine's context
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
	return m.OnDevice() && (m.Context == r.e.ctx || m.Context == 0 && m.Device == r.e.dev)
}

// order makes the call wait for the work the application queued before
// it on the legacy default stream and on the calling thread's per-thread
// default stream of the engine's context (gocoll's streams are
// non-blocking and would not): an event recorded on each, waited for by
// the compute stream. That is enough for every stream: the first copies
// of the caller's buffers and every kernel are on the compute stream, and
// before each round's transfers the copy streams wait for a fence
// recorded on it (run.post), which direct and IPC peers wait for too
// (descSend). It runs on the thread that called Start, locked to it, the
// application's thread when called from C: the per-thread stream is that
// thread's.
func (r *run) order() error {
	var evs [2]gpu.Event
	defer func() {
		for _, ev := range evs {
			if ev != 0 {
				r.putEvents(ev)
			}
		}
	}()
	for i, s := range []gpu.Stream{gpu.StreamLegacy, gpu.StreamPerThread} {
		ev, err := r.event()
		if err != nil {
			return err
		}
		evs[i] = ev
		if err := r.drv.EventRecord(ev, s); err != nil {
			return fmt.Errorf("waiting for the application's default stream: %w", err)
		}
	}
	for _, ev := range evs {
		if err := r.drv.StreamWaitEvent(r.st.comp, ev); err != nil {
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

// wait blocks until ev's work is done: a few polls, then a blocking wait
// (the events are created with blocking sync, so the thread sleeps).
func (r *run) wait(ev gpu.Event) error {
	for range 20 {
		done, err := r.drv.EventQuery(ev)
		if err != nil || done {
			return err
		}
		runtime.Gosched()
	}
	return r.drv.EventSynchronize(ev)
}

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
func (r *run) segments(n int) int { return (n + r.e.opts.Segment - 1) / r.e.opts.Segment }

// segment returns the offset and length of segment k of an n-byte message.
func (r *run) segment(k, n int) (int, int) {
	off := k * r.e.opts.Segment
	return off, min(r.e.opts.Segment, n-off)
}

// hostBytes views n bytes of host memory at p (pinned memory the driver
// allocated) as a slice.
func hostBytes(p uintptr, n int) []byte {
	return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&p))), n)
}
