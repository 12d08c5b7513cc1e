package coll_test

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/transport/inproc"
	"github.com/gocoll/gocoll/tuner"
)

// allocRanks is a job of p in-process ranks whose ranks 1..p-1 run in
// goroutines of their own, each call started by a channel send: one step
// makes every rank call once, rank 0 in the caller's goroutine, and
// allocates nothing of its own.
type allocRanks struct {
	comms []*coll.Comm
	call  func(r int) error
	go_   []chan struct{}
	done  chan error
}

func newAllocRanks(t *testing.T, p int) *allocRanks {
	t.Helper()
	tu, _ := tuner.New(envvar.Settings{})
	cfg := &coll.Config{Tuner: tu, JobID: "allocs"}
	eps := inproc.New(p)
	ranks := make([]int, p)
	for i := range ranks {
		ranks[i] = i
	}
	nodes := algorithms.NewNodeMap(make([]string, p))
	j := &allocRanks{comms: make([]*coll.Comm, p), go_: make([]chan struct{}, p), done: make(chan error, p)}
	var wg sync.WaitGroup
	for r := range p {
		var err error
		if j.comms[r], err = coll.NewComm(eps[r], ranks, 1, "allocs", cfg); err != nil {
			t.Fatal(err)
		}
		// Every call carries the node map (Params.Nodes), made once.
		if err := j.comms[r].SetNodes(nodes); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); j.comms[r].AttachShared() }() // collective
	}
	wg.Wait()
	for r := 1; r < p; r++ {
		j.go_[r] = make(chan struct{})
		go func() {
			for range j.go_[r] {
				j.done <- j.call(r)
			}
		}()
	}
	t.Cleanup(func() {
		for r := 1; r < p; r++ {
			close(j.go_[r])
		}
		for _, ep := range eps {
			ep.Close()
		}
	})
	return j
}

// step makes every rank call j.call once and returns the first error.
func (j *allocRanks) step() error {
	for r := 1; r < len(j.comms); r++ {
		j.go_[r] <- struct{}{}
	}
	err := j.call(0)
	for r := 1; r < len(j.comms); r++ {
		if e := <-j.done; err == nil {
			err = e
		}
	}
	return err
}

// docs/internals.md's promise, checked rather than read off a benchmark: once a
// communicator has made a call (its schedule and scratch are cached),
// the same call again allocates nothing — every collective, every
// algorithm, small and large, in place and not, through the host executor
// and the in-process transport, and the rooted calls and the barrier.
// testing.AllocsPerRun counts every allocation of the process, so the
// ranks in other goroutines count too.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	const p = 4
	// Set explicitly, GOMAXPROCS stays put: the runtime otherwise follows
	// the CPU limit and, changing it, reallocates its Ps' timer heaps.
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	type call struct {
		name string
		run  func(c *coll.Comm, a coll.Args) error
		args func(n int, send, recv []byte) coll.Args // n: float32 elements of the whole vector
	}
	sum := coll.Op{Builtin: ops.Sum}
	var calls []call
	for _, c := range algorithms.Collectives {
		for _, alg := range algorithms.Names(c) {
			if a, _ := algorithms.Lookup(c, alg); a != nil && !a.OnHost() {
				continue // CUDA memory only (a forced one falls back here, each call)
			}
			for _, inPlace := range []bool{false, true} {
				cl := call{name: fmt.Sprintf("%s/%s/inplace=%v", c.EnvName(), alg, inPlace)}
				switch c {
				case algorithms.Allreduce:
					cl.run = (*coll.Comm).Allreduce
					cl.args = func(n int, send, recv []byte) coll.Args {
						return coll.Args{Send: send, Recv: recv, Count: n, Type: ops.Float, Op: sum, Algorithm: alg, InPlace: inPlace}
					}
				case algorithms.ReduceScatter:
					cl.run = (*coll.Comm).ReduceScatter
					cl.args = func(n int, send, recv []byte) coll.Args {
						counts := []int{n / p, n / p, n / p, n / p}
						if !inPlace {
							recv = recv[:n/p*4]
						}
						return coll.Args{Send: send, Recv: recv, Counts: counts, Type: ops.Float, Op: sum, Algorithm: alg, InPlace: inPlace}
					}
				case algorithms.ReduceScatterBlock:
					cl.run = (*coll.Comm).ReduceScatterBlock
					cl.args = func(n int, send, recv []byte) coll.Args {
						if !inPlace {
							recv = recv[:n/p*4]
						}
						return coll.Args{Send: send, Recv: recv, Count: n / p, Type: ops.Float, Op: sum, Algorithm: alg, InPlace: inPlace}
					}
				default:
					cl.run = (*coll.Comm).Allgather
					cl.args = func(n int, send, recv []byte) coll.Args {
						return coll.Args{Send: send[:n/p*4], Recv: recv, Count: n / p, Type: ops.Float, Algorithm: alg, InPlace: inPlace}
					}
				}
				calls = append(calls, cl)
			}
		}
	}
	calls = append(calls,
		call{name: "allgatherv", run: (*coll.Comm).Allgatherv, args: func(n int, send, recv []byte) coll.Args {
			return coll.Args{Send: send[:n/p*4], Recv: recv, Counts: []int{n / p, n / p, n / p, n / p}, Type: ops.Float}
		}},
		call{name: "bcast", run: (*coll.Comm).Bcast, args: func(n int, send, recv []byte) coll.Args {
			return coll.Args{Recv: recv, Count: n, Type: ops.Float, Root: 1}
		}},
		call{name: "reduce", run: (*coll.Comm).Reduce, args: func(n int, send, recv []byte) coll.Args {
			return coll.Args{Send: send, Recv: recv, Count: n, Type: ops.Float, Op: sum, Root: 2}
		}},
		call{name: "gather", run: (*coll.Comm).Gather, args: func(n int, send, recv []byte) coll.Args {
			return coll.Args{Send: send[:n/p*4], Recv: recv, Count: n / p, Type: ops.Float, Root: 3}
		}},
		call{name: "barrier", run: func(c *coll.Comm, _ coll.Args) error { return c.Barrier() },
			args: func(int, []byte, []byte) coll.Args { return coll.Args{} }},
	)
	for _, size := range []int{64, 64 << 10} { // bytes of the whole vector
		for _, cl := range calls {
			t.Run(fmt.Sprintf("%s/%dB", cl.name, size), func(t *testing.T) {
				j := newAllocRanks(t, p)
				n := size / 4
				args := make([]coll.Args, p)
				for r := range p {
					args[r] = cl.args(n, make([]byte, n*4), make([]byte, n*4))
				}
				j.call = func(r int) error { return cl.run(j.comms[r], args[r]) }
				for range 3 { // the first calls build the schedule and scratch
					if err := j.step(); err != nil {
						t.Fatal(err)
					}
				}
				// A call that allocates does so in every window. On a
				// loaded machine a window sometimes holds an allocation
				// at a high-water mark instead: the runtime's sudog cache
				// growing under a sync.Cond wait, the in-process
				// transport's send queue growing when a rank runs further
				// ahead than ever before, the runtime's timer heaps when
				// it changes GOMAXPROCS (seen with -v on a busy machine;
				// the test pins GOMAXPROCS for that). So a call passes
				// when one of three windows is clean, and a failure names
				// the allocating stacks of its last window.
				windows := make([]uint64, 0, 3) // each window's: the test allocates nothing between them
				var where string
				for range 3 {
					n, w, err := allocsInWindow(func() error { return j.step() })
					if err != nil {
						t.Fatal(err)
					}
					windows, where = append(windows, n), w
					if n == 0 {
						break
					}
				}
				if last := windows[len(windows)-1]; last != 0 {
					t.Errorf("allocations in 51 steps of all %d ranks, by window: %v, want 0 in one; the last window's stacks:\n%s", p, windows, where)
				} else if len(windows) > 1 {
					t.Logf("clean on window %d of 3 (allocations by window: %v)", len(windows), windows)
				}
			})
		}
	}
}

const allocRuns = 50

// allocsInWindow counts the process's allocations (MemStats.Mallocs)
// over allocRuns+1 calls of step (testing.AllocsPerRun's warm-up call
// included), with a fresh GC behind the window and collection off inside
// it. where lists the allocating stacks an allocation profile saw over the
// window, for a failure's message: the profile lags behind (it showed a
// scratch buffer allocated before a window as the window's), so it
// explains a count but does not make it.
func allocsInWindow(step func() error) (mallocs uint64, where string, err error) {
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = 1
	publishProfile()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	before := memProfile()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	testing.AllocsPerRun(allocRuns, func() {
		if e := step(); err == nil {
			err = e
		}
	})
	runtime.ReadMemStats(&m1)
	if m1.Mallocs != m0.Mallocs {
		publishProfile()
		where = newAllocSites(before, memProfile())
	}
	return m1.Mallocs - m0.Mallocs, where, err
}

// publishProfile makes the profile show every allocation made so far: it
// lags by up to two garbage collections.
func publishProfile() {
	runtime.GC()
	runtime.GC()
}

func memProfile() []runtime.MemProfileRecord {
	n, _ := runtime.MemProfile(nil, true)
	recs := make([]runtime.MemProfileRecord, n+64)
	n, _ = runtime.MemProfile(recs, true)
	return recs[:n]
}

// newAllocSites formats the stacks that allocated between two profiles.
func newAllocSites(before, after []runtime.MemProfileRecord) string {
	seen := map[[32]uintptr]int64{}
	for _, r := range before {
		seen[r.Stack0] = r.AllocObjects
	}
	var b strings.Builder
	for _, r := range after {
		n := r.AllocObjects - seen[r.Stack0]
		if n <= 0 {
			continue
		}
		var stack strings.Builder
		frames := runtime.CallersFrames(r.Stack())
		for {
			f, more := frames.Next()
			fmt.Fprintf(&stack, "\t%s %s:%d\n", f.Function, f.File, f.Line)
			if !more {
				break
			}
		}
		if strings.Contains(stack.String(), "coll_test.memProfile ") || strings.Contains(stack.String(), "coll_test.newAllocSites ") {
			continue // the test's own: the profile's slice, formatting the last window's
		}
		fmt.Fprintf(&b, "%d objects at:\n%s", n, stack.String())
	}
	return b.String()
}
