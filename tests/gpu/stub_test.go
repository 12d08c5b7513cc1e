package gputest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/tests/internal/harness"
)

// The stand-in driver's counters, read through cuDeviceGetAttribute
// (tests/gpu/c/stubcuda.c).
const (
	stubAttrEvents       gpu.DeviceAttr = 0x67630001
	stubAttrBlockingSync gpu.DeviceAttr = 0x67630002
)

// The driver API gocoll added for device collectives, through the real
// loader (gpu.Load, gpu/cuda.c) on the bundle's stand-in libcuda.so.1, in
// processes of their own: two ranks map each other's memory by IPC; each
// stream waits for the other rank's flag (cuStreamWaitValue32), which
// the other writes late from another stream (cuStreamWriteValue32), so
// that the first rank's stream is held back: its event is not ready, and
// the peer kernel queued behind the wait runs once the flag is there,
// reducing both ranks' data bit for bit as package ops does. Then:
// memset, attributes, no event made with CU_EVENT_BLOCKING_SYNC; a wait
// never satisfied loses the context (CUDA_ERROR_LAUNCH_TIMEOUT) rather
// than hang; a vector kernel on a misaligned source loses it
// (CUDA_ERROR_MISALIGNED_ADDRESS).
func TestStubDriver(t *testing.T) {
	lib := filepath.Join(harness.Root, "build", "gpu-bundle", "stub")
	if _, err := os.Stat(filepath.Join(lib, "libcuda.so.1")); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	start := func(mode string) (*exec.Cmd, *strings.Builder) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStubProcess$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+lib, "GOCOLL_TEST_BUILT="+harness.Root,
			"GPUCOLL_STUB_MODE="+mode, "GPUCOLL_STUB_DIR="+dir, "GPUCOLL_STUB_WAIT_TIMEOUT=1")
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, out
	}
	type proc struct {
		mode string
		cmd  *exec.Cmd
		out  *strings.Builder
	}
	var ps []proc
	for _, mode := range []string{"rank0", "rank1", "timeout", "misaligned"} {
		cmd, out := start(mode)
		ps = append(ps, proc{mode, cmd, out})
	}
	for _, p := range ps {
		done := make(chan error, 1)
		go func() { done <- p.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil || !strings.Contains(p.out.String(), "stub process: "+p.mode+": ok") {
				t.Errorf("%s: %v\n%s", p.mode, err, p.out)
			}
		case <-time.After(2 * time.Minute):
			p.cmd.Process.Kill()
			t.Errorf("%s: timed out\n%s", p.mode, p.out)
		}
	}
}

// TestStubProcess is one process of TestStubDriver (GPUCOLL_STUB_MODE
// says which); without it, it does nothing.
func TestStubProcess(t *testing.T) {
	mode := os.Getenv("GPUCOLL_STUB_MODE")
	if mode == "" {
		t.Skip("a process of TestStubDriver")
	}
	runtime.LockOSThread()
	if err := stubProcess(mode, os.Getenv("GPUCOLL_STUB_DIR")); err != nil {
		t.Fatalf("stub process: %s: %v", mode, err)
	}
	fmt.Printf("stub process: %s: ok\n", mode)
}

func stubProcess(mode, dir string) error {
	drv, err := gpu.Load()
	if err != nil {
		return err
	}
	if err := drv.Init(); err != nil {
		return err
	}
	ctx, err := drv.PrimaryContextRetain(0)
	if err != nil {
		return err
	}
	if err := drv.SetCurrentContext(ctx); err != nil {
		return err
	}
	mod, err := drv.ModuleLoadData(gpu.PTX())
	if err != nil {
		return err
	}
	kernel := func(vec bool) (gpu.Function, error) {
		return drv.ModuleGetFunction(mod, gpu.PeerKernel(ops.Sum, gpu.F32, vec))
	}
	s, err := drv.StreamCreate()
	if err != nil {
		return err
	}
	ev, err := drv.EventCreate()
	if err != nil {
		return err
	}
	// A region: its flag at 0, the array of sources at 64, of
	// destinations at 128, data at 256 (n float32s), the result at 1024.
	const n = 37
	region, err := drv.MemAlloc(2048)
	if err != nil {
		return err
	}
	put := func(dst uintptr, b []byte) error { // synchronously, from Go memory
		if err := drv.MemcpyAsync(dst, uintptr(unsafe.Pointer(&b[0])), len(b), s); err != nil {
			return err
		}
		if err := drv.EventRecord(ev, s); err != nil {
			return err
		}
		err := drv.EventSynchronize(ev)
		runtime.KeepAlive(b)
		return err
	}
	get := func(src uintptr, size int) ([]byte, error) {
		b := make([]byte, size)
		if err := drv.MemcpyAsync(uintptr(unsafe.Pointer(&b[0])), src, size, s); err != nil {
			return nil, err
		}
		if err := drv.EventRecord(ev, s); err != nil {
			return nil, err
		}
		return b, drv.EventSynchronize(ev)
	}
	addrs := func(a ...uintptr) []byte {
		var b []byte
		for _, x := range a {
			b = binary.LittleEndian.AppendUint64(b, uint64(x))
		}
		return b
	}
	data := func(rank int) []byte {
		b := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(i)*float32(math.Pow(7, float64(rank)))+0.1))
		}
		return b
	}
	if err := put(region, make([]byte, 2048)); err != nil {
		return err
	}

	switch mode {
	case "timeout":
		// A flag nobody writes: the stand-in gives up after
		// GPUCOLL_STUB_WAIT_TIMEOUT and the context is lost.
		if err := drv.StreamWaitValue32(s, region, 1); err != nil {
			return err
		}
		if err := drv.EventRecord(ev, s); err != nil {
			return err
		}
		if done, err := drv.EventQuery(ev); done || err != nil {
			return fmt.Errorf("behind an unsatisfied wait, the event is done (%v) or fails: %v", done, err)
		}
		if err := drv.EventSynchronize(ev); !gpu.IsCode(err, gpu.ErrorLaunchTimeout) {
			return fmt.Errorf("EventSynchronize behind a wait never satisfied: %v, want CUDA_ERROR_LAUNCH_TIMEOUT", err)
		}
		return nil
	case "misaligned":
		f, err := kernel(true)
		if err != nil {
			return err
		}
		if err := put(region+64, addrs(region+256+4)); err != nil {
			return err
		}
		if err := put(region+128, addrs(region+1024)); err != nil {
			return err
		}
		if err := drv.Launch(f, 2, 64, s, uint64(region+128), 1, uint64(region+64), 1, 8); err != nil {
			return fmt.Errorf("the launch itself succeeds, as on a GPU: %v", err)
		}
		if err := drv.EventRecord(ev, s); !gpu.IsCode(err, gpu.ErrorMisalignedAddress) {
			return fmt.Errorf("after a vector kernel on a misaligned source: %v, want CUDA_ERROR_MISALIGNED_ADDRESS", err)
		}
		return nil
	}

	// Two ranks.
	rank, _ := strconv.Atoi(strings.TrimPrefix(mode, "rank"))
	peer := 1 - rank
	if v, err := drv.DeviceAttribute(0, gpu.DeviceAttrStreamMemOps); v != 1 || err != nil {
		return fmt.Errorf("DeviceAttrStreamMemOps: %d, %v", v, err)
	}
	if v, err := drv.DeviceAttribute(0, gpu.DeviceAttrMultiprocessorCount); v < 1 || err != nil {
		return fmt.Errorf("DeviceAttrMultiprocessorCount: %d, %v", v, err)
	}
	if err := put(region+256, data(rank)); err != nil {
		return err
	}
	h, err := drv.IpcGetMemHandle(region)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, mode+".tmp"), h[:], 0o644); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(dir, mode+".tmp"), filepath.Join(dir, mode)); err != nil {
		return err
	}
	var ph gpu.IPCHandle
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(filepath.Join(dir, "rank"+strconv.Itoa(peer)))
		if err == nil {
			copy(ph[:], b)
			break
		}
		if time.Since(start) > time.Minute {
			return errors.New("no handle from the peer")
		}
	}
	theirs, err := drv.IpcOpenMemHandle(ph)
	if err != nil {
		return err
	}
	srcs := []uintptr{region + 256, theirs + 256}
	if rank == 1 {
		srcs[0], srcs[1] = srcs[1], srcs[0] // rank order
	}
	if err := put(region+64, addrs(srcs...)); err != nil {
		return err
	}
	if err := put(region+128, addrs(region+1024)); err != nil {
		return err
	}
	f, err := kernel(true)
	if err != nil {
		return err
	}
	// The peer's flag first, then the reduction of both ranks' data.
	if err := drv.StreamWaitValue32(s, theirs, 1); err != nil {
		return err
	}
	if err := drv.Launch(f, 2, 64, s, uint64(region+128), 1, uint64(region+64), 2, n); err != nil {
		return err
	}
	if err := drv.EventRecord(ev, s); err != nil {
		return err
	}
	if rank == 0 {
		// Rank 1 writes its flag late: rank 0's stream is held back.
		time.Sleep(20 * time.Millisecond)
		if done, err := drv.EventQuery(ev); done || err != nil {
			return fmt.Errorf("before the peer's flag, the event is done (%v) or fails: %v", done, err)
		}
	} else {
		time.Sleep(500 * time.Millisecond)
	}
	other, err := drv.StreamCreate()
	if err != nil {
		return err
	}
	if err := drv.StreamWriteValue32(other, region, 1); err != nil {
		return err
	}
	if err := drv.EventSynchronize(ev); err != nil {
		return err
	}
	got, err := get(region+1024, 4*n)
	if err != nil {
		return err
	}
	want := make([]byte, 4*n)
	if err := ops.CanonicalReduce(ops.Sum, ops.Float, want, [][]byte{data(0), data(1)}); err != nil {
		return err
	}
	if string(got) != string(want) {
		return fmt.Errorf("the peer sum differs from ops.CanonicalReduce")
	}
	// A memset, on words of the region.
	if err := drv.MemsetD32Async(region+1536, 0xABCD1234, 3, s); err != nil {
		return err
	}
	if got, err := get(region+1532, 16); err != nil || binary.LittleEndian.Uint32(got) != 0 ||
		binary.LittleEndian.Uint32(got[4:]) != 0xABCD1234 || binary.LittleEndian.Uint32(got[12:]) != 0xABCD1234 {
		return fmt.Errorf("memset: % x, %v", got, err)
	}
	// Both ranks are done reading each other's data before either frees
	// it: the second flag, written and waited for in one batch
	// (cuStreamBatchMemOp).
	if err := drv.StreamBatchMemOp(s, []gpu.MemOp{{Addr: region, Value: 2, Write: true}, {Addr: theirs, Value: 2}}); err != nil {
		return err
	}
	if err := drv.EventRecord(ev, s); err != nil {
		return err
	}
	if err := drv.EventSynchronize(ev); err != nil {
		return err
	}
	if v, err := drv.DeviceAttribute(0, stubAttrEvents); v < 1 || err != nil {
		return fmt.Errorf("the stand-in counted %d events (%v)", v, err)
	}
	if v, err := drv.DeviceAttribute(0, stubAttrBlockingSync); v != 0 || err != nil {
		return fmt.Errorf("%d events made with CU_EVENT_BLOCKING_SYNC (%v)", v, err)
	}
	return drv.IpcCloseMemHandle(theirs)
}
