package fake_test

import (
	"runtime"
	"runtime/debug"
	"testing"
	"unsafe"

	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/gpu/fake"
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
