package device

import (
	"errors"

	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/schedule"
	"github.com/gocoll/gocoll/transport"
)

// step applies a local step on the compute stream: a copy device to
// device, or a reduction by a GPU kernel; or returns the task of a
// reduction on the host (no kernel for the op and type, operands not
// aligned for one, or no module: see workspace.function).
func (r *run) step(s schedule.Step) (task, error) {
	c, drv, comp := r.c, r.drv, r.st.comp
	dst, a := r.addr(s.Dst), r.addr(s.A)
	n := s.Dst.Len * c.ElemSize
	if s.Kind == schedule.Copy {
		if dst == a {
			return nil, nil
		}
		return nil, drv.MemcpyAsync(dst, a, n, comp)
	}
	b := r.addr(s.B)
	f, onGPU, err := r.kernel(dst, a, b)
	if err != nil {
		return nil, err
	}
	if !onGPU {
		if c.Reduce == nil {
			return nil, errors.New("device executor: a reduce step without a kernel")
		}
		r.x.count(func(s *Stats) { s.HostReduce++ })
		return r.hostReduce(dst, a, b, n)
	}
	elems := n / c.Elem.Size()
	block := r.w.opts.Block
	grid := min((elems+block-1)/block, r.w.opts.MaxGrid)
	r.x.count(func(s *Stats) { s.GPUReduce++ })
	return nil, drv.Launch(f, max(grid, 1), block, comp, uint64(dst), uint64(a), uint64(b), uint64(elems))
}

// kernel returns the GPU kernel of a reduce step on dst, a and b, or
// false when the step reduces on the host: the call's op and type have
// no kernel, an operand is not aligned for one (a misaligned access would
// fault and poison the application's context, CUDA_ERROR_MISALIGNED_ADDRESS
// being sticky; run stages misaligned buffers, so only an in-place input
// at an odd offset into the output comes here), or the driver could not
// load the module (workspace.function warned once).
func (r *run) kernel(dst, a, b uintptr) (gpu.Function, bool, error) {
	if r.c.Kernel == "" || (dst|a|b)%r.kernelAlign() != 0 {
		return 0, false, nil
	}
	f, err := r.w.function(r.c.Kernel)
	if nk := (*errNoKernels)(nil); errors.As(err, &nk) {
		return 0, false, nil
	}
	return f, err == nil, err
}

// hostReduce sets dst = a op b (n bytes of device memory) with the host
// kernel, a segment at a time through pinned slots, double-buffered: the
// copies down of segment k+1 are queued before segment k is reduced, and
// its copy up after, all on the compute stream, whose order keeps every
// slot's uses apart. The task ends once the slots' last copies up have
// completed.
type hostReduce struct {
	r         *run
	dst, a, b uintptr
	n, seg, K int
	slots     []uintptr
	evs       []gpu.Event
	k         int  // the next segment to reduce
	downed    int  // segments whose copies down are queued
	end       bool // the slots' last use is marked
	landed    int  // end events completed
}

func (r *run) hostReduce(dst, a, b uintptr, n int) (task, error) {
	size := r.c.ElemSize
	seg := r.w.opts.Segment - r.w.opts.Segment%size
	if seg == 0 {
		return nil, errors.New("device executor: an element is larger than a staging segment (raise the segment size)")
	}
	h := &hostReduce{r: r, dst: dst, a: a, b: b, n: n, seg: seg, K: (n + seg - 1) / seg}
	var err error
	if h.slots, err = r.w.getSlots(4); err != nil { // a and b, twice
		return nil, err
	}
	for range 2 {
		ev, err := r.event()
		if err != nil {
			h.release()
			return nil, err
		}
		h.evs = append(h.evs, ev)
	}
	if h.K > 0 {
		if err := h.down(0); err != nil {
			h.fail()
			return nil, err
		}
	}
	return h, nil
}

func (h *hostReduce) span(k int) (int, int) { off := k * h.seg; return off, min(h.seg, h.n-off) }

// down queues the copies down of segment k into its slots.
func (h *hostReduce) down(k int) error {
	drv, comp := h.r.drv, h.r.st.comp
	off, l := h.span(k)
	x, y := h.slots[2*(k%2)], h.slots[2*(k%2)+1]
	if err := drv.MemcpyAsync(x, h.a+uintptr(off), l, comp); err != nil {
		return err
	}
	if err := drv.MemcpyAsync(y, h.b+uintptr(off), l, comp); err != nil {
		return err
	}
	h.downed = k + 1
	return drv.EventRecord(h.evs[k%2], comp)
}

func (h *hostReduce) poll() (done, moved bool, err error) {
	drv, comp := h.r.drv, h.r.st.comp
	for h.k < h.K {
		k := h.k
		if h.downed == k+1 && k+1 < h.K {
			if err := h.down(k + 1); err != nil {
				return h.fail(err)
			}
			moved = true
		}
		ok, err := drv.EventQuery(h.evs[k%2])
		if err != nil {
			return h.fail(err)
		}
		if !ok {
			return false, moved, nil
		}
		off, l := h.span(k)
		x, y := hostBytes(h.slots[2*(k%2)], l), hostBytes(h.slots[2*(k%2)+1], l)
		h.r.c.Reduce(x, x, y)
		if err := drv.MemcpyAsync(h.dst+uintptr(off), h.slots[2*(k%2)], l, comp); err != nil {
			return h.fail(err)
		}
		h.k++
		moved = true
	}
	if !h.end {
		for _, ev := range h.evs { // mark the end of the slots' use
			if err := drv.EventRecord(ev, comp); err != nil {
				return h.fail(err)
			}
		}
		h.end, moved = true, true
	}
	for ; h.landed < len(h.evs); h.landed++ {
		ok, err := drv.EventQuery(h.evs[h.landed])
		if err != nil {
			return h.fail(err)
		}
		if !ok {
			return false, moved, nil
		}
	}
	h.release()
	return true, true, nil
}

func (h *hostReduce) next() (gpu.Event, []transport.Op) {
	if h.k < h.K {
		return h.evs[h.k%2], nil
	}
	if h.end && h.landed < len(h.evs) {
		return h.evs[h.landed], nil
	}
	return 0, nil
}

// fail ends the task after a failure, once the GPU is done with the slots.
func (h *hostReduce) fail(errs ...error) (bool, bool, error) {
	for _, ev := range h.evs {
		h.r.drv.EventSynchronize(ev)
	}
	h.release()
	return true, true, errors.Join(errs...)
}

func (h *hostReduce) release() {
	if h.slots != nil {
		h.r.w.putSlots(h.slots)
		h.slots = nil
	}
	h.r.putEvents(h.evs...)
	h.evs = nil
}
