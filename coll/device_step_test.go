package coll_test

import (
	"fmt"
	"testing"

	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/executor/device"
	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/gpu/gputest/fake"
	"github.com/gocoll/gocoll/ops"
)

// gpuThreadJob is gpuJob (one fake process per rank, or one for all)
// with the progress goroutine on or off.
func gpuThreadJob(t *testing.T, p int, s gpuSetup, thread bool, f func(c *coll.Comm, proc *fake.Process, dev int) error) {
	t.Helper()
	s.thread = thread
	gpuJob(t, p, s, f)
}

// devAlloc copies data into new device memory of proc and returns it as
// the entries pass it to coll.
func devAlloc(c *coll.Comm, proc *fake.Process, dev int, data []byte, n int) *gpu.Buffer {
	ptr := proc.Malloc(dev, max(n, 1))
	if data != nil {
		proc.Write(ptr, data)
	}
	return devBuf(c, ptr, n)
}

// devRead reads a device buffer back.
func devRead(proc *fake.Process, b *gpu.Buffer) []byte {
	if b.Len == 0 {
		return nil
	}
	return proc.Read(b.Ptr, b.Len)
}

// Nonblocking calls on device memory run on the device executor's
// stepper, not offloaded: several in flight (allreduce with a GPU and a
// host reduction, reduce-scatter, reduce-scatter-block, allgather), a
// blocking call among them, completed by Test loops and Wait out of
// order; staged, over IPC, and between goroutines of one process, with
// and without the progress goroutine.
func TestDeviceNonblocking(t *testing.T) {
	setups := map[string]gpuSetup{"staged": {noIPC: true, opts: smallSegments}, "ipc": {}, "shared": {shared: true}}
	for name, s := range setups {
		for _, thread := range []bool{false, true} {
			for _, p := range []int{1, 2, 3, 4, 5} {
				for _, n := range []int{1, 37, 1000} {
					what := fmt.Sprintf("%s p=%d n=%d thread=%v", name, p, n, thread)
					gpuThreadJob(t, p, s, thread, func(c *coll.Comm, proc *fake.Process, dev int) error {
						err := deviceRequests(c, proc, dev, n)
						if err != nil {
							return fmt.Errorf("%s: %w", what, err)
						}
						return nil
					})
				}
			}
		}
	}
}

// smallSegments makes long messages travel in several staged segments.
var smallSegments = device.Options{Segment: 256, Depth: 2}

func deviceRequests(c *coll.Comm, proc *fake.Process, dev, n int) error {
	p, me := c.Size(), c.Rank()
	type req struct {
		name  string
		r     *coll.Request
		out   *gpu.Buffer
		check func(out []byte) error
	}
	var reqs []req
	add := func(name string, out *gpu.Buffer, check func([]byte) error, r *coll.Request, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		reqs = append(reqs, req{name, r, out, check})
		return nil
	}
	for k := range 2 {
		out := devAlloc(c, proc, dev, nil, 8*n)
		r, err := c.Iallreduce(coll.Args{SendDevice: devAlloc(c, proc, dev, rankVector(me, n, k), 8*n), RecvDevice: out, Count: n, Type: ops.Int64, Op: opSum})
		if err := add(fmt.Sprintf("iallreduce %d", k), out, func(b []byte) error { return sumOf(p, n, k, b) }, r, err); err != nil {
			return err
		}
	}
	// MPI_BAND on int64 has no GPU kernel: reduced on the host.
	band := devAlloc(c, proc, dev, nil, 8*n)
	r, err := c.Iallreduce(coll.Args{SendDevice: devAlloc(c, proc, dev, rankVector(me, n, 0), 8*n), RecvDevice: band, Count: n, Type: ops.Int64, Op: coll.Op{Builtin: ops.Band}})
	if err := add("iallreduce band", band, func(b []byte) error {
		for i := range n {
			want := int64(-1)
			for q := range p {
				want &= int64(q*1000 + i)
			}
			if got := int64At(b, i); got != want {
				return fmt.Errorf("element %d is %d, want %d", i, got, want)
			}
		}
		return nil
	}, r, err); err != nil {
		return err
	}
	// Reduce-scatter-block: block q of the sum.
	rsb := devAlloc(c, proc, dev, nil, 8*n)
	r, err = c.IreduceScatterBlock(coll.Args{SendDevice: devAlloc(c, proc, dev, rankVector(me, n*p, 3), 8*n*p), RecvDevice: rsb, Count: n, Type: ops.Int64, Op: opSum})
	if err := add("ireduce_scatter_block", rsb, func(b []byte) error {
		full := make([]int64, n*p)
		for i := range full {
			for q := range p {
				full[i] += int64(q*1000 + i + 3)
			}
		}
		return int64sEqual(b, full[me*n:(me+1)*n])
	}, r, err); err != nil {
		return err
	}
	// Reduce-scatter with uneven blocks.
	counts := make([]int, p)
	total := 0
	for q := range counts {
		counts[q] = n + q%2
		total += counts[q]
	}
	lo := 0
	for _, x := range counts[:me] {
		lo += x
	}
	rs := devAlloc(c, proc, dev, nil, 8*counts[me])
	r, err = c.IreduceScatter(coll.Args{SendDevice: devAlloc(c, proc, dev, rankVector(me, total, 5), 8*total), RecvDevice: rs, Counts: counts, Type: ops.Int64, Op: opSum})
	if err := add("ireduce_scatter", rs, func(b []byte) error {
		want := make([]int64, counts[me])
		for i := range want {
			for q := range p {
				want[i] += int64(q*1000 + lo + i + 5)
			}
		}
		return int64sEqual(b, want)
	}, r, err); err != nil {
		return err
	}
	gathered := devAlloc(c, proc, dev, nil, 8*n*p)
	r, err = c.Iallgather(coll.Args{SendDevice: devAlloc(c, proc, dev, rankVector(me, n, 9), 8*n), RecvDevice: gathered, Count: n, Type: ops.Int64})
	if err := add("iallgather", gathered, func(b []byte) error {
		var want []int64
		for q := range p {
			for i := range n {
				want = append(want, int64(q*1000+i+9))
			}
		}
		return int64sEqual(b, want)
	}, r, err); err != nil {
		return err
	}
	// A blocking call after them runs once they have.
	blocking := devAlloc(c, proc, dev, nil, 8*n)
	if err := c.Allreduce(coll.Args{SendDevice: devAlloc(c, proc, dev, rankVector(me, n, 7), 8*n), RecvDevice: blocking, Count: n, Type: ops.Int64, Op: opSum}); err != nil {
		return err
	}
	if err := sumOf(p, n, 7, devRead(proc, blocking)); err != nil {
		return fmt.Errorf("the blocking call: %w", err)
	}
	// Complete them out of order: Test loops for the even ones, Wait for
	// the odd ones, last first.
	for i := len(reqs) - 1; i >= 0; i-- {
		x := reqs[i]
		if i%2 == 0 {
			for {
				done, err := x.r.Test()
				if err != nil {
					return fmt.Errorf("%s: %w", x.name, err)
				}
				if done {
					break
				}
			}
		} else if err := x.r.Wait(); err != nil {
			return fmt.Errorf("%s: %w", x.name, err)
		}
		if x.r.Offloaded() {
			return fmt.Errorf("%s ran offloaded, not on the device stepper", x.name)
		}
		if err := x.check(devRead(proc, x.out)); err != nil {
			return fmt.Errorf("%s: %w", x.name, err)
		}
	}
	return nil
}

func int64sEqual(b []byte, want []int64) error {
	for i, w := range want {
		if got := int64At(b, i); got != w {
			return fmt.Errorf("element %d is %d, want %d", i, got, w)
		}
	}
	return nil
}

// Persistent requests on device memory: an allreduce and an allgather
// started together three times with new data each time, completed by
// Wait and by a Test loop, none offloaded.
func TestDevicePersistent(t *testing.T) {
	for name, s := range map[string]gpuSetup{"staged": {noIPC: true, opts: smallSegments}, "ipc": {}} {
		for _, p := range []int{1, 2, 3, 5} {
			const n = 300
			gpuJob(t, p, s, func(c *coll.Comm, proc *fake.Process, dev int) error {
				me := c.Rank()
				send, out := devAlloc(c, proc, dev, nil, 8*n), devAlloc(c, proc, dev, nil, 8*n)
				ar, err := c.AllreduceInit(coll.Args{SendDevice: send, RecvDevice: out, Count: n, Type: ops.Int64, Op: opSum})
				if err != nil {
					return err
				}
				gsend, gout := devAlloc(c, proc, dev, nil, 8*n), devAlloc(c, proc, dev, nil, 8*n*p)
				ag, err := c.AllgatherInit(coll.Args{SendDevice: gsend, RecvDevice: gout, Count: n, Type: ops.Int64})
				if err != nil {
					return err
				}
				for k := range 3 {
					proc.Write(send.Ptr, rankVector(me, n, k))
					proc.Write(gsend.Ptr, rankVector(me, n, 10*k))
					if err := ar.Start(); err != nil {
						return err
					}
					if err := ag.Start(); err != nil {
						return err
					}
					for done := false; !done; {
						if done, err = ag.Test(); err != nil {
							return err
						}
					}
					if err := ar.Wait(); err != nil {
						return err
					}
					if ar.Offloaded() || ag.Offloaded() {
						return fmt.Errorf("%s p=%d start %d: offloaded", name, p, k)
					}
					if err := sumOf(p, n, k, devRead(proc, out)); err != nil {
						return fmt.Errorf("%s p=%d start %d: allreduce: %w", name, p, k, err)
					}
					var want []int64
					for q := range p {
						for i := range n {
							want = append(want, int64(q*1000+i+10*k))
						}
					}
					if err := int64sEqual(devRead(proc, gout), want); err != nil {
						return fmt.Errorf("%s p=%d start %d: allgather: %w", name, p, k, err)
					}
				}
				return nil
			})
		}
	}
}
