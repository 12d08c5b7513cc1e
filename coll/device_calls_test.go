package coll_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/executor/device"
	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/gpu/gputest/fake"
	"github.com/gocoll/gocoll/ops"
)

// The calls beyond the four collectives on (fake) device memory: MPI_Bcast,
// MPI_Reduce and MPI_Gather, and MPI_Allgatherv with displacements. Each
// runs the device route (the fake faults on any CPU access), over CUDA IPC
// and staged, with streams that run late at random.

// deviceSetups are the ways the device calls' tests run: IPC between the
// ranks' processes, and staged through pinned host memory.
var deviceSetups = []struct {
	name string
	s    gpuSetup
}{
	{"ipc", gpuSetup{opts: device.Options{Segment: 64, Depth: 2}}},
	{"staged", gpuSetup{noIPC: true, machine: fake.Options{Jitter: 20 * time.Microsecond}, opts: device.Options{Segment: 48, Depth: 3}}},
}

// devWith is n bytes of device memory holding data (nil: a pattern no
// result has).
func devWith(cm *coll.Comm, proc *fake.Process, dev, n int, data []byte) *gpu.Buffer {
	if data == nil {
		data = bytes.Repeat([]byte{0xa5}, n)
	}
	return devAlloc(cm, proc, dev, data, n)
}

// int32s is n little-endian int32 values f(i).
func int32s(n int, f func(i int) int) []byte {
	b := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(int32(f(i))))
	}
	return b
}

// MPI_Bcast, MPI_Reduce (a GPU op, a host-reduced op and the
// non-commutative user op) and MPI_Gather on device memory, from every
// root, in place at the root and not, on counts that split unevenly and a
// long one.
func TestDeviceRooted(t *testing.T) {
	for _, setup := range deviceSetups {
		for _, p := range []int{1, 2, 3, 4} {
			m := gpuJob(t, p, setup.s, func(cm *coll.Comm, proc *fake.Process, dev int) error {
				r := cm.Rank()
				for root := range p {
					for _, n := range []int{1, 2*p + 3, 37*p + 11} {
						for _, inPlace := range []bool{false, true} {
							if err := deviceRooted(cm, proc, dev, root, n, inPlace); err != nil {
								return fmt.Errorf("%s p=%d root %d count %d inplace=%v: %w", setup.name, p, root, n, inPlace, err)
							}
						}
					}
				}
				if r == 0 && cm.DeviceStats() == (device.Stats{}) && p > 1 {
					return fmt.Errorf("no transfer ran on the device executor")
				}
				return nil
			})
			if st := m.Stats(); p > 1 && st.DtoD+st.HtoD+st.DtoH == 0 {
				t.Errorf("%s p=%d: the fake saw no copy", setup.name, p)
			}
		}
	}
}

// deviceRooted runs the three rooted calls once on device memory and
// checks their results.
func deviceRooted(cm *coll.Comm, proc *fake.Process, dev, root, n int, inPlace bool) error {
	p, r := cm.Size(), cm.Rank()
	// Bcast
	want := int32s(n, func(i int) int { return i*31 + root })
	var data []byte
	if r == root {
		data = want
	}
	b := devWith(cm, proc, dev, 4*n, data)
	if err := cm.Bcast(coll.Args{RecvDevice: b, Count: n, Type: ops.Int32, Root: root}); err != nil {
		return fmt.Errorf("bcast: %w", err)
	}
	if !bytes.Equal(devRead(proc, b), want) {
		return fmt.Errorf("bcast: wrong bytes")
	}

	// Reduce: a sum on the GPU, a bitwise or on the host, the affine
	// map in rank order (on the host).
	for _, op := range []struct {
		typ ops.Type
		op  coll.Op
	}{
		{ops.Int32, coll.Op{Builtin: ops.Sum}},
		{ops.Int32, coll.Op{Builtin: ops.Bor}},
		{ops.TwoInt, coll.Op{User: func(ops.Type) ops.Kernel { return ops.UserKernel(affine, 8) }}},
	} {
		size := op.typ.Size()
		input := func(q int) []byte {
			return int32s(n*size/4, func(i int) int { return 1<<(q%8) + i*(q+2) })
		}
		k := ops.UserKernel(affine, 8)
		if op.op.User == nil {
			k, _ = ops.Lookup(op.op.Builtin, op.typ)
		}
		ref := bytes.Clone(input(0))
		for q := 1; q < p; q++ {
			k(ref, ref, input(q))
		}
		a := coll.Args{Count: n, Type: op.typ, Op: op.op, Root: root}
		if r == root && inPlace {
			a.InPlace, a.RecvDevice = true, devWith(cm, proc, dev, n*size, input(r))
		} else {
			a.SendDevice = devWith(cm, proc, dev, n*size, input(r))
			if r == root {
				a.RecvDevice = devWith(cm, proc, dev, n*size, nil)
			}
		}
		if err := cm.Reduce(a); err != nil {
			return fmt.Errorf("reduce %v: %w", op.typ, err)
		}
		if r == root && !bytes.Equal(devRead(proc, a.RecvDevice), ref) {
			return fmt.Errorf("reduce %v %v: wrong result", op.typ, op.op.Builtin)
		}
	}

	// Gather
	block := func(q int) []byte { return int32s(n, func(i int) int { return q*1000 + i }) }
	g := coll.Args{Count: n, Type: ops.Int32, Root: root}
	switch {
	case r == root && inPlace:
		all := bytes.Repeat([]byte{0xa5}, 4*n*p)
		copy(all[4*n*r:], block(r))
		g.InPlace, g.RecvDevice = true, devWith(cm, proc, dev, len(all), all)
	case r == root:
		g.SendDevice, g.RecvDevice = devWith(cm, proc, dev, 4*n, block(r)), devWith(cm, proc, dev, 4*n*p, nil)
	default:
		g.SendDevice = devWith(cm, proc, dev, 4*n, block(r))
	}
	if err := cm.Gather(g); err != nil {
		return fmt.Errorf("gather: %w", err)
	}
	if r == root {
		var want []byte
		for q := range p {
			want = append(want, block(q)...)
		}
		if !bytes.Equal(devRead(proc, g.RecvDevice), want) {
			return fmt.Errorf("gather: wrong blocks")
		}
	}
	return nil
}

// MPI_Allgatherv with displacements on device memory: blocks out of rank
// order with gaps (which must keep their bytes), different on every rank
// (MPI lets each rank place the blocks its own way), some empty, in place
// and not; the packed layout too, between displaced calls.
func TestDeviceAllgathervDisplaced(t *testing.T) {
	for _, setup := range deviceSetups {
		for _, p := range []int{1, 2, 3, 5} {
			gpuJob(t, p, setup.s, func(cm *coll.Comm, proc *fake.Process, dev int) error {
				for k, n := range []int{0, 3, 2*p + 1, 41} { // 0: every block empty
					counts := make([]int, p)
					for q := range counts {
						counts[q] = (q*n + k) % 4 * n / 3 // some zero
					}
					for _, layout := range []string{"displaced", "packed"} {
						for _, inPlace := range []bool{false, true} {
							what := fmt.Sprintf("%s p=%d counts %v %s inplace=%v", setup.name, p, counts, layout, inPlace)
							if err := deviceAllgatherv(cm, proc, dev, counts, layout == "packed", inPlace); err != nil {
								return fmt.Errorf("%s: %w", what, err)
							}
						}
					}
				}
				return nil
			})
		}
	}
}

// deviceAllgatherv runs one MPI_Allgatherv of blocks of counts int32s on
// device memory and checks every byte of the receive buffer.
func deviceAllgatherv(cm *coll.Comm, proc *fake.Process, dev int, counts []int, packed, inPlace bool) error {
	p, r := cm.Size(), cm.Rank()
	block := func(q int) []byte { return int32s(counts[q], func(i int) int { return q<<20 | i }) }
	// This rank's layout: the blocks in reverse rank order, shifted by
	// its rank, a gap of two elements after each.
	displs := make([]int, p)
	end := r
	for q := p - 1; q >= 0; q-- {
		displs[q] = end
		end += counts[q] + 2
	}
	if packed {
		end = 0
		for q := range p {
			displs[q] = end
			end += counts[q]
		}
	}
	want := bytes.Repeat([]byte{0xa5}, 4*end)
	for q := range p {
		copy(want[4*displs[q]:], block(q))
	}
	initial := bytes.Repeat([]byte{0xa5}, 4*end)
	a := coll.Args{Type: ops.Int32, Counts: counts, Displs: displs, InPlace: inPlace}
	if inPlace {
		copy(initial[4*displs[r]:], block(r))
	} else {
		a.SendDevice = devWith(cm, proc, dev, 4*counts[r], block(r))
	}
	a.RecvDevice = devWith(cm, proc, dev, 4*end, initial)
	if err := cm.Allgatherv(a); err != nil {
		return err
	}
	if got := devRead(proc, a.RecvDevice); !bytes.Equal(got, want) {
		for i := 0; i < len(got); i += 4 {
			if !bytes.Equal(got[i:i+4], want[i:i+4]) {
				return fmt.Errorf("element %d is %x, want %x (displs %v)", i/4, got[i:i+4], want[i:i+4], displs)
			}
		}
	}
	return nil
}

// A displaced MPI_Allgatherv on device memory whose temporary cannot be
// made fails with an MPI error naming the call, never a crash: the
// receive buffer names a context the driver does not know.
func TestDeviceAllgathervNoTemporary(t *testing.T) {
	gpuJob(t, 1, gpuSetup{}, func(cm *coll.Comm, proc *fake.Process, dev int) error {
		a := coll.Args{Type: ops.Int32, Counts: []int{2}, Displs: []int{1}, RecvDevice: devWith(cm, proc, dev, 12, nil),
			SendDevice: devWith(cm, proc, dev, 8, nil)}
		a.RecvDevice.Mem.Context = 0xdead
		err := cm.Allgatherv(a)
		if err == nil || !strings.Contains(err.Error(), "MPI_Allgatherv") || !strings.Contains(err.Error(), "device") {
			return fmt.Errorf("got %v, want an error naming MPI_Allgatherv and device memory", err)
		}
		return nil
	})
}
