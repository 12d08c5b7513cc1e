package coll_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/gpu/gputest/fake"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/tuner"
)

// hierarchicalMaps are the node maps the hierarchical tests run on: the
// host of each rank.
var hierarchicalMaps = []struct {
	name  string
	hosts []string
}{
	{"2x2", []string{"a", "a", "b", "b"}},
	{"uneven 3/2/1", []string{"a", "a", "a", "b", "b", "c"}},
	{"uneven 2/3", []string{"a", "a", "b", "b", "b"}},
	{"round-robin 3/3/2", []string{"a", "b", "c", "a", "b", "c", "a", "b"}},
	{"one rank per node", []string{"a", "b", "c"}},
	{"one node", []string{"a", "a", "a"}},
}

// hierarchicalCalls lists, for p ranks and L slices, every collective
// with the hierarchical algorithm forced, in place and not, with counts
// 0, 1, L-1, odd and large (several segment slots, and CMA-sized
// allgather blocks), a sum on int64 (exact) and the non-commutative user
// op (rank order matters) where the map keeps it in rank order (nodes of
// consecutive ranks); with ranks round-robin it is left to the tuner.
func hierarchicalCalls(p, L int, ordered bool) []call {
	var calls []call
	sizes := []int{0, 1, max(L-1, 0), 37, 40000}
	for _, c := range []algorithms.Collective{algorithms.Allreduce, algorithms.ReduceScatter, algorithms.ReduceScatterBlock, algorithms.Allgather} {
		for i, n := range sizes {
			counts := make([]int, p)
			switch c {
			case algorithms.Allreduce:
				counts = []int{n}
			case algorithms.ReduceScatterBlock:
				for r := range counts {
					counts[r] = n / p
				}
			default: // irregular blocks, with zeros, about n in all
				for r := range counts {
					if (r+i)%3 != 1 {
						counts[r] = n / p * (1 + (r+i)%3)
					}
				}
				counts[p-1] += n % 7
			}
			for _, inPlace := range []bool{false, true} {
				calls = append(calls, call{coll: c, alg: "hierarchical", typ: ops.Int64, op: ops.Sum, inPlace: inPlace, counts: counts})
				if c.Reduces() && n < 1000 {
					alg := "hierarchical"
					if !ordered {
						alg = "" // the hierarchical algorithm cannot keep rank order
					}
					calls = append(calls, call{coll: c, alg: alg, typ: ops.TwoInt, user: true, inPlace: inPlace, counts: counts})
				}
			}
		}
	}
	return calls
}

// The hierarchical algorithms with real data on faked hosts, against the
// naive reference, all on one communicator back to back: where the map
// has several nodes with several ranks, the shm form (the node
// communicators' segments for the intra-node phases, the slice
// communicators for the inter-node phase); elsewhere the flat algorithm.
// GOCOLL_DEBUG=info must say which form ran.
func TestHierarchicalSharedMemoryForm(t *testing.T) {
	for _, tc := range hierarchicalMaps {
		m := algorithms.NewNodeMap(tc.hosts)
		p, composes := m.P(), algorithms.Composes(m)
		L := 1
		if composes {
			L = algorithms.SliceCount(m)
		}
		ordered := true
		for j := range m.NumNodes() {
			rs := m.Ranks(j)
			ordered = ordered && rs[len(rs)-1]-rs[0] == len(rs)-1
		}
		calls := hierarchicalCalls(p, L, ordered)
		debug := &lockedWriter{}
		jobOnHosts(t, tc.hosts, debug, func(cm *coll.Comm) error {
			// A wrong result does not stop the rank: the others would
			// wait for it on a segment forever.
			var wrong error
			for i, c := range calls {
				in := c.inputs(p, uint64(i))
				got, err := c.run(cm, in[cm.Rank()])
				if err != nil {
					return fmt.Errorf("%s: %v: %w", tc.name, c, err)
				}
				if want := c.reference(in, cm.Rank()); !equal(c.typ, got, want) && wrong == nil {
					wrong = fmt.Errorf("%s: %v: result differs from the naive reference", tc.name, c)
				}
			}
			return wrong
		})
		log := debug.String()
		ran := 0
		for line := range strings.Lines(log) {
			if !strings.Contains(line, "comm=MPI_COMM_WORLD") || !strings.Contains(line, "algorithm=hierarchical") {
				continue
			}
			ran++
			switch {
			case composes && !strings.Contains(line, "form=shm"):
				t.Errorf("%s: a hierarchical call did not take the shm form: %s", tc.name, line)
			case !composes && strings.Contains(line, "form="):
				t.Errorf("%s: a flat map's call names a form: %s", tc.name, line)
			}
		}
		if ran == 0 {
			t.Errorf("%s: no hierarchical call in the debug log", tc.name)
		}
		setups := strings.Count(log, "hierarchical runs its intra-node phases on shared memory")
		if want := map[bool]int{true: p, false: 0}[composes]; setups != want {
			t.Errorf("%s: %d ranks made node and slice communicators, want %d (once per rank)", tc.name, setups, want)
		}
		if composes && !strings.Contains(log, "comm=MPI_COMM_WORLD/slice") {
			t.Errorf("%s: no inter-node call on a slice communicator in the debug log", tc.name)
		}
	}
}

// Freeing a communicator frees the node and slice communicators its
// hierarchical calls made: a communicator made after them gets the same
// context every time.
func TestHierarchicalFreesItsCommunicators(t *testing.T) {
	jobOnHosts(t, []string{"a", "a", "b", "b"}, nil, func(world *coll.Comm) error {
		seen := map[uint32]bool{}
		for i := range 5 {
			c, err := world.Dup("tmp")
			if err != nil {
				return err
			}
			v := make([]byte, 8*5)
			if err := c.Allreduce(coll.Args{InPlace: true, Recv: v, Count: 5, Type: ops.Int64, Op: coll.Op{Builtin: ops.Sum}, Algorithm: "hierarchical"}); err != nil {
				return fmt.Errorf("call %d: %w", i, err)
			}
			probe, err := world.Dup("probe")
			if err != nil {
				return err
			}
			seen[probe.Context()] = true
			probe.Free()
			c.Free()
		}
		if len(seen) != 1 {
			return fmt.Errorf("a communicator made after the hierarchical calls got %d distinct contexts, want 1", len(seen))
		}
		return nil
	})
}

// On (fake) CUDA device memory hierarchical keeps the schedule form, and
// says so; host calls on the same communicator take the shared-memory
// form, whichever came first.
func TestHierarchicalOnDeviceMemoryKeepsTheSchedule(t *testing.T) {
	hosts := []string{"a", "a", "b", "b"}
	debug := &lockedWriter{}
	calls := []call{
		{coll: algorithms.Allreduce, alg: "hierarchical", typ: ops.Int64, op: ops.Sum, counts: []int{37}},
		{coll: algorithms.ReduceScatter, alg: "hierarchical", typ: ops.Int64, op: ops.Sum, inPlace: true, counts: []int{3, 0, 5, 2}},
		{coll: algorithms.Allgather, alg: "hierarchical", typ: ops.Int64, counts: []int{4, 4, 4, 4}},
	}
	gpuJob(t, len(hosts), gpuSetup{debug: debug}, func(cm *coll.Comm, proc *fake.Process, dev int) error {
		if err := cm.SetNodes(algorithms.NewNodeMap(hosts)); err != nil {
			return err
		}
		if err := runMatrix(cm, proc, dev, calls); err != nil {
			return err
		}
		for i, c := range calls {
			in := c.inputs(len(hosts), uint64(i))
			got, err := c.run(cm, in[cm.Rank()])
			if err != nil {
				return fmt.Errorf("%v: %w", c, err)
			}
			if !equal(c.typ, got, c.reference(in, cm.Rank())) {
				return fmt.Errorf("%v on host memory: result differs from the naive reference", c)
			}
		}
		return nil
	})
	log := debug.String()
	for _, want := range []string{"algorithm=hierarchical (forced) form=schedule memory=device", "algorithm=hierarchical (forced) form=shm\n"} {
		if n := strings.Count(log, want); n != len(hosts)*len(calls) {
			t.Errorf("%d lines with %q, want %d:\n%s", n, want, len(hosts)*len(calls), log)
		}
	}
}

// Hierarchical requests run as one piece on a goroutine of their own (the
// shm form is not resumable), also when the first of them makes the node
// and slice communicators (gocoll's own calls on the communicator, made
// while the request is being begun at the head of its queue), with and
// without the progress goroutine, and a blocking call after them waits
// for them.
func TestHierarchicalRequests(t *testing.T) {
	const n = 1000
	for _, thread := range []bool{false, true} {
		hosts := []string{"a", "a", "b", "b"}
		tu, _ := tuner.New(envvar.Settings{})
		cfg := &coll.Config{Tuner: tu, JobID: "hreq", ProgressThread: thread}
		runRanks(t, "", len(hosts), cfg, algorithms.NewNodeMap(hosts), func(cm *coll.Comm) error {
			cm.OwnProgress()
			p, me := cm.Size(), cm.Rank()
			var reqs []*coll.Request
			var outs [][]byte
			for k := range 3 {
				out := make([]byte, 8*n)
				r, err := cm.Iallreduce(coll.Args{Send: rankVector(me, n, k), Recv: out, Count: n, Type: ops.Int64, Op: coll.Op{Builtin: ops.Sum}, Algorithm: "hierarchical"})
				if err != nil {
					return fmt.Errorf("thread=%v: start %d: %w", thread, k, err)
				}
				reqs, outs = append(reqs, r), append(outs, out)
			}
			blocking := make([]byte, 8*n)
			if err := cm.Allreduce(coll.Args{Send: rankVector(me, n, 7), Recv: blocking, Count: n, Type: ops.Int64, Op: coll.Op{Builtin: ops.Sum}, Algorithm: "hierarchical"}); err != nil {
				return fmt.Errorf("thread=%v: blocking: %w", thread, err)
			}
			for k, r := range reqs {
				if !r.Done() {
					return fmt.Errorf("thread=%v: request %d is not complete after a blocking call that came after it", thread, k)
				}
				if err := r.Wait(); err != nil {
					return fmt.Errorf("thread=%v: request %d: %w", thread, k, err)
				}
				if !r.Offloaded() {
					return fmt.Errorf("thread=%v: request %d did not run as one piece", thread, k)
				}
				if err := sumOf(p, n, k, outs[k]); err != nil {
					return fmt.Errorf("thread=%v: request %d: %w", thread, k, err)
				}
			}
			return sumOf(p, n, 7, blocking)
		})
	}
}
