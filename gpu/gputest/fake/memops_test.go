package fake_test

import (
	"encoding/binary"
	"math"
	"reflect"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/gpu/gputest/fake"
	"github.com/gocoll/gocoll/ops"
)

// node returns n processes of a fake node, each with device 0's primary
// context current on the calling thread (which the test locks): the
// fake's contexts are per process, so one thread serves them all.
func node(t *testing.T, opts fake.Options, n int) []*fake.Process {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	m := fake.NewMachine(opts)
	ps := make([]*fake.Process, n)
	for i := range ps {
		ps[i] = m.NewProcess()
		ps[i].AppInit(0)
		current(t, ps[i])
	}
	return ps
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func word(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

// marker is host memory a stream copies from (a package variable: alive
// while the copy is queued).
var marker = word(0xC0FFEE)

// A stream waits for a flag another process writes through its own
// stream into memory it mapped by IPC: the work queued after the wait
// runs once the flag is >= the value, as the driver compares
// ((int32)(flag - v) >= 0, right across the wrap-around), and only that
// stream waits.
func TestStreamWaitValue(t *testing.T) {
	ps := node(t, fake.Options{}, 2)
	a, b := ps[0], ps[1]
	flag := a.Malloc(0, 64)
	mapped := must[uintptr](t)(b.IpcOpenMemHandle(must[gpu.IPCHandle](t)(a.IpcGetMemHandle(flag))))
	sa, sb, other := must[gpu.Stream](t)(a.StreamCreate()), must[gpu.Stream](t)(b.StreamCreate()), must[gpu.Stream](t)(b.StreamCreate())
	ev, evOther := must[gpu.Event](t)(b.EventCreate()), must[gpu.Event](t)(b.EventCreate())
	data := b.Malloc(0, 4)

	for _, c := range []struct {
		start, wait, short, enough uint32
	}{
		{0, 5, 4, 5},
		{0xFFFFFFFE, 1, 0xFFFFFFFF, 1}, // a sequence number wrapping around
		{1, 0x80000001, 0x80000000, 0x80000001},
		{7, 3, 2, 3}, // already satisfied: runs at once
	} {
		a.Write(flag, word(c.start))
		b.Write(data, word(0))
		if err := b.StreamWaitValue32(sb, mapped, c.wait); err != nil {
			t.Fatal(err)
		}
		if err := b.MemcpyAsync(data, uintptr(unsafe.Pointer(&marker[0])), 4, sb); err != nil {
			t.Fatal(err)
		}
		if err := b.EventRecord(ev, sb); err != nil {
			t.Fatal(err)
		}
		// Another stream of the waiting process is not held up.
		if err := b.EventRecord(evOther, other); err != nil {
			t.Fatal(err)
		}
		if err := b.EventSynchronize(evOther); err != nil {
			t.Fatal(err)
		}
		waits := int32(c.start-c.wait) < 0
		if waits {
			time.Sleep(5 * time.Millisecond)
			if done, _ := b.EventQuery(ev); done {
				t.Fatalf("%+v: the wait passed before the write", c)
			}
			if err := a.StreamWriteValue32(sa, flag, c.short); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond)
			if done, _ := b.EventQuery(ev); done {
				t.Fatalf("%+v: the wait passed at %#x", c, c.short)
			}
			if err := a.StreamWriteValue32(sa, flag, c.enough); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.EventSynchronize(ev); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if got := binary.LittleEndian.Uint32(b.Read(data, 4)); got != 0xC0FFEE {
			t.Errorf("%+v: the copy after the wait did not run: %#x", c, got)
		}
	}
	if s := b.Calls(); s["StreamWaitValue32"] != 4 || a.Calls()["StreamWriteValue32"] != 6 {
		t.Errorf("calls: %v / %v", b.Calls(), a.Calls())
	}
}

// A wait nobody satisfies fails after Options.WaitTimeout, where a GPU
// would hang, and the context is lost (CUDA_ERROR_LAUNCH_TIMEOUT,
// sticky).
func TestStreamWaitValueTimeout(t *testing.T) {
	p := node(t, fake.Options{WaitTimeout: 30 * time.Millisecond}, 1)[0]
	flag := p.Malloc(0, 4)
	s, ev := must[gpu.Stream](t)(p.StreamCreate()), must[gpu.Event](t)(p.EventCreate())
	if err := p.StreamWaitValue32(s, flag, 1); err != nil {
		t.Fatal(err)
	}
	if err := p.EventRecord(ev, s); err != nil {
		t.Fatal(err)
	}
	if err := p.EventSynchronize(ev); !gpu.IsCode(err, gpu.ErrorLaunchTimeout) {
		t.Errorf("EventSynchronize: %v, want CUDA_ERROR_LAUNCH_TIMEOUT", err)
	}
	if _, err := p.MemAlloc(4); !gpu.IsCode(err, gpu.ErrorLaunchTimeout) {
		t.Errorf("after the timeout: %v, want the sticky error", err)
	}
}

// What stream memory operations refuse: misaligned or managed memory, or
// a driver without them; page-locked host memory works.
func TestStreamMemOpsRefuse(t *testing.T) {
	p := node(t, fake.Options{}, 1)[0]
	s := must[gpu.Stream](t)(p.StreamCreate())
	dev, managed := p.Malloc(0, 8), p.MallocManaged(0, 8)
	for _, addr := range []uintptr{dev + 2, managed, 0x10} {
		if err := p.StreamWriteValue32(s, addr, 1); !gpu.IsCode(err, gpu.ErrorInvalidValue) {
			t.Errorf("write at %#x: %v", addr, err)
		}
		if err := p.StreamWaitValue32(s, addr, 1); !gpu.IsCode(err, gpu.ErrorInvalidValue) {
			t.Errorf("wait at %#x: %v", addr, err)
		}
	}
	host := must[uintptr](t)(p.MemHostAlloc(8))
	ev := must[gpu.Event](t)(p.EventCreate())
	if err := p.StreamWriteValue32(s, host+4, 9); err != nil {
		t.Fatal(err)
	}
	if err := p.StreamWaitValue32(s, host+4, 9); err != nil {
		t.Fatal(err)
	}
	if err := p.EventRecord(ev, s); err != nil {
		t.Fatal(err)
	}
	if err := p.EventSynchronize(ev); err != nil {
		t.Fatal(err)
	}
	if v, _ := p.DeviceAttribute(0, gpu.DeviceAttrStreamMemOps); v != 1 {
		t.Errorf("DeviceAttrStreamMemOps %d", v)
	}

	q := node(t, fake.Options{NoStreamMemOps: true}, 1)[0]
	s = must[gpu.Stream](t)(q.StreamCreate())
	if err := q.StreamWaitValue32(s, q.Malloc(0, 4), 1); !gpu.IsCode(err, gpu.ErrorNotSupported) {
		t.Errorf("without stream memory operations: %v", err)
	}
	if v, _ := q.DeviceAttribute(0, gpu.DeviceAttrStreamMemOps); v != 0 {
		t.Errorf("DeviceAttrStreamMemOps %d without them", v)
	}
}

func TestMemsetAndAttributes(t *testing.T) {
	p := node(t, fake.Options{Multiprocessors: 7}, 1)[0]
	s, ev := must[gpu.Stream](t)(p.StreamCreate()), must[gpu.Event](t)(p.EventCreate())
	buf := p.Malloc(0, 24)
	if err := p.MemsetD32Async(buf+4, 0xDEADBEEF, 4, s); err != nil {
		t.Fatal(err)
	}
	if err := p.EventRecord(ev, s); err != nil {
		t.Fatal(err)
	}
	if err := p.EventSynchronize(ev); err != nil {
		t.Fatal(err)
	}
	got := p.Read(buf, 24)
	for i := range 6 {
		want := uint32(0xDEADBEEF)
		if i == 0 || i == 5 {
			want = 0
		}
		if w := binary.LittleEndian.Uint32(got[4*i:]); w != want {
			t.Errorf("word %d: %#x, want %#x", i, w, want)
		}
	}
	if err := p.MemsetD32Async(buf+2, 1, 1, s); !gpu.IsCode(err, gpu.ErrorInvalidValue) {
		t.Errorf("misaligned memset: %v", err)
	}
	if err := p.MemsetD32Async(buf+4, 1, 6, s); !gpu.IsCode(err, gpu.ErrorInvalidValue) {
		t.Errorf("memset past the allocation: %v", err)
	}
	for attr, want := range map[gpu.DeviceAttr]int{gpu.DeviceAttrMultiprocessorCount: 7, gpu.DeviceAttrComputeCapabilityMajor: 9,
		gpu.DeviceAttrComputeCapabilityMinor: 0} {
		if v, err := p.DeviceAttribute(0, attr); v != want || err != nil {
			t.Errorf("attribute %d: %d, %v; want %d", attr, v, err, want)
		}
	}
	if _, err := p.DeviceAttribute(0, 9999); !gpu.IsCode(err, gpu.ErrorInvalidValue) {
		t.Errorf("unknown attribute: %v", err)
	}
	if _, err := p.DeviceAttribute(1, gpu.DeviceAttrMultiprocessorCount); err == nil {
		t.Error("attribute of a device the process does not see")
	}
}

// Every gpu.Driver method counts one call in its process's Calls, failed
// calls included, and in the node's Stats; the methods that play the
// application count none.
func TestCallsCountEveryMethod(t *testing.T) {
	ps := node(t, fake.Options{}, 2)
	p := ps[0]
	p.Malloc(0, 16) // the application's: not a driver call
	before := p.Calls()
	if before.Total() != 2 || before["PrimaryContextRetain"] != 1 || before["SetCurrentContext"] != 1 {
		t.Errorf("calls before: %v, want current's retain and set only", before)
	}
	driver := reflect.TypeOf((*gpu.Driver)(nil)).Elem()
	v := reflect.ValueOf(p)
	for i := range driver.NumMethod() {
		m := driver.Method(i)
		fn := v.MethodByName(m.Name)
		var args []reflect.Value
		for j := range fn.Type().NumIn() {
			if fn.Type().IsVariadic() && j == fn.Type().NumIn()-1 {
				break
			}
			args = append(args, reflect.Zero(fn.Type().In(j)))
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s with zero arguments panics: %v", m.Name, r)
				}
			}()
			fn.Call(args)
		}()
	}
	d := p.Calls().Sub(before)
	for i := range driver.NumMethod() {
		if name := driver.Method(i).Name; d[name] != 1 {
			t.Errorf("%s: %d calls counted, want 1", name, d[name])
		}
	}
	if d.Total() != driver.NumMethod() {
		t.Errorf("%d calls counted, want %d: %v", d.Total(), driver.NumMethod(), d)
	}
	all := p.Machine().Stats().Calls
	for name, n := range p.Calls() {
		if all[name] != n+ps[1].Calls()[name] {
			t.Errorf("%s: the node counts %d, the processes %d and %d", name, all[name], n, ps[1].Calls()[name])
		}
	}
}

// A peer kernel on the fake reads its arrays of addresses from device
// memory, reaches another process's memory through IPC mappings and
// computes package ops' canonical reduction; a misaligned vector operand
// or an address that is not device memory faults at its turn on the
// stream and loses the context, as on a GPU; a wrong number of
// parameters or p out of range is refused at the launch.
func TestPeerKernel(t *testing.T) {
	ps := node(t, fake.Options{}, 3)
	const n = 37 // nine vectors of four and one element
	var ins [][]byte
	var bases []uintptr
	for r, p := range ps {
		x := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(x[4*i:], math.Float32bits(float32(i+1)*float32(math.Pow(10, float64(r*3)))+0.1))
		}
		b := p.Malloc(0, 4*n)
		p.Write(b, x)
		ins, bases = append(ins, x), append(bases, b)
	}
	want := make([]byte, 4*n)
	if err := ops.CanonicalReduce(ops.Sum, ops.Float, want, ins); err != nil {
		t.Fatal(err)
	}
	p := ps[0]
	srcs := []uintptr{bases[0]}
	for r := 1; r < len(ps); r++ {
		srcs = append(srcs, must[uintptr](t)(p.IpcOpenMemHandle(must[gpu.IPCHandle](t)(ps[r].IpcGetMemHandle(bases[r])))))
	}
	out := p.Malloc(0, 4*n)
	arrays := p.Malloc(0, 64)
	table := func(addrs ...uintptr) {
		var b []byte
		for _, a := range addrs {
			b = binary.LittleEndian.AppendUint64(b, uint64(a))
		}
		p.Write(arrays, b)
	}
	mod := must[gpu.Module](t)(p.ModuleLoadData(gpu.PTX()))
	f := must[gpu.Function](t)(p.ModuleGetFunction(mod, gpu.PeerKernel(ops.Sum, gpu.F32, true)))
	s, ev := must[gpu.Stream](t)(p.StreamCreate()), must[gpu.Event](t)(p.EventCreate())
	table(out, srcs[0], srcs[1], srcs[2])
	before := p.Machine().Stats()
	if err := p.Launch(f, 2, 32, s, uint64(arrays), 1, uint64(arrays+8), 3, n); err != nil {
		t.Fatal(err)
	}
	if err := p.EventRecord(ev, s); err != nil {
		t.Fatal(err)
	}
	if err := p.EventSynchronize(ev); err != nil {
		t.Fatal(err)
	}
	if got := p.Read(out, 4*n); string(got) != string(want) {
		t.Errorf("the peer sum differs from ops.CanonicalReduce")
	}
	name := gpu.PeerKernel(ops.Sum, gpu.F32, true)
	if st := p.Machine().Stats(); st.Launches[name]-before.Launches[name] != 1 || st.Elements[name]-before.Elements[name] != n {
		t.Errorf("stats: %d launches, %d elements", st.Launches[name], st.Elements[name])
	}

	for _, bad := range [][]uint64{{uint64(arrays), 1, uint64(arrays + 8), 3}, {uint64(arrays), 1, uint64(arrays + 8), 0, n},
		{uint64(arrays), 1, uint64(arrays + 8), gpu.PeerMaxSources + 1, n}} {
		if err := p.Launch(f, 2, 32, s, bad...); !gpu.IsCode(err, gpu.ErrorInvalidValue) {
			t.Errorf("launch with %v: %v", bad, err)
		}
	}

	// A source 4 bytes off: fine for the scalar kernel, a fault for the
	// vector one.
	table(out, srcs[0]+4, srcs[1], srcs[2])
	scalar := must[gpu.Function](t)(p.ModuleGetFunction(mod, gpu.PeerKernel(ops.Sum, gpu.F32, false)))
	if err := p.Launch(scalar, 2, 32, s, uint64(arrays), 1, uint64(arrays+8), 3, n-1); err != nil {
		t.Fatal(err)
	}
	if err := p.EventRecord(ev, s); err != nil {
		t.Fatal(err)
	}
	if err := p.EventSynchronize(ev); err != nil {
		t.Fatalf("scalar kernel on element-aligned operands: %v", err)
	}
	if err := p.Launch(f, 2, 32, s, uint64(arrays), 1, uint64(arrays+8), 3, n-1); err != nil {
		t.Fatalf("the launch itself succeeds, as on a GPU: %v", err)
	}
	if err := p.EventRecord(ev, s); err != nil {
		t.Fatal(err)
	}
	if err := p.EventSynchronize(ev); !gpu.IsCode(err, gpu.ErrorMisalignedAddress) {
		t.Errorf("vector kernel on an operand 4 bytes off: %v, want CUDA_ERROR_MISALIGNED_ADDRESS", err)
	}
	if _, err := p.MemAlloc(4); !gpu.IsCode(err, gpu.ErrorMisalignedAddress) {
		t.Errorf("after the fault: %v, want the sticky error", err)
	}

	// An address that is not device memory: CUDA_ERROR_ILLEGAL_ADDRESS.
	q := ps[1]
	arrays = q.Malloc(0, 16)
	q.Write(arrays, binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, uint64(bases[1])), 0x1000))
	mod = must[gpu.Module](t)(q.ModuleLoadData(gpu.PTX()))
	f = must[gpu.Function](t)(q.ModuleGetFunction(mod, gpu.PeerKernel(ops.Max, gpu.S32, false)))
	s, ev = must[gpu.Stream](t)(q.StreamCreate()), must[gpu.Event](t)(q.EventCreate())
	if err := q.Launch(f, 1, 32, s, uint64(arrays), 1, uint64(arrays+8), 1, n); err != nil {
		t.Fatal(err)
	}
	if err := q.EventRecord(ev, s); err != nil {
		t.Fatal(err)
	}
	if err := q.EventSynchronize(ev); !gpu.IsCode(err, gpu.ErrorIllegalAddress) {
		t.Errorf("a source that is not device memory: %v, want CUDA_ERROR_ILLEGAL_ADDRESS", err)
	}
}

// A batch of memory operations runs its writes and waits in order, as
// one call: a rank's flag written, then every peer's waited for.
func TestStreamBatchMemOp(t *testing.T) {
	ps := node(t, fake.Options{}, 3)
	flags := make([]uintptr, 3)
	for i, p := range ps {
		flags[i] = p.Malloc(0, 64)
		p.Write(flags[i], word(0))
	}
	mapped := func(p *fake.Process, q int) uintptr { // q's flag as p sees it
		if p == ps[q] {
			return flags[q]
		}
		return must[uintptr](t)(p.IpcOpenMemHandle(must[gpu.IPCHandle](t)(ps[q].IpcGetMemHandle(flags[q]))))
	}
	evs := make([]gpu.Event, 3)
	for i, p := range ps {
		s := must[gpu.Stream](t)(p.StreamCreate())
		ops := []gpu.MemOp{{Addr: flags[i], Value: 1, Write: true}}
		for q := range ps {
			if q != i {
				ops = append(ops, gpu.MemOp{Addr: mapped(p, q), Value: 1})
			}
		}
		if err := p.StreamBatchMemOp(s, ops); err != nil {
			t.Fatal(err)
		}
		evs[i] = must[gpu.Event](t)(p.EventCreate())
		if err := p.EventRecord(evs[i], s); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			time.Sleep(5 * time.Millisecond)
			if done, _ := p.EventQuery(evs[i]); done {
				t.Fatalf("rank %d passed its waits before every rank wrote its flag", i)
			}
		}
	}
	for i, p := range ps {
		if err := p.EventSynchronize(evs[i]); err != nil {
			t.Fatalf("rank %d: %v", i, err)
		}
		if c := p.Calls(); c["StreamBatchMemOp"] != 1 || c["StreamWaitValue32"] != 0 || c["StreamWriteValue32"] != 0 {
			t.Errorf("rank %d: calls %v, want one StreamBatchMemOp", i, c)
		}
	}
	if err := ps[0].StreamBatchMemOp(must[gpu.Stream](t)(ps[0].StreamCreate()), make([]gpu.MemOp, gpu.MaxMemOps+1)); !gpu.IsCode(err, gpu.ErrorInvalidValue) {
		t.Errorf("%d operations: %v, want CUDA_ERROR_INVALID_VALUE", gpu.MaxMemOps+1, err)
	}
}
