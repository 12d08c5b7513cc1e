package gpu_test

import (
	"errors"
	"strings"
	"testing"

	"go.uber.org/mock/gomock"

	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/gpu/gputest/mockgpu"
)

// Without a runtime (GOCOLL_CUDA=off, no driver) everything is host
// memory and nothing is called.
func TestClassifyNil(t *testing.T) {
	var rt *gpu.Runtime
	if m := rt.Classify(0x1234); m.Kind != gpu.Host || rt.Active() || rt.Queries() != 0 {
		t.Errorf("nil runtime: %+v", m)
	}
	rt, err := gpu.Open(gpu.Off)
	if rt != nil || err != nil {
		t.Errorf(`Open(Off) = %v, %v; want nil, nil`, rt, err)
	}
}

// Before the application has initialised CUDA, classification costs one
// cuCtxGetCurrent (which fails at once) and asks nothing about pointers;
// with the driver initialised but no context, a look at each device's
// primary context.
func TestClassifyWithoutContext(t *testing.T) {
	ctrl := gomock.NewController(t)
	d := mockgpu.NewMockDriver(ctrl)
	rt, err := gpu.NewRuntime(d, gpu.Auto) // no call: auto never initialises
	if err != nil {
		t.Fatal(err)
	}
	d.EXPECT().CurrentContext().Return(gpu.Context(0), gpu.ErrNotInitialized).Times(2)
	for range 2 {
		if m := rt.Classify(0x1000); m.Kind != gpu.Host {
			t.Errorf("before cuInit: %v", m.Kind)
		}
	}
	d.EXPECT().CurrentContext().Return(gpu.Context(0), nil).Times(2)
	d.EXPECT().DeviceCount().Return(2, nil).Times(1) // cached
	d.EXPECT().PrimaryContextActive(0).Return(false, nil).Times(2)
	d.EXPECT().PrimaryContextActive(1).Return(false, nil).Times(2)
	for range 2 {
		if m := rt.Classify(0x1000); m.Kind != gpu.Host {
			t.Errorf("no context: %v", m.Kind)
		}
	}
	if rt.Queries() != 0 {
		t.Errorf("%d pointer queries without a context", rt.Queries())
	}
}

// Once a context exists, each call asks the driver once, device and
// host memory alike, and nothing is remembered by address: after the
// application frees an allocation and gets the same address back for a
// new one (cudaMalloc often does), the answer is the new allocation, its
// buffer id and its range.
func TestClassifyAddressReuse(t *testing.T) {
	ctrl := gomock.NewController(t)
	d := mockgpu.NewMockDriver(ctrl)
	rt, _ := gpu.NewRuntime(d, gpu.Auto)
	const base, size = 0x7f0000000000, 1 << 20
	d.EXPECT().CurrentContext().Return(gpu.Context(0xc0), nil).Times(1) // the context is seen once, for good
	old := gpu.PointerAttrs{Type: gpu.MemoryDevice, Context: 0xc0, Device: 0, BufferID: 9, Start: base, Size: size}
	reused := gpu.PointerAttrs{Type: gpu.MemoryDevice, Context: 0xc0, Device: 0, BufferID: 10, Start: base, Size: size / 2}
	gomock.InOrder(
		d.EXPECT().PointerAttributes(uintptr(base+64)).Return(old, nil),
		// cudaFree(base); cudaMalloc(size/2) == base
		d.EXPECT().PointerAttributes(uintptr(base+64)).Return(reused, nil),
		d.EXPECT().PointerAttributes(uintptr(base+100)).Return(reused, nil),
		d.EXPECT().PointerAttributes(uintptr(0x1000)).Return(gpu.PointerAttrs{}, nil).Times(2),
	)
	m := rt.Classify(base + 64)
	if m.Kind != gpu.Device || m.Base != base || m.Size != size || m.Context != 0xc0 || m.BufferID != 9 {
		t.Fatalf("device pointer: %+v", m)
	}
	if m := rt.Classify(base + 64); m.Kind != gpu.Device || m.Base != base || m.Size != size/2 || m.BufferID != 10 {
		t.Errorf("new allocation at the freed one's address: %+v, want buffer id 10, %d bytes", m, size/2)
	}
	if m := rt.Classify(base + 100); m.Kind != gpu.Device || m.Base != base || m.BufferID != 10 {
		t.Errorf("same allocation again: %+v", m)
	}
	for range 2 {
		if m := rt.Classify(0x1000); m.Kind != gpu.Host {
			t.Errorf("host pointer: %+v", m)
		}
	}
	if rt.Queries() != 5 {
		t.Errorf("%d queries, want 5 (one per call)", rt.Queries())
	}
}

// Managed memory is its own kind; a driver error makes a pointer host
// memory.
func TestClassifyManagedAndErrors(t *testing.T) {
	ctrl := gomock.NewController(t)
	d := mockgpu.NewMockDriver(ctrl)
	rt, _ := gpu.NewRuntime(d, gpu.Auto)
	d.EXPECT().CurrentContext().Return(gpu.Context(1), nil)
	d.EXPECT().PointerAttributes(uintptr(0x5000)).Return(gpu.PointerAttrs{Type: gpu.MemoryDevice, Managed: true, Start: 0x5000, Size: 64}, nil)
	d.EXPECT().PointerAttributes(uintptr(0x9000)).Return(gpu.PointerAttrs{}, gpu.NewError("cuPointerGetAttributes", gpu.ErrorInvalidValue, ""))
	if m := rt.Classify(0x5000); m.Kind != gpu.Managed || !m.OnDevice() {
		t.Errorf("managed: %+v", m)
	}
	if m := rt.Classify(0x9000); m.Kind != gpu.Host {
		t.Errorf("error: %+v", m)
	}
}

// GOCOLL_CUDA=on initialises the driver and needs a device; the error
// says what is missing.
func TestModeOn(t *testing.T) {
	ctrl := gomock.NewController(t)
	d := mockgpu.NewMockDriver(ctrl)
	d.EXPECT().Init().Return(nil)
	d.EXPECT().DeviceCount().Return(0, nil)
	if _, err := gpu.NewRuntime(d, gpu.On); err == nil || !strings.Contains(err.Error(), "no CUDA device") {
		t.Errorf("no device: %v", err)
	}
	d.EXPECT().Init().Return(gpu.ErrNoDevice)
	if _, err := gpu.NewRuntime(d, gpu.On); err == nil || !errors.Is(err, gpu.ErrNoDevice) {
		t.Errorf("cuInit failing: %v", err)
	}
	d.EXPECT().Init().Return(nil)
	d.EXPECT().DeviceCount().Return(2, nil)
	rt, err := gpu.NewRuntime(d, gpu.On)
	if err != nil || rt.Devices() != 2 {
		t.Errorf("two devices: %v, %v", rt, err)
	}
}

// On this machine (no GPU in the build container), auto mode finds no
// driver or a driver without a context, and on fails with a message that
// names what is missing.
func TestOpenHere(t *testing.T) {
	rt, err := gpu.Open(gpu.Auto)
	if err != nil {
		t.Fatalf("auto: %v", err)
	}
	if rt.Active() {
		t.Skip("this machine has a CUDA context")
	}
	if _, err := gpu.Load(); err != nil {
		_, err := gpu.Open(gpu.On)
		if err == nil || !strings.Contains(err.Error(), "libcuda.so.1") {
			t.Errorf("on without a driver: %v", err)
		}
	}
}
