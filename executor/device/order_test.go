package device_test

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"time"

	"go.uber.org/mock/gomock"

	"github.com/gocoll/gocoll/executor/device"
	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/gpu/gputest/fake"
	"github.com/gocoll/gocoll/gpu/gputest/mockgpu"
)

// Tests of how a device call lives with the application's own use of
// CUDA: it waits for the work queued on the default streams, never hands
// a kernel an address it cannot load, survives a driver that cannot load
// PTX, and holds the primary context it works in.

// encode writes values as elements of type e (f32 or f64).
func encode(e gpu.Elem, v []float64) []byte {
	b := make([]byte, e.Size()*len(v))
	for i, x := range v {
		if e == gpu.F64 {
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
		} else {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(x)))
		}
	}
	return b
}

func decode(e gpu.Elem, b []byte) []float64 {
	v := make([]float64, len(b)/e.Size())
	for i := range v {
		if e == gpu.F64 {
			v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		} else {
			v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
	}
	return v
}

// operands returns rank r's input values of the sendReduce tests, and
// their sum over both ranks.
func operands(r, n int) (v, sum []float64) {
	v, sum = make([]float64, n), make([]float64, n)
	for i := range v {
		v[i] = float64(i + 1 + 99*r)
		sum[i] = float64(2*i + 101)
	}
	return v, sum
}

// checkSum reads rank 1's output and compares it with want.
func checkSum(t *testing.T, p *fake.Process, e gpu.Elem, out uintptr, want []float64) {
	t.Helper()
	got := decode(e, p.Read(out, e.Size()*len(want)))
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("element %d = %v, want %v (of %d)", i, got[i], want[i], len(want))
		}
	}
}

// The application's work on its default streams, still in flight when it
// calls gocoll (a kernel, or cudaMemcpy from pageable memory that returned
// before its copy landed), is waited for: on the legacy default stream,
// and on the per-thread default stream of the thread that makes the call.
// The fake lands each write 50 ms late, on the default stream it names.
func TestDefaultStreamWorkIsSeen(t *testing.T) {
	for _, s := range []gpu.Stream{gpu.StreamLegacy, gpu.StreamPerThread} {
		t.Run(map[gpu.Stream]string{gpu.StreamLegacy: "legacy", gpu.StreamPerThread: "per-thread"}[s], func(t *testing.T) {
			const n = 300
			rs := pair(t, device.Options{Segment: 256})
			in := [2]uintptr{rs[0].proc.Malloc(0, 4*n), rs[1].proc.Malloc(0, 4*n)}
			out := rs[1].proc.Malloc(0, 4*n)
			_, want := operands(0, n)
			err := sumCall{n: n, seq: 1, in: in, out: out, before: func(r int) {
				v, _ := operands(r, n)
				rs[r].proc.AppWriteAsync(0, s, in[r], encode(gpu.F32, v), 50*time.Millisecond)
			}}.run(rs)
			if err != nil {
				t.Fatal(err)
			}
			checkSum(t, rs[1].proc, gpu.F32, out, want)
		})
	}
}

// On the mock: each call first records an event on the legacy default
// stream (CU_STREAM_LEGACY) and on the per-thread one (CU_STREAM_PER_THREAD),
// and the compute stream waits for both, before any copy or kernel of the
// call; the copy streams wait for the compute stream before their first
// copies (TestStagingReceiveThenReduce's fence), so nothing of the call
// reads or writes the caller's memory before the application's work on
// those streams is done.
func TestWaitsForDefaultStreams(t *testing.T) {
	prepare := func(m *mockgpu.MockDriver, p *fake.Process, tr *trace) {
		var comp gpu.Stream
		streams := 0
		m.EXPECT().StreamCreate().DoAndReturn(func() (gpu.Stream, error) {
			s, err := p.StreamCreate()
			if streams++; streams == 3 { // up, down, compute
				comp = s
			}
			return s, err
		}).Times(3)
		var evs [2]gpu.Event
		record := func(i int, s gpu.Stream) *gomock.Call {
			return m.EXPECT().EventRecord(gomock.Any(), s).DoAndReturn(func(e gpu.Event, s gpu.Stream) error {
				evs[i] = e
				tr.add("record-default %d", i)
				return p.EventRecord(e, s)
			})
		}
		wait := func(i int) *gomock.Call {
			onComp := gomock.Cond(func(s gpu.Stream) bool { return s == comp })
			recorded := gomock.Cond(func(e gpu.Event) bool { return e == evs[i] })
			return m.EXPECT().StreamWaitEvent(onComp, recorded).DoAndReturn(func(s gpu.Stream, e gpu.Event) error {
				tr.add("wait-default %d", i)
				return p.StreamWaitEvent(s, e)
			})
		}
		gomock.InOrder(record(0, gpu.StreamLegacy), record(1, gpu.StreamPerThread), wait(0), wait(1))
		m.EXPECT().Launch(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).
			DoAndReturn(func(f gpu.Function, grid, block int, s gpu.Stream, args ...uint64) error {
				tr.add("launch %#x", s)
				return p.Launch(f, grid, block, s, args...)
			}).AnyTimes()
		delegate(m, p, tr, "StreamCreate", "Launch")
	}
	rs := pair(t, device.Options{Segment: 64}, prepare, prepare)
	runPair(t, rs, 40, "gocoll_sum_f32", 1)
	for r, rk := range rs {
		waited := rk.tr.index("wait-default 1")
		first := len(rk.tr.log)
		for _, op := range []string{"memcpy ", "launch "} {
			if i := rk.tr.index(op); i >= 0 {
				first = min(first, i)
			}
		}
		if waited < 0 || waited > first {
			t.Errorf("rank %d: default streams waited for at %d, first copy or kernel at %d\n%s", r, waited, first, strings.Join(rk.tr.log, "\n"))
		}
	}
}
