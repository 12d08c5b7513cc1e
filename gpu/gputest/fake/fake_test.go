package fake_test

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/gpu/gputest/fake"
)

var sink byte

// Device memory cannot be touched by the CPU: a stray read faults.
func TestDeviceMemoryFaultsOnCPU(t *testing.T) {
	p := fake.NewMachine(fake.Options{}).NewProcess()
	p.AppInit(0)
	ptr := p.Malloc(0, 64)
	p.Write(ptr, []byte{42})
	if got := p.Read(ptr, 1); got[0] != 42 {
		t.Fatalf("read back %d", got[0])
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	faulted := func() (f bool) {
		defer func() { f = recover() != nil }()
		b := unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&ptr))), 1)
		sink = b[0]
		return false
	}()
	if !faulted {
		t.Error("the CPU read device memory")
	}
}

// Calls that need a context fail without one on the calling thread, and
// succeed once it is current there.
func TestContextPerThread(t *testing.T) {
	p := fake.NewMachine(fake.Options{}).NewProcess()
	if _, err := p.CurrentContext(); !gpu.IsCode(err, gpu.ErrorNotInitialized) {
		t.Fatalf("before init: %v", err)
	}
	p.AppInit(0)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if _, err := p.StreamCreate(); !gpu.IsCode(err, gpu.ErrorInvalidContext) {
		t.Fatalf("without a context: %v", err)
	}
	ctx, err := p.PrimaryContextRetain(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetCurrentContext(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := p.StreamCreate()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.StreamDestroy(s); err != nil {
		t.Fatal(err)
	}
	if active, _ := p.PrimaryContextActive(0); !active {
		t.Error("primary context not active")
	}
}

// IPC: a process cannot open its own handle; another process maps the
// same bytes at another address; closes pair with opens.
func TestIPC(t *testing.T) {
	m := fake.NewMachine(fake.Options{})
	a, b := m.NewProcess(), m.NewProcess()
	for _, p := range []*fake.Process{a, b} {
		p.AppInit(0)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	use := func(p *fake.Process) {
		ctx, _ := p.PrimaryContextRetain(0)
		p.SetCurrentContext(ctx)
	}
	use(a)
	ptr := a.Malloc(0, 16)
	a.Write(ptr, []byte("hello"))
	h, err := a.IpcGetMemHandle(ptr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.IpcOpenMemHandle(h); err == nil {
		t.Error("a process opened its own handle")
	}
	use(b)
	q, err := b.IpcOpenMemHandle(h)
	if err != nil {
		t.Fatal(err)
	}
	if q == ptr || string(b.Read(q, 5)) != "hello" || m.OpenMappings() != 1 {
		t.Errorf("mapping %#x of %#x: %q, %d open", q, ptr, b.Read(q, 5), m.OpenMappings())
	}
	if err := b.IpcCloseMemHandle(q); err != nil || m.OpenMappings() != 0 {
		t.Errorf("close: %v, %d open", err, m.OpenMappings())
	}
	if err := b.IpcCloseMemHandle(q); err == nil {
		t.Error("closed twice")
	}
}

// current makes device 0's primary context current on the (locked)
// calling thread, retained.
func current(t *testing.T, p *fake.Process) gpu.Context {
	t.Helper()
	ctx, err := p.PrimaryContextRetain(0)
	if err == nil {
		err = p.SetCurrentContext(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	return ctx
}

// A kernel on an operand not aligned for its element type fails with
// CUDA_ERROR_MISALIGNED_ADDRESS, and the error is sticky: every later
// call in the context fails, as on a GPU.
func TestMisalignedLaunchIsSticky(t *testing.T) {
	p := fake.NewMachine(fake.Options{}).NewProcess()
	p.AppInit(0)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx := current(t, p)
	mod, err := p.ModuleLoadData(gpu.PTX())
	if err != nil {
		t.Fatal(err)
	}
	f, err := p.ModuleGetFunction(mod, "gocoll_sum_f64")
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.StreamCreate()
	if err != nil {
		t.Fatal(err)
	}
	ev, err := p.EventCreate()
	if err != nil {
		t.Fatal(err)
	}
	buf := p.Malloc(0, 256)
	if err := p.Launch(f, 1, 32, s, uint64(buf), uint64(buf+64), uint64(buf+128), 8); err != nil {
		t.Fatalf("aligned launch: %v", err)
	}
	if err := p.Launch(f, 1, 32, s, uint64(buf), uint64(buf+64+4), uint64(buf+128), 8); !gpu.IsCode(err, gpu.ErrorMisalignedAddress) {
		t.Fatalf("launch on an operand 4 bytes off: %v, want CUDA_ERROR_MISALIGNED_ADDRESS", err)
	}
	if p.Poisoned(ctx) == nil {
		t.Error("the context is not poisoned")
	}
	if _, err := p.MemAlloc(16); !gpu.IsCode(err, gpu.ErrorMisalignedAddress) {
		t.Errorf("cuMemAlloc after the fault: %v", err)
	}
	if err := p.EventRecord(ev, s); !gpu.IsCode(err, gpu.ErrorMisalignedAddress) {
		t.Errorf("cuEventRecord after the fault: %v", err)
	}
	if err := p.EventSynchronize(ev); !gpu.IsCode(err, gpu.ErrorMisalignedAddress) {
		t.Errorf("cuEventSynchronize after the fault: %v", err)
	}
}

// The default streams are streams of their own: an event recorded on the
// legacy stream or on the calling thread's per-thread stream completes
// after the application's work queued there before it, and the NULL
// stream is refused.
func TestDefaultStreams(t *testing.T) {
	p := fake.NewMachine(fake.Options{}).NewProcess()
	p.AppInit(0)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	current(t, p)
	buf := p.Malloc(0, 8)
	ev, err := p.EventCreate()
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range []gpu.Stream{gpu.StreamLegacy, gpu.StreamPerThread} {
		p.AppWriteAsync(0, s, buf, []byte{byte(i + 1)}, 20*time.Millisecond)
		if err := p.EventRecord(ev, s); err != nil {
			t.Fatalf("stream %#x: %v", s, err)
		}
		if done, _ := p.EventQuery(ev); done {
			t.Errorf("stream %#x: the event completed before the application's write", s)
		}
		if err := p.EventSynchronize(ev); err != nil {
			t.Fatal(err)
		}
		if got := p.Read(buf, 1)[0]; got != byte(i+1) {
			t.Errorf("stream %#x: %d after the event, want the application's %d", s, got, i+1)
		}
	}
	if err := p.EventRecord(ev, 0); !gpu.IsCode(err, gpu.ErrorInvalidHandle) {
		t.Errorf("NULL stream: %v", err)
	}
}

// A primary context lives while the application (AppInit to AppRelease)
// or a retain holds it; calls in it fail once nobody does.
func TestPrimaryContextLifetime(t *testing.T) {
	p := fake.NewMachine(fake.Options{}).NewProcess()
	p.AppInit(0)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	current(t, p) // one retain
	p.AppRelease(0)
	if _, err := p.StreamCreate(); err != nil {
		t.Fatalf("retained, after the application's release: %v", err)
	}
	if err := p.PrimaryContextRelease(0); err != nil {
		t.Fatal(err)
	}
	if _, err := p.StreamCreate(); !gpu.IsCode(err, gpu.ErrorContextIsDestroyed) {
		t.Errorf("released by all: %v, want CUDA_ERROR_CONTEXT_IS_DESTROYED", err)
	}
}

// Options.ModuleLoadError plays a driver that cannot load PTX.
func TestModuleLoadError(t *testing.T) {
	p := fake.NewMachine(fake.Options{ModuleLoadError: gpu.ErrorJITCompilerNotFound}).NewProcess()
	p.AppInit(0)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	current(t, p)
	if _, err := p.ModuleLoadData(gpu.PTX()); !gpu.IsCode(err, gpu.ErrorJITCompilerNotFound) ||
		!strings.Contains(err.Error(), "CUDA_ERROR_JIT_COMPILER_NOT_FOUND") {
		t.Errorf("ModuleLoadData: %v", err)
	}
}

// Address reuse: a freed range is handed out again, the last freed
// first, as a new allocation (new buffer id, new IPC handle, fresh
// bytes); another process's mapping of the freed allocation still reads
// the old bytes until it is closed, and then nothing holds them.
func TestAddressReuse(t *testing.T) {
	m := fake.NewMachine(fake.Options{})
	a, b := m.NewProcess(), m.NewProcess()
	for _, p := range []*fake.Process{a, b} {
		p.AppInit(0)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	use := func(p *fake.Process) {
		ctx, _ := p.PrimaryContextRetain(0)
		p.SetCurrentContext(ctx)
	}
	use(a)
	x, y := a.Malloc(0, 100), a.Malloc(0, 5000)
	a.Write(y, []byte("old"))
	attrs, _ := a.PointerAttributes(y + 10)
	h, err := a.IpcGetMemHandle(y)
	if err != nil {
		t.Fatal(err)
	}
	use(b)
	q, err := b.IpcOpenMemHandle(h)
	if err != nil {
		t.Fatal(err)
	}
	use(a)
	if err := a.Free(x); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(y); err != nil {
		t.Fatal(err)
	}
	if m.FreedMapped() != 1 || string(b.Read(q, 3)) != "old" {
		t.Errorf("mapping of a freed allocation: %d freed mapped, reads %q; want 1, %q", m.FreedMapped(), b.Read(q, 3), "old")
	}
	if at, _ := a.PointerAttributes(y); at.Type == gpu.MemoryDevice {
		t.Errorf("freed memory is still device memory: %+v", at)
	}
	y2 := a.Malloc(0, 5000) // the last freed first
	if y2 != y {
		t.Fatalf("reallocation at %#x, want the last freed %#x", y2, y)
	}
	if x2 := a.Malloc(0, 64); x2 != x {
		t.Errorf("second reallocation at %#x, want %#x", x2, x)
	}
	attrs2, _ := a.PointerAttributes(y2 + 10)
	if attrs2.BufferID == attrs.BufferID || attrs2.Start != y || attrs2.Size != 5000 {
		t.Errorf("reused range: %+v, was %+v: want a new buffer id, the same range", attrs2, attrs)
	}
	if got := a.Read(y2, 3); string(got) == "old" {
		t.Error("a new allocation holds the freed one's bytes")
	}
	a.Write(y2, []byte("new"))
	h2, err := a.IpcGetMemHandle(y2)
	if err != nil || h2 == h {
		t.Errorf("handle of the new allocation: %v, same as the old: %v", err, h2 == h)
	}
	use(b)
	if string(b.Read(q, 3)) != "old" {
		t.Errorf("the old mapping reads %q after the reuse", b.Read(q, 3))
	}
	q2, err := b.IpcOpenMemHandle(h2)
	if err != nil || q2 == q || string(b.Read(q2, 3)) != "new" {
		t.Errorf("mapping of the new allocation: %#x (old %#x), %v", q2, q, err)
	}
	for _, p := range []uintptr{q, q2} {
		if err := b.IpcCloseMemHandle(p); err != nil {
			t.Error(err)
		}
	}
	if m.FreedMapped() != 0 || m.OpenMappings() != 0 {
		t.Errorf("after closing: %d freed mapped, %d open", m.FreedMapped(), m.OpenMappings())
	}
}
