package device_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocoll/gocoll/executor/device"
	"github.com/gocoll/gocoll/gpu/fake"
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
