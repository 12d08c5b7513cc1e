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
	tu, _ := tuner.New(func(string) string { return "" })
	cfg := &coll.Config{Tuner: tu, JobID: "allocs"}
	eps := inproc.New(p)
	ranks := make([]int, p)
	for i := range ranks {
		ranks[i] = i
	}
	j := &allocRanks{comms: make([]*coll.Comm, p), go_: make([]chan struct{}, p), done: make(chan error, p)}
	var wg sync.WaitGroup
	for r := range p {
		var err error
		if j.comms[r], err = coll.NewComm(eps[r], ranks, 1, "allocs", cfg); err != nil {
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

// The README's promise, checked rather than read off a benchmark: once a
// communicator has made a call (its schedule and scratch are cached),
// the same call again allocates nothing — every collective, every
// algorithm, small and large, in place and not, through the host executor
// and the in-process transport, and the rooted calls and the barrier.
// testing.AllocsPerRun counts every allocation of the process, so the
// ranks in other goroutines count too.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	const p = 4
	type call struct {
		name string
		run  func(c *coll.Comm, a coll.Args) error
		args func(n int, send, recv []byte) coll.Args // n: float32 elements of the whole vector
	}
	sum := coll.Op{Builtin: ops.Sum}
	var calls []call
	for _, c := range algorithms.Collectives {
		for _, alg := range algorithms.Names(c) {
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
				// loaded machine a window sometimes holds one allocation
				// at a high-water mark instead, with the calls' frames on
				// its stack: the runtime's sudog cache growing under a
				// sync.Cond wait, the in-process transport's send queue
				// growing when a rank runs further ahead than ever before
				// (seen with -v and a busy machine). So a call passes when
				// one of three windows is clean, and a failure names the
				// allocating stacks of its last window.
				var sites string
				for try := range 3 {
					calls, where, err := allocsInWindow(func() error { return j.step() })
					if err != nil {
						t.Fatal(err)
					}
					if calls == 0 {
						if try > 0 {
							t.Logf("clean on window %d of 3 (%s)", try+1, sites)
						}
						return
					}
					sites = fmt.Sprintf("%d allocations in %d steps of all %d ranks, want 0; where:\n%s", calls, allocRuns+1, p, where)
				}
				t.Error(sites)
			})
		}
	}
}

const allocRuns = 50

// allocsInWindow counts the allocations made over allocRuns+1 calls of
// step (testing.AllocsPerRun's warm-up call included) from an exact
// profile (MemProfileRate 1), leaving out those whose stack is the
// runtime's alone: a GC worker, the stop-the-world of ReadMemStats moving
// timers between Ps, a thread started. Those are not the calls', and the
// process-wide count (MemStats.Mallocs) counted them: CI failed on them.
// where lists every allocating stack of the window, the runtime's marked.
func allocsInWindow(step func() error) (calls int64, where string, err error) {
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = 1
	publishProfile()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	before := memProfile()
	testing.AllocsPerRun(allocRuns, func() {
		if e := step(); err == nil {
			err = e
		}
	})
	publishProfile()
	calls, where = newAllocSites(before, memProfile())
	return calls, where, err
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

// newAllocSites counts the objects allocated between two profiles by
// stacks with a frame outside the runtime, and formats every allocating
// stack.
func newAllocSites(before, after []runtime.MemProfileRecord) (calls int64, where string) {
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
		runtimeOnly := true
		frames := runtime.CallersFrames(r.Stack())
		for {
			f, more := frames.Next()
			fmt.Fprintf(&stack, "\t%s %s:%d\n", f.Function, f.File, f.Line)
			runtimeOnly = runtimeOnly && strings.HasPrefix(f.Function, "runtime.")
			if !more {
				break
			}
		}
		if strings.Contains(stack.String(), ".memProfile ") { // the profile's own slice
			continue
		}
		kind := ""
		if runtimeOnly {
			kind = " (the runtime's own, not counted)"
		} else {
			calls += n
		}
		fmt.Fprintf(&b, "%d objects%s at:\n%s", n, kind, stack.String())
	}
	return calls, b.String()
}
