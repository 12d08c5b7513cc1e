package device_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/executor/device"
	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/gpu/gputest/fake"
	"github.com/gocoll/gocoll/ops"
)

// Device buffers not aligned for their element type never reach a
// kernel: a misaligned load faults with CUDA_ERROR_MISALIGNED_ADDRESS,
// which is sticky and would leave the application's context unusable
// (the fake's Launch fails so, and poisons the context). They are
// copied into aligned temporaries (cuMemcpyAsync takes any address) and
// reduced there on the GPU: results right, in place and not, every
// offset below the element size, and the context usable afterwards.
func TestMisalignedBuffers(t *testing.T) {
	const n = 70
	rs := pair(t, device.Options{Segment: 128})
	p0, p1 := rs[0].proc, rs[1].proc
	v0, want := operands(0, n)
	v1, _ := operands(1, n)
	seq := uint32(0)
	launches := 0
	for _, e := range []gpu.Elem{gpu.F32, gpu.F64} {
		for _, off := range []uintptr{1, 2, uintptr(e.Size() - 1)} {
			for _, inPlace := range []bool{false, true} {
				name := fmt.Sprintf("%v offset %d in place %v", e, off, inPlace)
				size := e.Size() * n
				in := [2]uintptr{p0.Malloc(0, size+8) + off, p1.Malloc(0, size+8) + off}
				out := p1.Malloc(0, size+8) + off
				if inPlace {
					out = in[1]
				}
				p0.Write(in[0], encode(e, v0))
				p1.Write(in[1], encode(e, v1))
				seq++
				if err := (sumCall{n: n, elem: e, seq: seq, in: in, out: out}).run(rs); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				checkSum(t, p1, e, out, want)
				if err := p1.Poisoned(rs[1].rt.Classify(out).Context); err != nil {
					t.Fatalf("%s: the context is poisoned: %v", name, err)
				}
				launches++
			}
		}
	}
	// Still on the GPU, and the context still works.
	if s := rs[1].x.Stats(); s.GPUReduce != launches || s.HostReduce != 0 {
		t.Errorf("%+v: want %d reductions on the GPU", s, launches)
	}
	in := [2]uintptr{p0.Malloc(0, 4*n), p1.Malloc(0, 4*n)}
	out := p1.Malloc(0, 4*n)
	p0.Write(in[0], encode(gpu.F32, v0))
	p1.Write(in[1], encode(gpu.F32, v1))
	if err := (sumCall{n: n, seq: seq + 1, in: in, out: out}).run(rs); err != nil {
		t.Fatalf("aligned call after the misaligned ones: %v", err)
	}
	checkSum(t, p1, gpu.F32, out, want)
	for _, r := range rs {
		if err := r.x.Close(); err != nil {
			t.Error(err)
		}
	}
}

// A driver that cannot load gocoll's PTX (no JIT, JIT disabled, a driver
// older than the PTX) does not fail the call: reductions run on the host,
// with one warning per process naming the driver's error, and the
// module is not asked for again.
func TestModuleLoadFailureFallsBackToHost(t *testing.T) {
	var warn bytes.Buffer
	defer device.SetWarnOutput(&warn)()
	m := fake.NewMachine(fake.Options{ModuleLoadError: gpu.ErrorJITCompilationDisabled})
	rs := pairOn(t, m, device.Options{Segment: 64})
	const calls = 3
	for seq := range uint32(calls) {
		runPair(t, rs, 40, "gocoll_sum_f32", seq+1)
	}
	if s := rs[1].x.Stats(); s.HostReduce != calls || s.GPUReduce != 0 {
		t.Errorf("%+v: want %d host reductions", s, calls)
	}
	if l := m.Stats().Launches; len(l) != 0 {
		t.Errorf("kernels launched: %v", l)
	}
	out := warn.String()
	if strings.Count(out, "gocoll: warning") != 1 || !strings.Contains(out, "CUDA_ERROR_JIT_COMPILATION_DISABLED") ||
		!strings.Contains(out, "reductions on device buffers run on the host") {
		t.Errorf("want one warning naming the driver's error, got %q", out)
	}
	for _, r := range rs {
		if err := r.x.Close(); err != nil {
			t.Error(err)
		}
	}
}

// The workspace retains the primary context it works in, for its lifetime:
// the application releasing its own reference (the fake's AppRelease,
// which destroys a primary context nobody else holds) does not pull the
// context from under gocoll's streams, memory and module; closing the
// executors releases the retain, and then the context is gone.
func TestPrimaryContextRetained(t *testing.T) {
	rs := pair(t, device.Options{})
	runPair(t, rs, 16, "gocoll_sum_f32", 1)
	for r, rk := range rs {
		if got := rk.proc.PrimaryRetains(0); got != 1 {
			t.Errorf("rank %d: primary context retained %d times, want 1", r, got)
		}
		rk.proc.AppRelease(0)
	}
	runPair(t, rs, 16, "gocoll_sum_f32", 2)
	for r, rk := range rs {
		if err := rk.x.Close(); err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
		if got := rk.proc.PrimaryRetains(0); got != 0 {
			t.Errorf("rank %d: %d retains left after Close", r, got)
		}
		if on, _ := rk.proc.PrimaryContextActive(0); on {
			t.Errorf("rank %d: the primary context is still active after gocoll and the application let it go", r)
		}
	}
}

// A context the application made itself (cuCtxCreate) is not retained:
// the workspace's probe of the primary context is released at once, and the
// call runs in the buffers' context.
func TestUserContextNotRetained(t *testing.T) {
	const n = 16
	rs := pair(t, device.Options{})
	ctx := rs[1].proc.CtxCreate(0)
	bufs := []uintptr{rs[0].proc.Malloc(0, 4*n), rs[1].proc.MallocIn(ctx, 4*n), rs[1].proc.MallocIn(ctx, 4*n)}
	if got := rs[1].rt.Classify(bufs[1]).Context; got != ctx {
		t.Fatalf("buffer in context %#x, want %#x", got, ctx)
	}
	runPair(t, rs, n, "gocoll_sum_f32", 1, bufs...)
	if got := rs[1].proc.PrimaryRetains(0); got != 0 {
		t.Errorf("primary context retained %d times by a workspace in the application's own context", got)
	}
	if got := rs[0].proc.PrimaryRetains(0); got != 1 {
		t.Errorf("rank 0: primary context retained %d times, want 1", got)
	}
	for r, rk := range rs {
		if err := rk.x.Close(); err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// What staging cannot align, an in-place input at an offset into the
// output that is not a multiple of the element size (MPI_IN_PLACE never
// makes one), is reduced on the host: still no kernel sees a misaligned
// address.
func TestMisalignedInPlaceOffsetReducesOnHost(t *testing.T) {
	const n = 40
	rs := pair(t, device.Options{Segment: 64})
	p0, p1 := rs[0].proc, rs[1].proc
	v0, _ := operands(0, n)
	in0 := p0.Malloc(0, 4*n)
	p0.Write(in0, encode(gpu.F32, v0))
	out := p1.Malloc(0, 4*n+8)
	init := make([]byte, 4*n+4)
	for i := range init {
		init[i] = byte(i%7) + 0x3c // small positive floats at any 4-byte window
	}
	p1.Write(out, init)
	in1 := out + 2 // in place, 2 bytes into the output
	k, _ := ops.Lookup(ops.Sum, ops.Float)
	want := make([]byte, 4*n)
	k(want, init[2:2+4*n], encode(gpu.F32, v0))

	if err := (sumCall{n: n, seq: 1, in: [2]uintptr{in0, in1}, out: out, outLen: 4*n + 4}).run(rs); err != nil {
		t.Fatal(err)
	}
	if got := p1.Read(out, 4*n); !bytes.Equal(got, want) {
		t.Errorf("result %x\nwant   %x", got, want)
	}
	if s := rs[1].x.Stats(); s.HostReduce != 1 || s.GPUReduce != 0 {
		t.Errorf("%+v: want the reduction on the host", s)
	}
	if err := p1.Poisoned(rs[1].rt.Classify(out).Context); err != nil {
		t.Errorf("the context is poisoned: %v", err)
	}
}
