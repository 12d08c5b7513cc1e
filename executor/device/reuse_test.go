package device_test

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/mock/gomock"

	"github.com/gocoll/gocoll/executor/device"
	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/gpu/gputest/fake"
	"github.com/gocoll/gocoll/gpu/gputest/mockgpu"
)

// sumOver runs one call of sendReduce over IPC: rank 0's input in0
// holds first+i, rank 1's in1 100+i; rank 1's output must be their sum.
func sumOver(t *testing.T, rs [2]*rank, n int, seq uint32, first float32, in0, in1, out uintptr) {
	t.Helper()
	v0, v1 := make([]float32, n), make([]float32, n)
	for i := range n {
		v0[i], v1[i] = first+float32(i), 100+float32(i)
	}
	floats(rs[0].proc, in0, v0...)
	floats(rs[1].proc, in1, v1...)
	if err := (sumCall{n: n, seq: seq, in: [2]uintptr{in0, in1}, out: out}).run(rs); err != nil {
		t.Fatalf("call %d: %v", seq, err)
	}
	for i, v := range readFloats(rs[1].proc, out, n) {
		if want := first + 100 + float32(2*i); v != want {
			t.Fatalf("call %d: element %d = %v, want %v (rank 0's input was %v)", seq, i, v, want, first+float32(i))
		}
	}
}

func ipcPeers(rs [2]*rank) {
	rs[0].x.SetPeers([]device.Peer{device.PeerDirect, device.PeerIPC})
	rs[1].x.SetPeers([]device.Peer{device.PeerIPC, device.PeerDirect})
}

// Address reuse over IPC: the sender frees its input and gets the same
// address back for a new allocation with new data (cudaMalloc often
// does; the fake always does). The next call reads the new data, not the
// freed allocation through the old mapping, and the old mapping is
// closed at once: no GPU memory stays alive for the freed buffer.
func TestIPCAddressReuse(t *testing.T) {
	defer device.SetMaxIdle(time.Hour)() // the opens and closes counted here are the policy's, not the timer's
	const n = 64
	rs := pair(t, device.Options{})
	ipcPeers(rs)
	m := rs[0].proc.Machine()
	in0 := rs[0].proc.Malloc(0, 4*n)
	in1, out := rs[1].proc.Malloc(0, 4*n), rs[1].proc.Malloc(0, 4*n)
	sumOver(t, rs, n, 1, 1, in0, in1, out)
	if err := rs[0].proc.Free(in0); err != nil {
		t.Fatal(err)
	}
	again := rs[0].proc.Malloc(0, 4*n)
	if again != in0 {
		t.Fatalf("the fake gave %#x, not the freed %#x", again, in0)
	}
	if m.FreedMapped() != 1 {
		t.Fatalf("%d mappings of freed memory before the second call, want 1 (the receiver's)", m.FreedMapped())
	}
	sumOver(t, rs, n, 2, 1000, again, in1, out)
	st := m.Stats()
	if m.FreedMapped() != 0 || st.IPCCloses != 1 || st.IPCOpens != 2 || st.IPCGets != 2 {
		t.Errorf("after the second call: %d mappings of freed memory, %d gets, %d opens, %d closes; want 0, 2, 2, 1",
			m.FreedMapped(), st.IPCGets, st.IPCOpens, st.IPCCloses)
	}
	sumOver(t, rs, n, 3, 7, again, in1, out) // the same allocation: the same handle and mapping
	if st := m.Stats(); st.IPCGets != 2 || st.IPCOpens != 2 {
		t.Errorf("a third call on the same allocation: %d gets, %d opens; want 2, 2", st.IPCGets, st.IPCOpens)
	}
	closeAll(t, rs, m)
}

// The same, as driver call sequences: the sender asks for a handle again
// for the new allocation at the old base; the receiver closes the old
// mapping before it opens the new one, and closes the new one when the
// executor goes away.
func TestIPCAddressReuseCalls(t *testing.T) {
	defer device.SetMaxIdle(time.Hour)() // the opens and closes counted here are the policy's, not the timer's
	const n = 16
	var base uintptr
	var mapped []uintptr
	rs := pair(t, device.Options{}, func(m *mockgpu.MockDriver, p *fake.Process, tr *trace) {
		m.EXPECT().IpcGetMemHandle(gomock.Cond(func(p uintptr) bool { return p == base })).DoAndReturn(p.IpcGetMemHandle).Times(2)
		delegate(m, p, tr, "IpcGetMemHandle")
	}, func(m *mockgpu.MockDriver, p *fake.Process, tr *trace) {
		open := func() *gomock.Call {
			return m.EXPECT().IpcOpenMemHandle(gomock.Any()).DoAndReturn(func(h gpu.IPCHandle) (uintptr, error) {
				q, err := p.IpcOpenMemHandle(h)
				mapped = append(mapped, q)
				return q, err
			})
		}
		closing := func(k int) *gomock.Call {
			return m.EXPECT().IpcCloseMemHandle(gomock.Cond(func(q uintptr) bool { return len(mapped) > k && q == mapped[k] })).
				DoAndReturn(p.IpcCloseMemHandle)
		}
		gomock.InOrder(open(), closing(0), open(), closing(1))
		delegate(m, p, tr, "IpcOpenMemHandle", "IpcCloseMemHandle")
	})
	ipcPeers(rs)
	base = rs[0].proc.Malloc(0, 4*n)
	in1, out := rs[1].proc.Malloc(0, 4*n), rs[1].proc.Malloc(0, 4*n)
	sumOver(t, rs, n, 1, 1, base, in1, out)
	sumOver(t, rs, n, 2, 2, base, in1, out)
	rs[0].proc.Free(base)
	if p := rs[0].proc.Malloc(0, 4*n); p != base {
		t.Fatalf("the fake gave %#x, not the freed %#x", p, base)
	}
	sumOver(t, rs, n, 3, 3, base, in1, out)
	sumOver(t, rs, n, 4, 4, base, in1, out)
	for _, r := range rs {
		if err := r.x.Close(); err != nil {
			t.Error(err)
		}
	}
}

// A freed allocation whose address is not reused: its mapping is closed
// once unused for the idle time, by the workspace's timer, with no further
// call; a later call maps again. (The timer runs every 50 ms; the
// policy's clock stands still until the test moves it past the idle
// time.)
func TestIPCIdleMappingClosed(t *testing.T) {
	defer device.SetMaxIdle(50 * time.Millisecond)()
	advance := stillClock(t)
	const n = 16
	rs := pair(t, device.Options{})
	ipcPeers(rs)
	m := rs[0].proc.Machine()
	in0 := rs[0].proc.Malloc(0, 4*n)
	in1, out := rs[1].proc.Malloc(0, 4*n), rs[1].proc.Malloc(0, 4*n)
	sumOver(t, rs, n, 1, 1, in0, in1, out)
	rs[0].proc.Free(in0)
	if m.FreedMapped() != 1 {
		t.Fatalf("%d mappings of freed memory, want 1", m.FreedMapped())
	}
	time.Sleep(200 * time.Millisecond) // timer sweeps that find it recently used
	if m.FreedMapped() != 1 {
		t.Fatalf("%d mappings of freed memory before the idle time passed, want 1", m.FreedMapped())
	}
	advance(time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for m.FreedMapped() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if m.FreedMapped() != 0 || m.OpenMappings() != 0 {
		t.Fatalf("5 s after the idle time passed: %d mappings of freed memory, %d open; want none", m.FreedMapped(), m.OpenMappings())
	}
	in0 = rs[0].proc.Malloc(0, 4*n)
	sumOver(t, rs, n, 2, 5, in0, in1, out)
	if st := m.Stats(); st.IPCOpens != 2 || st.IPCCloses != 1 {
		t.Errorf("%d opens, %d closes; want 2, 1", st.IPCOpens, st.IPCCloses)
	}
	closeAll(t, rs, m)
}

// A mapping idle for longer than the idle time but not yet swept is
// used again by a call on the same allocation: the call's own sweep
// must not close it under the copy. (The clock jumps; the timer, set
// to an hour, never runs.)
func TestIPCIdleMappingReused(t *testing.T) {
	defer device.SetMaxIdle(time.Hour)()
	advance := stillClock(t)
	const n = 16
	rs := pair(t, device.Options{})
	ipcPeers(rs)
	m := rs[0].proc.Machine()
	in0 := rs[0].proc.Malloc(0, 4*n)
	in1, out := rs[1].proc.Malloc(0, 4*n), rs[1].proc.Malloc(0, 4*n)
	sumOver(t, rs, n, 1, 1, in0, in1, out)
	advance(2 * time.Hour)
	sumOver(t, rs, n, 2, 9, in0, in1, out)
	if st := m.Stats(); st.IPCOpens != 1 || st.IPCCloses != 0 {
		t.Errorf("%d opens, %d closes; want the one mapping reused", st.IPCOpens, st.IPCCloses)
	}
	closeAll(t, rs, m)
}

// closeAll closes both ranks' executors: every mapping must be closed
// with them.
func closeAll(t *testing.T, rs [2]*rank, m *fake.Machine) {
	t.Helper()
	for _, r := range rs {
		if err := r.x.Close(); err != nil {
			t.Error(err)
		}
	}
	if m.OpenMappings() != 0 {
		t.Errorf("%d mappings open after Close", m.OpenMappings())
	}
}

// stillClock makes the IPC mapping policy's clock stand still for the
// test, until advance moves it.
func stillClock(t *testing.T) (advance func(time.Duration)) {
	var mu sync.Mutex
	now := time.Now()
	t.Cleanup(device.SetClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now }))
	return func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
}
