package device_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocoll/gocoll/executor/device"
	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/gpu/gputest/fake"
	"github.com/gocoll/gocoll/schedule"
	"github.com/gocoll/gocoll/transport"
)

// Progress never waits for a peer or the GPU: one goroutine steps the
// device calls of every rank in turn, two calls in flight per rank, so a
// Progress that blocked would hang the test (the deadline catches it);
// every collective's result is still right. Staged (small segments, so
// that long messages pipeline), IPC and direct paths; GPU and host
// reductions; at p=3 stream operations are delayed at random, so that
// Progress often finds copies and kernels still running.
func TestDeviceProgressNeverWaits(t *testing.T) {
	paths := []device.Peer{device.PeerStaged, device.PeerIPC, device.PeerDirect}
	for _, p := range []int{1, 2, 3, 4, 5} {
		for pi, path := range paths {
			var mo fake.Options
			if p == 3 {
				mo.Jitter = 50 * time.Microsecond
			}
			j := newJob(t, p, device.Options{Segment: 64, Depth: 2}, path, mo)
			for ci, cs := range stepCollectives() {
				for ni, n := range []int{0, 1, 7, 50} {
					gpuReduce := (ci+ni+pi)%2 == 0
					what := fmt.Sprintf("%s %s p=%d n=%d %v gpu=%v", cs.coll.EnvName(), cs.alg.Name, p, n, path, gpuReduce)
					var all []*collCall
					var xs []*device.Executor
					for seq := range uint32(2) {
						cl := j.calls(t, cs.coll, cs.alg, n, seq, gpuReduce)
						if cl == nil {
							break
						}
						all = append(all, cl...)
						for r := range cl {
							// Each call in flight has its own executor:
							// one runs one call at a time.
							x := j.xs[r]
							if seq > 0 {
								x = device.New(j.xsRuntime(r), device.Options{Segment: 64, Depth: 2}, peersOf(p, r, path))
								t.Cleanup(func() { x.Close() })
							}
							xs = append(xs, x)
						}
					}
					if all == nil {
						continue
					}
					for i, cc := range all {
						if err := xs[i].Start(cc.c); err != nil {
							t.Fatalf("%s: start: %v", what, err)
						}
					}
					stepAll(t, what, xs)
					for _, cc := range all {
						cc.check(t, what)
					}
				}
			}
		}
	}
}

func peersOf(p, r int, path device.Peer) []device.Peer {
	peers := make([]device.Peer, p)
	for q := range peers {
		if q != r {
			peers[q] = path
		}
	}
	return peers
}

// stepAll moves steps by Progress only, from this goroutine, until all
// are done. A Progress that waits for a peer never returns (the peers
// move only here): a watchdog then fails the test binary, naming it.
func stepAll(t *testing.T, what string, steps []*device.Executor) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var in atomic.Int64 // start of the Progress call in flight, in ns; 0: none
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if s := in.Load(); s != 0 && time.Since(time.Unix(0, s)) > 10*time.Second {
				panic(what + ": a Progress call has not returned for 10 s: it waits")
			}
		}
	}()
	done := make([]bool, len(steps))
	deadline := time.Now().Add(20 * time.Second)
	for left := len(steps); left > 0; {
		for i, s := range steps {
			if done[i] {
				continue
			}
			in.Store(time.Now().UnixNano())
			d, _, err := s.Progress()
			in.Store(0)
			if err != nil {
				t.Fatalf("%s: call %d: %v", what, i, err)
			}
			if d {
				done[i] = true
				left--
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d calls never finished", what, left)
		}
	}
}

// A failed call reports the same error stepped as run: here the receiver
// of a staged transfer expects a longer message than the sender sends.
func TestDeviceStepError(t *testing.T) {
	const n = 10
	var b0, b1 schedule.Builder
	b0.Next().Send(1, schedule.Range{Buf: schedule.Input, Len: n})
	b1.Next().Recv(0, schedule.Range{Buf: schedule.Output, Len: n + 1})
	scheds := []*schedule.Schedule{b0.Schedule(), b1.Schedule()}
	errsOf := func(stepped bool, seq uint32) [2]string {
		j := newJob(t, 2, device.Options{}, device.PeerStaged)
		var xs []*device.Executor
		var calls []*device.Call
		for r := range 2 {
			in, out := j.procs[r].Malloc(0, 4*n), j.procs[r].Malloc(0, 4*(n+1))
			calls = append(calls, &device.Call{Sched: scheds[r], ElemSize: 4, T: j.eps[r], Ranks: j.ranks, Tag: transport.Tag{Context: 7, Seq: seq},
				In:  gpu.Buffer{Ptr: in, Len: 4 * n, Mem: j.xsRuntime(r).Classify(in)},
				Out: gpu.Buffer{Ptr: out, Len: 4 * (n + 1), Mem: j.xsRuntime(r).Classify(out)}})
			xs = append(xs, j.xs[r])
		}
		var got [2]string
		if !stepped {
			var wg sync.WaitGroup
			for r := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := xs[r].Run(calls[r]); err != nil {
						got[r] = err.Error()
					}
				}()
			}
			wg.Wait()
			return got
		}
		for r := range 2 {
			if err := xs[r].Start(calls[r]); err != nil {
				t.Fatal(err)
			}
		}
		done := [2]bool{}
		for deadline := time.Now().Add(10 * time.Second); !done[0] || !done[1]; {
			for r := range 2 {
				if done[r] {
					continue
				}
				d, _, err := xs[r].Progress()
				if err != nil {
					got[r] = err.Error()
				}
				done[r] = d
			}
			if time.Now().After(deadline) {
				t.Fatal("the failing calls never ended")
			}
		}
		return got
	}
	run, stepped := errsOf(false, 1), errsOf(true, 2)
	if run[0] != "" || run[1] == "" {
		t.Fatalf("run: errors %q, want the receiver's only", run)
	}
	if !strings.Contains(run[1], "received 40 bytes from rank 0, expected 44") {
		t.Errorf("run: %q does not say what was received", run[1])
	}
	if run != stepped {
		t.Errorf("run fails with %q, stepped with %q", run, stepped)
	}
}
