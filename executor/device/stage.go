package device

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/gocoll/gocoll/gpu"
)

// A Stage carries a call on device memory through pinned host memory:
// its input copied down, the call run on the host (coll's host-staged
// algorithm runs the shm engine there), its result copied up. For the
// smallest calls, where two copies cost less than any exchange through
// the GPU: on a GPU that several processes share time-sliced, a wait on a
// peer's flag costs a context switch, a copy does not. Every copy is on
// the executor's compute stream, after the application's work, and
// nothing waits for a peer.
type Stage struct {
	x  *Executor
	st *state
}

// Stage returns the executor's stage in the context of mem, with n bytes
// of pinned host memory (grown as calls need, kept until Close), and
// queues the copy of src, unless it is empty or host memory, into those
// bytes from at: after the work the application queued before the call,
// so it must run on the application's thread (its per-thread default
// stream). With wait, it waits for the copy (see Wait).
func (x *Executor) Stage(mem gpu.Memory, n int, src gpu.Buffer, at int, wait bool) (*Stage, []byte, error) {
	st, leave, err := x.state(mem)
	if err != nil {
		return nil, nil, err
	}
	defer leave()
	drv := st.w.drv
	if st.host.n < n {
		if st.host.ptr != 0 {
			if err := drv.MemFreeHost(st.host.ptr); err != nil {
				return nil, nil, err
			}
			st.host = devMem{}
		}
		p, err := drv.MemHostAlloc(n)
		if err != nil {
			return nil, nil, fmt.Errorf("pinned staging memory (%d bytes): %w", n, err)
		}
		st.host = devMem{ptr: p, n: n}
	}
	host := hostBytes(st.host.ptr, n)
	if src.Len > 0 && src.OnDevice() {
		if err := waitForApplication(drv, st); err != nil {
			return nil, nil, err
		}
		if err := drv.MemcpyAsync(st.host.ptr+uintptr(at), src.Ptr, src.Len, st.comp); err != nil {
			return nil, nil, err
		}
		if wait {
			if err := st.waitStream(drv); err != nil {
				return nil, nil, err
			}
		}
	}
	return &Stage{x: x, st: st}, host, nil
}

// Up queues the copy of src (host memory) into dst; with wait, it waits
// for it (see Wait).
func (s *Stage) Up(dst gpu.Buffer, src []byte, wait bool) error {
	return s.do(func(drv gpu.Driver) error {
		if len(src) > 0 {
			if err := drv.MemcpyAsync(dst.Ptr, uintptr(hostAddr(src)), len(src), s.st.comp); err != nil {
				return err
			}
		}
		if wait {
			return s.st.waitStream(drv)
		}
		return nil
	})
}

// Done reports whether the copies queued are done, without waiting.
func (s *Stage) Done() (done bool, err error) {
	err = s.do(func(drv gpu.Driver) error {
		var err error
		done, err = drv.StreamQuery(s.st.comp)
		return err
	})
	return done, err
}

// Wait waits for the copies queued (spinning, then backing off: see
// waitEvent).
func (s *Stage) Wait() error {
	return s.do(func(drv gpu.Driver) error { return s.st.waitStream(drv) })
}

func (s *Stage) do(f func(gpu.Driver) error) error {
	if s == nil || s.st == nil {
		return errors.New("device stage: not made (Executor.Stage)")
	}
	leave, err := s.st.w.enter()
	if err != nil {
		return err
	}
	defer leave()
	return f(s.st.w.drv)
}

// hostAddr is the address of host memory b, for a copy.
func hostAddr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }
