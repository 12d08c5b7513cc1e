package device_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/mock/gomock"

	"github.com/gocoll/gocoll/executor/device"
	"github.com/gocoll/gocoll/executor/host"
	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/gpu/gputest/fake"
	"github.com/gocoll/gocoll/gpu/gputest/mockgpu"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/schedule"
	"github.com/gocoll/gocoll/transport"
	"github.com/gocoll/gocoll/transport/inproc"
)

// trace is the order of what happened on one rank: driver calls (through
// the mock) and transport operations (through tracer).
type trace struct {
	mu  sync.Mutex
	log []string
}

func (t *trace) add(format string, a ...any) {
	t.mu.Lock()
	t.log = append(t.log, fmt.Sprintf(format, a...))
	t.mu.Unlock()
}

// index returns the position of the first entry with the prefix, or -1.
func (t *trace) index(prefix string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.IndexFunc(t.log, func(s string) bool { return strings.HasPrefix(s, prefix) })
}

// tracer is a transport that records its sends and completed receives.
type tracer struct {
	transport.Transport
	tr *trace
}

func (t tracer) Start(ops []transport.Op) error {
	for _, op := range ops {
		if !op.Recv {
			t.tr.add("send %d round %x", len(op.Buf), op.Tag.Round)
		}
	}
	return t.Transport.Start(ops)
}

func (t tracer) Wait(ops []transport.Op) error {
	err := t.Transport.Wait(ops)
	for _, op := range ops {
		if op.Recv {
			t.tr.add("received %d round %x", op.N, op.Tag.Round)
		}
	}
	return err
}

func (t tracer) Test(ops []transport.Op) (bool, error) {
	done, err := t.Transport.Test(ops)
	if done {
		for _, op := range ops {
			if op.Recv {
				t.tr.add("received %d round %x", op.N, op.Tag.Round)
			}
		}
	}
	return done, err
}

// delegate makes every call of m, except those named in skip, run on the
// fake process p, recording the ones whose order matters.
func delegate(m *mockgpu.MockDriver, p *fake.Process, tr *trace, skip ...string) {
	any := gomock.Any()
	do := func(name string) bool { return !slices.Contains(skip, name) }
	m.EXPECT().Init().DoAndReturn(p.Init).AnyTimes()
	m.EXPECT().DeviceCount().DoAndReturn(p.DeviceCount).AnyTimes()
	m.EXPECT().DevicePCIBusID(any).DoAndReturn(p.DevicePCIBusID).AnyTimes()
	m.EXPECT().DeviceByPCIBusID(any).DoAndReturn(p.DeviceByPCIBusID).AnyTimes()
	m.EXPECT().CanAccessPeer(any, any).DoAndReturn(p.CanAccessPeer).AnyTimes()
	m.EXPECT().PrimaryContextActive(any).DoAndReturn(p.PrimaryContextActive).AnyTimes()
	m.EXPECT().PrimaryContextRetain(any).DoAndReturn(p.PrimaryContextRetain).AnyTimes()
	m.EXPECT().PrimaryContextRelease(any).DoAndReturn(p.PrimaryContextRelease).AnyTimes()
	m.EXPECT().CurrentContext().DoAndReturn(p.CurrentContext).AnyTimes()
	m.EXPECT().SetCurrentContext(any).DoAndReturn(p.SetCurrentContext).AnyTimes()
	m.EXPECT().PointerAttributes(any).DoAndReturn(p.PointerAttributes).AnyTimes()
	m.EXPECT().MemAlloc(any).DoAndReturn(p.MemAlloc).AnyTimes()
	m.EXPECT().MemFree(any).DoAndReturn(p.MemFree).AnyTimes()
	m.EXPECT().MemHostAlloc(any).DoAndReturn(p.MemHostAlloc).AnyTimes()
	m.EXPECT().MemFreeHost(any).DoAndReturn(p.MemFreeHost).AnyTimes()
	if do("MemcpyAsync") {
		m.EXPECT().MemcpyAsync(any, any, any, any).DoAndReturn(func(dst, src uintptr, n int, s gpu.Stream) error {
			tr.add("memcpy %#x %#x %d %#x", dst, src, n, s)
			return p.MemcpyAsync(dst, src, n, s)
		}).AnyTimes()
	}
	if do("StreamCreate") {
		m.EXPECT().StreamCreate().DoAndReturn(p.StreamCreate).AnyTimes()
	}
	m.EXPECT().StreamDestroy(any).DoAndReturn(p.StreamDestroy).AnyTimes()
	m.EXPECT().StreamWaitEvent(any, any).DoAndReturn(func(s gpu.Stream, e gpu.Event) error {
		tr.add("streamwait %#x %#x", s, e)
		return p.StreamWaitEvent(s, e)
	}).AnyTimes()
	m.EXPECT().EventCreate().DoAndReturn(p.EventCreate).AnyTimes()
	m.EXPECT().EventDestroy(any).DoAndReturn(p.EventDestroy).AnyTimes()
	if do("EventRecord") {
		m.EXPECT().EventRecord(any, any).DoAndReturn(func(e gpu.Event, s gpu.Stream) error {
			tr.add("record %#x %#x", e, s)
			return p.EventRecord(e, s)
		}).AnyTimes()
	}
	m.EXPECT().EventQuery(any).DoAndReturn(func(e gpu.Event) (bool, error) {
		done, err := p.EventQuery(e)
		if done {
			tr.add("done %#x", e)
		}
		return done, err
	}).AnyTimes()
	m.EXPECT().EventSynchronize(any).DoAndReturn(func(e gpu.Event) error {
		err := p.EventSynchronize(e)
		tr.add("done %#x", e)
		return err
	}).AnyTimes()
	m.EXPECT().ModuleLoadData(any).DoAndReturn(p.ModuleLoadData).AnyTimes()
	m.EXPECT().ModuleGetFunction(any, any).DoAndReturn(p.ModuleGetFunction).AnyTimes()
	m.EXPECT().ModuleUnload(any).DoAndReturn(p.ModuleUnload).AnyTimes()
	if do("Launch") {
		m.EXPECT().Launch(any, any, any, any, any, any, any, any).DoAndReturn(p.Launch).AnyTimes()
	}
	if do("IpcGetMemHandle") {
		m.EXPECT().IpcGetMemHandle(any).DoAndReturn(p.IpcGetMemHandle).AnyTimes()
	}
	if do("IpcOpenMemHandle") {
		m.EXPECT().IpcOpenMemHandle(any).DoAndReturn(p.IpcOpenMemHandle).AnyTimes()
	}
	if do("IpcCloseMemHandle") {
		m.EXPECT().IpcCloseMemHandle(any).DoAndReturn(p.IpcCloseMemHandle).AnyTimes()
	}
}

// loud reports a failed expectation and panics: the mock is called from
// the executor's goroutines, where the default t.Fatalf would stop one of
// them silently and leave the others waiting for it.
type loud struct{ *testing.T }

func (l loud) Fatalf(format string, a ...any) {
	l.T.Errorf(format, a...)
	panic(fmt.Sprintf("gomock: "+format, a...))
}

// rank is one side of a two-rank test.
type rank struct {
	proc *fake.Process
	rt   *gpu.Runtime
	tr   *trace
	mock *mockgpu.MockDriver
	t    transport.Transport
	x    *device.Executor
}

// pair makes two ranks on one fake node; rank r's driver is a mock that
// delegates to its fake process (prepare adds expectations first).
func pair(t *testing.T, opts device.Options, prepare ...func(m *mockgpu.MockDriver, p *fake.Process, tr *trace)) [2]*rank {
	return pairOn(t, fake.NewMachine(fake.Options{}), opts, prepare...)
}

// pairOn is pair on the fake node m.
func pairOn(t *testing.T, m *fake.Machine, opts device.Options, prepare ...func(m *mockgpu.MockDriver, p *fake.Process, tr *trace)) [2]*rank {
	eps := inproc.New(2)
	var rs [2]*rank
	for r := range 2 {
		rk := &rank{proc: m.NewProcess(), tr: &trace{}}
		rk.proc.AppInit(0)
		var drv gpu.Driver = rk.proc
		if r < len(prepare) && prepare[r] != nil {
			rk.mock = mockgpu.NewMockDriver(gomock.NewController(loud{t}))
			prepare[r](rk.mock, rk.proc, rk.tr)
			drv = rk.mock
		}
		rt, err := gpu.NewRuntime(drv, gpu.Auto)
		if err != nil {
			t.Fatal(err)
		}
		rk.rt, rk.t = rt, tracer{eps[r], rk.tr}
		rk.x = device.New(rt, opts, nil)
		rs[r] = rk
	}
	return rs
}

// floats writes float32 values into device memory.
func floats(p *fake.Process, ptr uintptr, v ...float32) {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	p.Write(ptr, b)
}

func readFloats(p *fake.Process, ptr uintptr, n int) []float32 {
	b := p.Read(ptr, 4*n)
	v := make([]float32, n)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// sendReduce is the one-round schedule pair of these tests: rank 0 sends
// its input; rank 1 receives it into scratch and reduces it into its
// output.
func sendReduce(n int) [2]*schedule.Schedule {
	var b0, b1 schedule.Builder
	b0.Next().Send(1, schedule.Range{Buf: schedule.Input, Len: n})
	b1.Next().Recv(0, schedule.Range{Buf: schedule.Scratch, Len: n}).
		Reduce(schedule.Range{Buf: schedule.Output, Len: n}, schedule.Range{Buf: schedule.Input, Len: n}, schedule.Range{Buf: schedule.Scratch, Len: n})
	b1.Scratch(n)
	return [2]*schedule.Schedule{b0.Schedule(), b1.Schedule()}
}

// sumCall is one call of sendReduce with MPI_SUM: rank 0 sends in[0];
// rank 1 sets out = in[1] + what it received.
type sumCall struct {
	n      int      // elements
	elem   gpu.Elem // their type: F32 or F64 (default F32)
	seq    uint32
	in     [2]uintptr
	out    uintptr
	outLen int  // bytes of rank 1's output buffer (default n elements)
	host   bool // reduce with the host kernel, not on the GPU
	// before(r), when set, runs on rank r's goroutine, locked to its OS
	// thread, just before Run on that thread.
	before func(r int)
}

// run runs the call on both ranks at once and returns the first rank's
// error, naming the rank.
func (sc sumCall) run(rs [2]*rank) error {
	e := sc.elem
	if e == 0 {
		e = gpu.F32
	}
	t := map[gpu.Elem]ops.Type{gpu.F32: ops.Float, gpu.F64: ops.Double}[e]
	k, err := ops.Lookup(ops.Sum, t)
	if err != nil {
		return err
	}
	size := e.Size()
	outLen := sc.outLen
	if outLen == 0 {
		outLen = size * sc.n
	}
	sch := sendReduce(sc.n)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			c := &device.Call{Sched: sch[r], ElemSize: size, Reduce: host.Kernel(k), T: rs[r].t, Ranks: []int{0, 1},
				Tag: transport.Tag{Context: 1, Seq: sc.seq}}
			if !sc.host {
				c.Kernel, c.Elem = gpu.KernelName(ops.Sum, e), e
			}
			c.In = gpu.Buffer{Ptr: sc.in[r], Len: size * sc.n, Mem: rs[r].rt.Classify(sc.in[r])}
			if r == 1 {
				c.Out = gpu.Buffer{Ptr: sc.out, Len: outLen, Mem: rs[r].rt.Classify(sc.out)}
			}
			if sc.before != nil {
				sc.before(r)
			}
			errs[r] = rs[r].x.Run(c)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
	}
	return nil
}

// runPair runs one call of sendReduce on both ranks: rank 0's input
// holds 1..n, rank 1's 100..; returns rank 1's output.
func runPair(t *testing.T, rs [2]*rank, n int, kernel string, seq uint32, bufs ...uintptr) []float32 {
	t.Helper()
	var in [2]uintptr
	var out uintptr
	if len(bufs) == 3 {
		in[0], in[1], out = bufs[0], bufs[1], bufs[2]
	} else {
		in[0], in[1], out = rs[0].proc.Malloc(0, 4*n), rs[1].proc.Malloc(0, 4*n), rs[1].proc.Malloc(0, 4*n)
	}
	for r := range 2 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(i + 1 + 99*r)
		}
		floats(rs[r].proc, in[r], v...)
	}
	if kernel != "" && kernel != gpu.KernelName(ops.Sum, gpu.F32) {
		t.Fatalf("runPair sums float32: kernel %q", kernel)
	}
	if err := (sumCall{n: n, seq: seq, in: in, out: out, host: kernel == ""}).run(rs); err != nil {
		t.Fatal(err)
	}
	got := readFloats(rs[1].proc, out, n)
	for i, v := range got {
		if want := float32(2*i + 101); v != want {
			t.Fatalf("element %d = %v, want %v", i, v, want)
		}
	}
	return got
}

// Staging, sender side: a message of 2.5 segments is copied down in three
// segments, in order, into two pinned slots used in turn, each followed by
// an event on the same stream; each segment goes on the wire only after
// its event has completed.
func TestStagingSegments(t *testing.T) {
	const seg, n = 64, 40 // 160 bytes: 64 + 64 + 32
	var down gpu.Stream
	var src uintptr
	var slot [3]uintptr
	onDown := gomock.Cond(func(s gpu.Stream) bool { return s == down })
	offDown := gomock.Cond(func(s gpu.Stream) bool { return s != down })
	rs := pair(t, device.Options{Segment: seg, Depth: 2}, func(m *mockgpu.MockDriver, p *fake.Process, tr *trace) {
		streams := 0
		m.EXPECT().StreamCreate().DoAndReturn(func() (gpu.Stream, error) {
			s, err := p.StreamCreate()
			if streams++; streams == 2 { // up, down, compute
				down = s
			}
			return s, err
		}).Times(3)
		copyDown := func(k, length int) *gomock.Call {
			return m.EXPECT().MemcpyAsync(gomock.Any(), gomock.Any(), length, onDown).DoAndReturn(func(dst, s uintptr, l int, st gpu.Stream) error {
				if k == 0 {
					src = s
				}
				slot[k] = dst
				tr.add("copy-down %d", k)
				return p.MemcpyAsync(dst, s, l, st)
			})
		}
		record := func(k int) *gomock.Call {
			return m.EXPECT().EventRecord(gomock.Any(), onDown).DoAndReturn(func(e gpu.Event, s gpu.Stream) error {
				tr.add("record-down %d %#x", k, e)
				return p.EventRecord(e, s)
			})
		}
		gomock.InOrder(copyDown(0, seg), record(0), copyDown(1, seg), record(1), copyDown(2, n*4-2*seg), record(2))
		m.EXPECT().MemcpyAsync(gomock.Any(), gomock.Any(), gomock.Any(), offDown).DoAndReturn(p.MemcpyAsync).AnyTimes()
		m.EXPECT().EventRecord(gomock.Any(), offDown).DoAndReturn(p.EventRecord).AnyTimes()
		delegate(m, p, tr, "StreamCreate", "MemcpyAsync", "EventRecord")
	})
	in0 := rs[0].proc.Malloc(0, 4*n)
	runPair(t, rs, n, "gocoll_sum_f32", 1, in0, rs[1].proc.Malloc(0, 4*n), rs[1].proc.Malloc(0, 4*n))
	if src != in0 {
		t.Errorf("first segment copied from %#x, want the input %#x", src, in0)
	}
	if slot[0] != slot[2] || slot[0] == slot[1] {
		t.Errorf("slots %#x: want two, used in turn", slot)
	}
	tr := rs[0].tr
	for k, size := range []int{seg, seg, n*4 - 2*seg} {
		rec := tr.index(fmt.Sprintf("record-down %d ", k))
		ev := strings.Fields(tr.log[rec])[2]
		done := slices.IndexFunc(tr.log[rec:], func(s string) bool { return s == "done "+ev }) + rec
		send := slices.IndexFunc(tr.log, func(s string) bool { return strings.HasPrefix(s, fmt.Sprintf("send %d ", size)) })
		if k == 1 {
			send = slices.IndexFunc(tr.log[send+1:], func(s string) bool { return strings.HasPrefix(s, fmt.Sprintf("send %d ", size)) }) + send + 1
		}
		if !(tr.index(fmt.Sprintf("copy-down %d", k)) < rec && rec < done && done < send) {
			t.Errorf("segment %d: copy %d, record %d, event done %d, send %d: want that order\n%s", k,
				tr.index(fmt.Sprintf("copy-down %d", k)), rec, done, send, strings.Join(tr.log, "\n"))
		}
	}
}

// Staging, receiver side: each segment is copied up after it arrived, and
// the reduction kernel runs on the compute stream only after the compute
// stream waits for the copies, once, over all n elements.
func TestStagingReceiveThenReduce(t *testing.T) {
	const seg, n = 64, 40
	var streams []gpu.Stream
	rs := pair(t, device.Options{Segment: seg, Depth: 2}, nil, func(m *mockgpu.MockDriver, p *fake.Process, tr *trace) {
		m.EXPECT().StreamCreate().DoAndReturn(func() (gpu.Stream, error) {
			s, err := p.StreamCreate()
			streams = append(streams, s)
			return s, err
		}).Times(3)
		m.EXPECT().Launch(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any(), uint64(n)).
			DoAndReturn(func(f gpu.Function, grid, block int, s gpu.Stream, args ...uint64) error {
				tr.add("launch %#x", s)
				return p.Launch(f, grid, block, s, args...)
			}).Times(1)
		delegate(m, p, tr, "StreamCreate", "Launch")
	})
	runPair(t, rs, n, "gocoll_sum_f32", 1)
	up, comp := streams[0], streams[2]
	tr := rs[1].tr
	log := strings.Join(tr.log, "\n")
	launch := tr.index("launch ")
	if launch < 0 || tr.log[launch] != fmt.Sprintf("launch %#x", comp) {
		t.Fatalf("no launch on the compute stream:\n%s", log)
	}
	// The three segments: received, then copied up.
	at := 0
	for k, size := range []int{seg, seg, n*4 - 2*seg} {
		recv := slices.IndexFunc(tr.log[at:], func(s string) bool { return strings.HasPrefix(s, fmt.Sprintf("received %d round 0", size)) }) + at
		cp := slices.IndexFunc(tr.log[recv+1:], func(s string) bool {
			f := strings.Fields(s)
			return f[0] == "memcpy" && f[3] == fmt.Sprint(size) && f[4] == fmt.Sprintf("%#x", up)
		}) + recv + 1
		if recv < at || cp <= recv || cp > launch {
			t.Errorf("segment %d: received at %d, copied up at %d, kernel at %d\n%s", k, recv, cp, launch, log)
		}
		at = cp
	}
	// (The compute stream's first waits, at the start of the call, are
	// for the application's default streams: TestWaitsForDefaultStreams.)
	wait := slices.IndexFunc(tr.log[at:], func(s string) bool { return strings.HasPrefix(s, fmt.Sprintf("streamwait %#x", comp)) })
	if wait >= 0 {
		wait += at
	}
	if wait < 0 || wait > launch {
		t.Errorf("compute stream waits at %d, last copy up at %d, kernel at %d\n%s", wait, at, launch, log)
	}
}

// IPC: with the same buffers, call after call, the sender asks for its
// allocation's handle once, the receiver maps it once and copies device
// to device from the mapping, and closes it exactly once when the
// executor goes away.
func TestIPCOpenClosePairing(t *testing.T) {
	defer device.SetMaxIdle(time.Hour)() // no idle close between the calls
	const n = 16
	var mapped uintptr
	rs := pair(t, device.Options{}, func(m *mockgpu.MockDriver, p *fake.Process, tr *trace) {
		m.EXPECT().IpcGetMemHandle(gomock.Any()).DoAndReturn(p.IpcGetMemHandle).Times(1)
		delegate(m, p, tr, "IpcGetMemHandle")
	}, func(m *mockgpu.MockDriver, p *fake.Process, tr *trace) {
		open := m.EXPECT().IpcOpenMemHandle(gomock.Any()).DoAndReturn(func(h gpu.IPCHandle) (uintptr, error) {
			p, err := p.IpcOpenMemHandle(h)
			mapped = p
			return p, err
		}).Times(1)
		m.EXPECT().IpcCloseMemHandle(gomock.Cond(func(p uintptr) bool { return p == mapped })).
			DoAndReturn(p.IpcCloseMemHandle).Times(1).After(open)
		delegate(m, p, tr, "IpcOpenMemHandle", "IpcCloseMemHandle")
	})
	rs[0].x.SetPeers([]device.Peer{device.PeerDirect, device.PeerIPC})
	rs[1].x.SetPeers([]device.Peer{device.PeerIPC, device.PeerDirect})
	bufs := []uintptr{rs[0].proc.Malloc(0, 4*n+64), rs[1].proc.Malloc(0, 4*n), rs[1].proc.Malloc(0, 4*n)}
	bufs[0] += 64 // not the allocation's start: the descriptor carries the offset
	for seq := range uint32(3) {
		runPair(t, rs, n, "gocoll_sum_f32", seq+1, bufs...)
	}
	if s := rs[0].x.Stats(); s.IPC != 3 || s.Staged != 0 {
		t.Errorf("sender: %+v, want 3 IPC transfers", s)
	}
	if !slices.ContainsFunc(rs[1].tr.log, func(s string) bool {
		f := strings.Fields(s)
		return f[0] == "memcpy" && f[2] == fmt.Sprintf("%#x", mapped+64)
	}) {
		t.Errorf("receiver never copied from the mapping at %#x + 64\n%s", mapped, strings.Join(rs[1].tr.log, "\n"))
	}
	for _, r := range rs {
		if err := r.x.Close(); err != nil {
			t.Error(err)
		}
	}
}

// Reductions the GPU has no kernel for run on the host: segments of both
// operands come down and the result goes up, all on the compute stream,
// and no kernel is launched.
func TestHostReduceFallback(t *testing.T) {
	const seg, n = 32, 20
	rs := pair(t, device.Options{Segment: seg}, nil, func(m *mockgpu.MockDriver, p *fake.Process, tr *trace) {
		m.EXPECT().Launch(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Times(0)
		delegate(m, p, tr, "Launch")
	})
	runPair(t, rs, n, "", 1)
	if s := rs[1].x.Stats(); s.HostReduce != 1 || s.GPUReduce != 0 {
		t.Errorf("%+v: want one host reduction", s)
	}
	// 80 bytes in segments of 32: 3 segments, each 2 copies down and 1 up.
	copies := 0
	for _, s := range rs[1].tr.log {
		if f := strings.Fields(s); f[0] == "memcpy" && (f[3] == "32" || f[3] == "16") {
			copies++
		}
	}
	if copies < 9 {
		t.Errorf("%d segment copies for a host reduction of 3 segments, want 9 (plus staging)", copies)
	}
}

// Every driver call that needs a context finds one current on its thread,
// on every goroutine the executor uses: the fake refuses calls otherwise,
// so a call that succeeds here with many transfers at once proves it.
func TestContextOnEveryThread(t *testing.T) {
	rs := pair(t, device.Options{Segment: 16, Depth: 1})
	runPair(t, rs, 100, "gocoll_sum_f32", 1)
	for _, r := range rs {
		if err := r.x.Close(); err != nil {
			t.Error(err)
		}
	}
}
