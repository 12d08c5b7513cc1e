//go:build linux

package shm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/bootstrap"
	"github.com/gocoll/gocoll/transport"
	"github.com/gocoll/gocoll/transport/transporttest"
)

// localJob creates n endpoints in this process, one goroutine per rank
// calling New, as a job of n processes would; each rank maps the segment.
// They are closed when the test ends.
func localJob(t testing.TB, n int, opts Options) []*Endpoint {
	t.Helper()
	kvs := bootstrap.Local(n)
	eps := make([]*Endpoint, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			eps[r], errs[r] = New(kvs[r], opts)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	t.Cleanup(func() {
		for _, ep := range eps {
			ep.Close()
		}
	})
	return eps
}

func asTransports(eps []*Endpoint) []transport.Transport {
	out := make([]transport.Transport, len(eps))
	for i, ep := range eps {
		out[i] = ep
	}
	return out
}

// useCMA makes the endpoints New creates read rendezvous messages with
// cross-memory attach (the default where it works), or copy them through
// the ring, as where it does not; restore undoes it.
func useCMA(cma bool) (restore func()) {
	testNoCMA = !cma
	return func() { testNoCMA = false }
}

func cmaName(cma bool) string {
	if cma {
		return "CMA"
	}
	return "copy"
}

// The conformance suite, once per rendezvous path.
func TestConformance(t *testing.T) {
	for _, cma := range []bool{true, false} {
		t.Run(cmaName(cma), func(t *testing.T) {
			defer useCMA(cma)()
			transporttest.Run(t, func(t *testing.T, n int) []transport.Transport {
				eps := localJob(t, n, Options{})
				for _, p := range eps[0].peers {
					if p != nil && p.cma != cma {
						t.Fatalf("peer %d: CMA %v", p.rank, p.cma)
					}
				}
				return asTransports(eps)
			})
		})
	}
}

// run runs f once per endpoint on its own goroutine and fails the test if
// one fails or they take more than 30 s.
func run(t *testing.T, eps []*Endpoint, f func(ep *Endpoint) error) {
	t.Helper()
	errs := make(chan error, len(eps))
	for _, ep := range eps {
		go func() { errs <- f(ep) }()
	}
	timeout := time.After(30 * time.Second)
	for range eps {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-timeout:
			t.Fatal("still running after 30 s")
		}
	}
}

func exchange(ep *Endpoint, ops []transport.Op) error {
	ep.Start(ops)
	return ep.Wait(ops)
}

func pattern(n, seed int) []byte {
	b := make([]byte, n)
	fill(b, seed, 0)
	return b
}

// The segment is a regular file of this user with mode 0600 while it
// exists, and gone once New returns.
func TestSegmentFile(t *testing.T) {
	old := syscall.Umask(0) // the mode must not depend on the umask
	defer syscall.Umask(old)
	var path string
	var st syscall.Stat_t
	var statErr error
	testBeforeUnlink = func(p string) { path, statErr = p, syscall.Stat(p, &st) }
	defer func() { testBeforeUnlink = nil }()
	localJob(t, 3, Options{JobID: fmt.Sprintf("mode-%d", os.Getpid())})
	if statErr != nil {
		t.Fatal(statErr)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Mode&0o777 != 0o600 || int(st.Uid) != os.Geteuid() {
		t.Errorf("%s: mode %o, owner %d; want a regular file, 0600, owner %d", path, st.Mode, st.Uid, os.Geteuid())
	}
	if want := fmt.Sprintf("/dev/shm/gocoll-mode-%d-0", os.Getpid()); path != want {
		t.Errorf("segment at %s, want %s", path, want)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after New: %v, want it gone", path, err)
	}
}

func TestJobIDChecked(t *testing.T) {
	for _, id := range []string{"../x", "a/b", "a b", ".."} {
		if _, err := New(bootstrap.Local(1)[0], Options{JobID: id}); err == nil {
			t.Errorf("JobID %q accepted", id)
		}
	}
}

// A job whose ranks are all on different hosts has no segment; every op
// fails with ErrBadPeer.
func TestAlone(t *testing.T) {
	ep := localJob(t, 1, Options{})[0]
	if ep.Reaches(0) || ep.Reaches(1) {
		t.Error("a lone rank reaches someone")
	}
	err := exchange(ep, []transport.Op{{Peer: 1, Buf: []byte{1}}})
	if !errors.Is(err, transport.ErrBadPeer) {
		t.Errorf("got %v, want ErrBadPeer", err)
	}
}

// Far more eager bytes than a ring holds, sent before the receiver is
// there: the sender waits for room, the receiver makes it, nothing is
// reordered.
func TestRingFull(t *testing.T) {
	for _, n := range []int{2, 9} { // 9 ranks: smaller rings
		t.Run(fmt.Sprint(n, "ranks"), func(t *testing.T) {
			eps := localJob(t, n, Options{Timeout: 20 * time.Second})
			const count = 300
			size := func(i int) int { return []int{eps[0].peers[1].eager, 1, 0, 4000, eps[0].peers[1].eager - 1}[i%5] }
			run(t, eps[:2], func(ep *Endpoint) error {
				ops := make([]transport.Op, count)
				if ep.Rank() == 0 {
					for i := range ops {
						ops[i] = transport.Op{Peer: 1, Buf: pattern(size(i), i)}
					}
					return exchange(ep, ops)
				}
				time.Sleep(50 * time.Millisecond)
				for i := range ops {
					ops[i] = transport.Op{Peer: 0, Buf: make([]byte, size(i)), Recv: true}
				}
				if err := exchange(ep, ops); err != nil {
					return err
				}
				for i := range ops {
					if ops[i].N != size(i) || !bytes.Equal(ops[i].Buf, pattern(size(i), i)) {
						return fmt.Errorf("message %d wrong", i)
					}
				}
				return nil
			})
		})
	}
}

// Goroutines of each rank run rounds on their own contexts at the same
// time, with messages on both paths.
func TestConcurrentMixed(t *testing.T) {
	for _, cma := range []bool{true, false} {
		t.Run(cmaName(cma), func(t *testing.T) {
			restore := useCMA(cma)
			eps := localJob(t, 3, Options{Timeout: 20 * time.Second})
			restore()
			sizes := []int{0, 100, 32<<10 + 1, 64 << 10, 64<<10 + 1, 200000}
			run(t, eps, func(ep *Endpoint) error {
				var wg sync.WaitGroup
				errs := make([]error, 4)
				for g := range errs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						me := ep.Rank()
						right, left := (me+1)%3, (me+2)%3
						for i := range 60 {
							size := sizes[(i+g)%len(sizes)]
							tag := transport.Tag{Context: uint32(g), Seq: uint32(i)}
							ops := []transport.Op{
								{Peer: left, Tag: tag, Buf: make([]byte, size), Recv: true},
								{Peer: right, Tag: tag, Buf: pattern(size, me*1000+g*100+i)},
							}
							if err := exchange(ep, ops); err != nil {
								errs[g] = err
								return
							}
							if !bytes.Equal(ops[0].Buf, pattern(size, left*1000+g*100+i)) {
								errs[g] = fmt.Errorf("rank %d goroutine %d round %d: wrong data", me, g, i)
								return
							}
						}
					}()
				}
				wg.Wait()
				return errors.Join(errs...)
			})
		})
	}
}

// A receive whose peer never sends fails after Options.Timeout, naming
// the peer, and so does everything after it.
func TestTimeout(t *testing.T) {
	eps := localJob(t, 2, Options{Timeout: 200 * time.Millisecond})
	start := time.Now()
	err := exchange(eps[0], []transport.Op{{Peer: 1, Buf: make([]byte, 8), Recv: true}})
	var te *transport.Error
	if !errors.Is(err, transport.ErrTimeout) || !errors.As(err, &te) || te.Peer != 1 {
		t.Fatalf("got %v, want ErrTimeout from rank 1", err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 3*time.Second {
		t.Errorf("timed out after %v, want 200 ms", d)
	}
	if err := exchange(eps[0], []transport.Op{{Peer: 1, Buf: []byte{1}}}); !errors.Is(err, transport.ErrTimeout) {
		t.Errorf("after a timeout: got %v, want the endpoint failed", err)
	}
}

// A rendezvous send withdrawn by Close fails at the receiver; an eager
// one sent before Close is still delivered.
func TestCloseWithdrawsSends(t *testing.T) {
	for _, cma := range []bool{true, false} {
		t.Run(cmaName(cma), func(t *testing.T) {
			restore := useCMA(cma)
			eps := localJob(t, 2, Options{Timeout: 10 * time.Second})
			restore()
			sends := []transport.Op{
				{Peer: 1, Tag: tag(1), Buf: pattern(10, 1)},
				{Peer: 1, Tag: tag(2), Buf: pattern(1<<20, 2)},
			}
			eps[0].Start(sends)
			eps[0].Close()
			if err := eps[0].Wait(sends); !errors.Is(sends[1].Err, transport.ErrClosed) || sends[0].Err != nil {
				t.Fatalf("sends after Close: %v, %v (Wait: %v)", sends[0].Err, sends[1].Err, err)
			}
			recvs := []transport.Op{
				{Peer: 0, Tag: tag(1), Buf: make([]byte, 10), Recv: true},
				{Peer: 0, Tag: tag(2), Buf: make([]byte, 1<<20), Recv: true},
			}
			exchange(eps[1], recvs)
			if recvs[0].Err != nil || !bytes.Equal(recvs[0].Buf, pattern(10, 1)) {
				t.Errorf("eager message sent before Close: %v", recvs[0].Err)
			}
			var te *transport.Error
			if !errors.Is(recvs[1].Err, transport.ErrPeerFailed) || !errors.As(recvs[1].Err, &te) || te.Peer != 0 {
				t.Errorf("withdrawn rendezvous: got %v, want ErrPeerFailed from rank 0", recvs[1].Err)
			}
		})
	}
}

func tag(round int) transport.Tag { return transport.Tag{Context: 3, Round: uint32(round)} }

// Close wakes a goroutine of the same endpoint asleep in Wait.
func TestCloseWakesWaiter(t *testing.T) {
	eps := localJob(t, 2, Options{})
	done := make(chan error, 1)
	go func() { done <- exchange(eps[0], []transport.Op{{Peer: 1, Buf: make([]byte, 8), Recv: true}}) }()
	time.Sleep(50 * time.Millisecond) // asleep on the futex by now
	eps[0].Close()
	select {
	case err := <-done:
		if !errors.Is(err, transport.ErrClosed) {
			t.Fatalf("got %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait still blocked 5 s after Close")
	}
}

// An op in steady state allocates nothing, on every path.
func TestZeroAllocs(t *testing.T) {
	for _, tc := range []struct {
		size int
		cma  bool
	}{{0, true}, {8, true}, {1 << 10, true}, {32 << 10, true}, {32<<10 + 1, true}, {1 << 20, true}, {64 << 10, false}, {64<<10 + 1, false}, {1 << 20, false}} {
		t.Run(fmt.Sprintf("%d/%s", tc.size, cmaName(tc.cma)), func(t *testing.T) {
			restore := useCMA(tc.cma)
			eps := localJob(t, 2, Options{Timeout: 20 * time.Second})
			restore()
			const warm, runs = 20, 100
			bufs := [2][2][]byte{{make([]byte, tc.size), make([]byte, tc.size)}, {make([]byte, tc.size), make([]byte, tc.size)}}
			var ops [2][]transport.Op
			for r := range ops {
				ops[r] = make([]transport.Op, 2)
			}
			round := func(r int) error {
				ops[r][0] = transport.Op{Peer: 1 - r, Buf: bufs[r][0], Recv: true}
				ops[r][1] = transport.Op{Peer: 1 - r, Buf: bufs[r][1]}
				eps[r].Start(ops[r])
				return eps[r].Wait(ops[r])
			}
			partner := make(chan error, 1)
			go func() {
				for range warm + runs + 1 {
					if err := round(1); err != nil {
						partner <- err
						return
					}
				}
				partner <- nil
			}()
			for range warm {
				if err := round(0); err != nil {
					t.Fatal(err)
				}
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			allocs := testing.AllocsPerRun(runs, func() {
				if err := round(0); err != nil {
					t.Fatal(err)
				}
			})
			runtime.ReadMemStats(&after)
			// AllocsPerRun rounds down; count them all, both ranks'.
			if total := after.Mallocs - before.Mallocs; total > runs/10 {
				t.Errorf("%d allocations in %d rounds", total, runs+1)
			}
			if err := <-partner; err != nil {
				t.Fatal(err)
			}
			if allocs != 0 {
				t.Errorf("%v allocations per op", allocs)
			}
		})
	}
}

// A segment left by a job killed inside New is replaced if its creator is
// gone; one whose creator lives is not touched. (The ranks here are
// goroutines of one process, so the other rank cannot see the creator
// give up by its exit, as ranks in processes do: it waits out Timeout.)
func TestStaleSegment(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip(err)
	}
	for _, tc := range []struct {
		creator int
		ok      bool
	}{{dead.Process.Pid, true}, {os.Getpid(), false}} {
		job := fmt.Sprintf("stale-%d-%d", os.Getpid(), tc.creator)
		path := "/dev/shm/gocoll-" + job + "-0"
		h := header{magic: segMagic, version: segVersion, creator: uint32(tc.creator)}
		b := make([]byte, headerLen)
		copy(b, unsafe.Slice((*byte)(unsafe.Pointer(&h)), unsafe.Sizeof(h)))
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		kvs := bootstrap.Local(2)
		errs := make(chan error, 2)
		for _, k := range kvs {
			go func() {
				ep, err := New(k, Options{JobID: job, Timeout: 2 * time.Second})
				if err == nil {
					ep.Close()
				}
				errs <- err
			}()
		}
		var err error
		for range kvs {
			select {
			case e := <-errs:
				err = errors.Join(err, e)
			case <-time.After(10 * time.Second):
				t.Fatal("New still running after 10 s")
			}
		}
		os.Remove(path)
		if (err == nil) != tc.ok {
			t.Errorf("creator %d: New: %v", tc.creator, err)
		}
	}
}
