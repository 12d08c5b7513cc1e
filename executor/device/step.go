package device

import (
	"errors"

	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/schedule"
)

// step applies a local step on the compute stream: a copy device to
// device, or a reduction by a GPU kernel, or on the host (no kernel for
// the op and type, operands not aligned for one, or no module: see
// Engine.function).
func (r *run) step(s schedule.Step) error {
	c, drv, comp := r.c, r.drv, r.st.comp
	dst, a := r.addr(s.Dst), r.addr(s.A)
	n := s.Dst.Len * c.ElemSize
	if s.Kind == schedule.Copy {
		if dst == a {
			return nil
		}
		return drv.MemcpyAsync(dst, a, n, comp)
	}
	b := r.addr(s.B)
	f, onGPU, err := r.kernel(dst, a, b)
	if err != nil {
		return err
	}
	if !onGPU {
		if c.Reduce == nil {
			return errors.New("device executor: a reduce step without a kernel")
		}
		r.x.count(func(s *Stats) { s.HostReduce++ })
		return r.hostReduce(dst, a, b, n)
	}
	elems := n / c.Elem.Size()
	block := r.e.opts.Block
	grid := min((elems+block-1)/block, r.e.opts.MaxGrid)
	r.x.count(func(s *Stats) { s.GPUReduce++ })
	return drv.LaunchKernel(f, max(grid, 1), block, comp, dst, a, b, elems)
}

// kernel returns the GPU kernel of a reduce step on dst, a and b, or
// false when the step reduces on the host: the call's op and type have
// no kernel, an operand is not aligned for one (a misaligned access would
// fault and poison the application's context, CUDA_ERROR_MISALIGNED_ADDRESS
// being sticky; run stages misaligned buffers, so only an in-place input
// at an odd offset into the output comes here), or the driver could not
// load the module (Engine.function warned once).
func (r *run) kernel(dst, a, b uintptr) (gpu.Function, bool, error) {
	if r.c.Kernel == "" || (dst|a|b)%r.kernelAlign() != 0 {
		return 0, false, nil
	}
	f, err := r.e.function(r.c.Kernel)
	if nk := (*errNoKernels)(nil); errors.As(err, &nk) {
		return 0, false, nil
	}
	return f, err == nil, err
}

// hostReduce sets dst = a op b (n bytes of device memory) with the host
// kernel, a segment at a time through pinned memory, double-buffered: the
// copies down of segment k+1 are queued before segment k is reduced, and
// its copy up after, all on the compute stream, whose order keeps every
// slot's uses apart.
func (r *run) hostReduce(dst, a, b uintptr, n int) error {
	c, drv, comp := r.c, r.drv, r.st.comp
	size := c.ElemSize
	seg := r.e.opts.Segment - r.e.opts.Segment%size
	if seg == 0 {
		return errors.New("device executor: an element is larger than a staging segment (raise the segment size)")
	}
	K := (n + seg - 1) / seg
	slots, err := r.e.getSlots(4) // a and b, twice
	if err != nil {
		return err
	}
	defer r.e.putSlots(slots)
	evs := make([]gpu.Event, 0, 2)
	defer func() {
		for _, ev := range evs {
			drv.EventSynchronize(ev) // the slots' last copies up are done
			r.putEvents(ev)
		}
	}()
	for range 2 {
		ev, err := r.event()
		if err != nil {
			return err
		}
		evs = append(evs, ev)
	}
	span := func(k int) (int, int) { off := k * seg; return off, min(seg, n-off) }
	down := func(k int) error {
		off, l := span(k)
		x, y := slots[2*(k%2)], slots[2*(k%2)+1]
		if err := drv.MemcpyAsync(x, a+uintptr(off), l, comp); err != nil {
			return err
		}
		if err := drv.MemcpyAsync(y, b+uintptr(off), l, comp); err != nil {
			return err
		}
		return drv.EventRecord(evs[k%2], comp)
	}
	if err := down(0); err != nil {
		return err
	}
	for k := range K {
		if k+1 < K {
			if err := down(k + 1); err != nil {
				return err
			}
		}
		if err := r.wait(evs[k%2]); err != nil {
			return err
		}
		off, l := span(k)
		x, y := hostBytes(slots[2*(k%2)], l), hostBytes(slots[2*(k%2)+1], l)
		c.Reduce(x, x, y)
		if err := drv.MemcpyAsync(dst+uintptr(off), slots[2*(k%2)], l, comp); err != nil {
			return err
		}
	}
	for i := range evs { // mark the end of the slots' use
		if err := drv.EventRecord(evs[i], comp); err != nil {
			return err
		}
	}
	return nil
}
