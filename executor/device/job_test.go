package device_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/device"
	"github.com/gocoll/gocoll/executor/host"
	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/gpu/gputest/fake"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/transport"
	"github.com/gocoll/gocoll/transport/inproc"
)

// job is p ranks on one fake node (machine options optional), each a
// fake CUDA process with its own executor, over inproc endpoints; path is
// how they reach each other.
type job struct {
	procs []*fake.Process
	xs    []*device.Executor
	eps   []transport.Transport
	ranks []int
}

func newJob(t testing.TB, p int, opts device.Options, path device.Peer, machine ...fake.Options) *job {
	var mo fake.Options
	if len(machine) > 0 {
		mo = machine[0]
	}
	m := fake.NewMachine(mo)
	j := &job{ranks: make([]int, p)}
	for r, ep := range inproc.New(p) {
		proc := m.NewProcess()
		proc.AppInit(0)
		rt, err := gpu.NewRuntime(proc, gpu.Auto)
		if err != nil {
			t.Fatal(err)
		}
		peers := make([]device.Peer, p)
		for q := range peers {
			if q != r {
				peers[q] = path
			}
		}
		j.procs = append(j.procs, proc)
		j.xs = append(j.xs, device.New(rt, opts, peers))
		j.eps = append(j.eps, ep)
		j.ranks[r] = r
	}
	t.Cleanup(func() {
		for r := range j.xs {
			j.xs[r].Close()
			j.eps[r].Close()
		}
	})
	return j
}

// collCall is one rank's part of a float32 MPI_SUM collective of count
// elements per block, in device memory: rank r's input element i is
// r*1000 + i.
type collCall struct {
	c    *device.Call
	proc *fake.Process
	out  uintptr
	want []float32
}

// calls builds every rank's part of collective coll by algorithm alg
// with blocks of n elements, tagged seq; gpuReduce picks the GPU kernel
// (else the host's).
func (j *job) calls(t testing.TB, coll algorithms.Collective, alg *algorithms.Algorithm, n int, seq uint32, gpuReduce bool) []*collCall {
	p := len(j.procs)
	counts := make([]int, p)
	for r := range counts {
		counts[r] = n + r%2 // uneven blocks
	}
	total := 0
	for _, c := range counts {
		total += c
	}
	k, err := ops.Lookup(ops.Sum, ops.Float)
	if err != nil {
		t.Fatal(err)
	}
	var out []*collCall
	for r := range p {
		par := algorithms.Params{P: p, Rank: r, Commutative: true, DeviceMemory: true}
		var inLen, outLen int
		var want []float32
		switch coll {
		case algorithms.Allreduce:
			par.Count, inLen, outLen = total, total, total
			for i := range total {
				want = append(want, float32(sumRanks(p)*1000+p*i))
			}
		case algorithms.ReduceScatter:
			par.Counts, inLen, outLen = counts, total, counts[r]
			off := 0
			for q := range r {
				off += counts[q]
			}
			for i := range counts[r] {
				want = append(want, float32(sumRanks(p)*1000+p*(off+i)))
			}
		case algorithms.Allgather:
			par.Counts, inLen, outLen = counts, counts[r], total
			for q := range p {
				for i := range counts[q] {
					want = append(want, float32(q*1000+i))
				}
			}
		}
		if alg.Check(par) != nil {
			return nil
		}
		s := alg.Build(par)
		in, o := j.procs[r].Malloc(0, 4*max(inLen, 1)), j.procs[r].Malloc(0, 4*max(outLen, 1))
		v := make([]float32, inLen)
		for i := range v {
			v[i] = float32(r*1000 + i)
		}
		floats(j.procs[r], in, v...)
		c := &device.Call{Sched: s, ElemSize: 4, T: j.eps[r], Ranks: j.ranks, Tag: transport.Tag{Context: 7, Seq: seq},
			In:  gpu.Buffer{Ptr: in, Len: 4 * inLen, Mem: j.xsRuntime(r).Classify(in)},
			Out: gpu.Buffer{Ptr: o, Len: 4 * outLen, Mem: j.xsRuntime(r).Classify(o)}}
		if coll.Reduces() {
			c.Reduce = host.Kernel(k)
			if gpuReduce {
				c.Kernel, c.Elem = gpu.KernelName(ops.Sum, gpu.F32), gpu.F32
			}
		}
		out = append(out, &collCall{c: c, proc: j.procs[r], out: o, want: want})
	}
	return out
}

func (j *job) xsRuntime(r int) *gpu.Runtime { return j.xs[r].Runtime() }

func sumRanks(p int) int { return p * (p - 1) / 2 }

func (cc *collCall) check(t testing.TB, what string) {
	t.Helper()
	got := readFloats(cc.proc, cc.out, len(cc.want))
	for i, v := range got {
		if v != cc.want[i] {
			t.Fatalf("%s: element %d = %v, want %v", what, i, v, cc.want[i])
		}
	}
}

// stepCollectives lists the collectives and schedule algorithms the
// stepping tests run.
func stepCollectives() []struct {
	coll algorithms.Collective
	alg  *algorithms.Algorithm
} {
	var out []struct {
		coll algorithms.Collective
		alg  *algorithms.Algorithm
	}
	for _, c := range []algorithms.Collective{algorithms.Allreduce, algorithms.ReduceScatter, algorithms.Allgather} {
		for _, a := range algorithms.All(c) {
			if a.Direct || a.Build == nil {
				continue
			}
			out = append(out, struct {
				coll algorithms.Collective
				alg  *algorithms.Algorithm
			}{c, a})
		}
	}
	return out
}

// The blocking Run (Start, then Finish) of the same calls, every rank on
// its own goroutine, and several calls one after the other on one
// executor.
func TestDeviceRunCollectives(t *testing.T) {
	for _, p := range []int{2, 3, 5} {
		for _, path := range []device.Peer{device.PeerStaged, device.PeerIPC} {
			j := newJob(t, p, device.Options{Segment: 64, Depth: 2}, path)
			for seq, cs := range stepCollectives() {
				what := fmt.Sprintf("%s %s p=%d %v", cs.coll.EnvName(), cs.alg.Name, p, path)
				cl := j.calls(t, cs.coll, cs.alg, 33, uint32(seq), true)
				if cl == nil {
					continue
				}
				if err := runAll(j, cl); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				for _, cc := range cl {
					cc.check(t, what)
				}
			}
		}
	}
}

// runAll runs every rank's call with Run, each on its own goroutine.
func runAll(j *job, cl []*collCall) error {
	errs := make([]error, len(cl))
	var wg sync.WaitGroup
	for r, cc := range cl {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = j.xs[r].Run(cc.c)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
	}
	return nil
}

// BenchmarkDeviceRun times blocking ring allreduces on the fake node at
// p=4, staged and over IPC.
func BenchmarkDeviceRun(b *testing.B) {
	ring, err := algorithms.Lookup(algorithms.Allreduce, "ring")
	if err != nil {
		b.Fatal(err)
	}
	for _, path := range []device.Peer{device.PeerStaged, device.PeerIPC} {
		for _, n := range []int{256, 64 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("%v/%dB", path, 4*n), func(b *testing.B) {
				j := newJob(b, 4, device.Options{}, path)
				cl := j.calls(b, algorithms.Allreduce, ring, n/4, 0, true)
				b.SetBytes(int64(4 * n))
				b.ResetTimer()
				for i := range b.N {
					for _, cc := range cl {
						cc.c.Tag.Seq = uint32(i)
					}
					if err := runAll(j, cl); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
