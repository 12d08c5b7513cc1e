package coll_test

import (
	"fmt"
	"runtime"
	"runtime/debug"
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
				const runs = 50
				var err error
				// The window counts every allocation of the process: keep
				// the runtime's own out of it (a GC cycle starting inside
				// it allocates its workers' state), so that what is left
				// is the calls'.
				runtime.GC()
				defer debug.SetGCPercent(debug.SetGCPercent(-1))
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				allocs := testing.AllocsPerRun(runs, func() {
					if e := j.step(); err == nil {
						err = e
					}
				})
				runtime.ReadMemStats(&after)
				if err != nil {
					t.Fatal(err)
				}
				// AllocsPerRun rounds down: count them all too.
				if total := after.Mallocs - before.Mallocs; allocs != 0 || total > runs/10 {
					t.Errorf("%v allocations per steady-state call (all %d ranks), %d in %d calls, want 0", allocs, p, total, runs+1)
				}
			})
		}
	}
}
