package devcopy_test

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/gpu/devcopy"
	"github.com/gocoll/gocoll/gpu/gputest/fake"
)

// process is one fake CUDA process whose application initialised device
// 0, and its runtime.
func process(t *testing.T, opts fake.Options) (*fake.Process, *gpu.Runtime) {
	t.Helper()
	p := fake.NewMachine(opts).NewProcess()
	p.AppInit(0)
	rt, err := gpu.NewRuntime(p, gpu.Auto)
	if err != nil {
		t.Fatal(err)
	}
	return p, rt
}

// Down to pinned memory, within the device, and up again, on streams that
// run late at random: each Finish returns with its bytes in place.
func TestCopies(t *testing.T) {
	p, rt := process(t, fake.Options{Jitter: 200 * time.Microsecond})
	const n = 4099
	want := make([]byte, n)
	for i := range want {
		want[i] = byte(i*7 + 1)
	}
	a, b := p.Malloc(0, n), p.Malloc(0, n)
	p.Write(a, want)
	c := devcopy.Of(rt, rt.Classify(a))
	h, err := c.HostAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	x, err := c.Begin()
	if err != nil {
		t.Fatal(err)
	}
	x.Queue(h.Addr(), a, n)
	if err := x.Finish(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(h.Bytes(), want) {
		t.Fatal("device to pinned host memory: wrong bytes")
	}
	for i := range h.Bytes() {
		h.Bytes()[i] ^= 0xff
	}
	x, err = c.Begin()
	if err != nil {
		t.Fatal(err)
	}
	x.Queue(b, a, n/2)
	x.Queue(b+n/2, h.Addr()+n/2, n-n/2)
	if err := x.Finish(); err != nil {
		t.Fatal(err)
	}
	got := p.Read(b, n)
	for i := range got {
		w := want[i]
		if i >= n/2 {
			w ^= 0xff
		}
		if got[i] != w {
			t.Fatalf("byte %d is %d, want %d", i, got[i], w)
		}
	}
	if err := h.Free(); err != nil {
		t.Fatal(err)
	}
	d, err := c.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	if m := rt.Classify(d); !m.OnDevice() || m.Base != d {
		t.Errorf("Alloc's memory is classified %+v", m)
	}
	if err := c.Free(d); err != nil {
		t.Fatal(err)
	}
}

// A copy waits for what the application queued before Begin on the
// legacy default stream and on the calling thread's per-thread default
// stream, however late it lands.
func TestOrderedAfterDefaultStreams(t *testing.T) {
	runtime.LockOSThread() // the per-thread stream is this thread's
	defer runtime.UnlockOSThread()
	p, rt := process(t, fake.Options{})
	for _, s := range []gpu.Stream{gpu.StreamLegacy, gpu.StreamPerThread} {
		const n = 64
		a := p.Malloc(0, n)
		p.Write(a, make([]byte, n))
		want := bytes.Repeat([]byte{byte(s) + 40}, n)
		p.AppWriteAsync(0, s, a, want, 20*time.Millisecond)
		c := devcopy.Of(rt, rt.Classify(a))
		h, err := c.HostAlloc(n)
		if err != nil {
			t.Fatal(err)
		}
		x, err := c.Begin()
		if err != nil {
			t.Fatal(err)
		}
		x.Queue(h.Addr(), a, n)
		if err := x.Finish(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(h.Bytes(), want) {
			t.Errorf("stream %#x: the copy read the buffer before the application's write landed", s)
		}
		h.Free()
	}
}

// Every operation enters the buffer's context and leaves the thread's
// own current, whatever it was: none, or another context.
func TestRestoresTheThreadsContext(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p, rt := process(t, fake.Options{})
	other := p.CtxCreate(0)
	a := p.Malloc(0, 16)
	c := devcopy.Of(rt, rt.Classify(a))
	for _, cur := range []gpu.Context{0, other} {
		if err := p.SetCurrentContext(cur); err != nil {
			t.Fatal(err)
		}
		h, err := c.HostAlloc(16)
		if err != nil {
			t.Fatal(err)
		}
		x, err := c.Begin()
		if err != nil {
			t.Fatal(err)
		}
		x.Queue(h.Addr(), a, 16)
		if err := errorsJoin(x.Finish(), h.Free()); err != nil {
			t.Fatal(err)
		}
		if got, _ := p.CurrentContext(); got != cur {
			t.Errorf("the thread's context is %#x after, want %#x", got, cur)
		}
	}
}

// A failed copy is Finish's error, and the sequence still ends.
func TestQueueFailure(t *testing.T) {
	p, rt := process(t, fake.Options{})
	a := p.Malloc(0, 16)
	c := devcopy.Of(rt, rt.Classify(a))
	x, err := c.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Queue(a, a+8, 4096); err == nil { // past the allocation
		t.Fatal("a copy past the allocation was queued")
	}
	if err := x.Finish(); err == nil {
		t.Error("Finish forgot the failed copy")
	}
}

func errorsJoin(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
