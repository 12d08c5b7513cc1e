package coll_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/executor/device"
	"github.com/gocoll/gocoll/gpu/gputest/fake"
	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/tuner"
)

// canonicalReduce is the reference of reproducible mode: the inputs
// combined along T(0, p) (algorithms/canonical.go), 16-bit floats in
// float32 and rounded once.
func canonicalReduce(op ops.Op, typ ops.Type, in [][]byte) []byte {
	work, wide := in, typ
	if w, ok := ops.Wide(typ); ok {
		wide, work = w, make([][]byte, len(in))
		for r, x := range in {
			work[r] = make([]byte, 2*len(x))
			ops.Widen(typ, work[r], x)
		}
	}
	k, err := ops.Lookup(op, wide)
	if err != nil {
		panic(err)
	}
	var tree func(lo, hi int) []byte
	tree = func(lo, hi int) []byte {
		if hi-lo == 1 {
			return bytes.Clone(work[lo])
		}
		mid := algorithms.CanonicalSplit(lo, hi)
		a, b := tree(lo, mid), tree(mid, hi)
		k(a, a, b)
		return a
	}
	out := tree(0, len(in))
	if wide != typ {
		narrow := make([]byte, len(out)/2)
		ops.Narrow(typ, narrow, out)
		return narrow
	}
	return out
}

// canonical is rank r's expected result of call c in reproducible mode:
// the canonical association of the inputs, or r's block of it.
func (c call) canonical(in [][]byte, r int) []byte {
	want := canonicalReduce(c.op, c.typ, in)
	if c.coll == algorithms.Allreduce {
		return want
	}
	lo := 0
	for _, x := range c.counts[:r] {
		lo += x
	}
	return want[lo*c.typ.Size() : (lo+c.counts[r])*c.typ.Size()]
}

// orderSensitive fills b with values of type typ whose sum (or product)
// depends on the order of the terms: mixed magnitudes and signs.
func orderSensitive(b []byte, typ ops.Type, op ops.Op, rng *rand.Rand) {
	r, part := layout(typ)
	if part != 0 {
		r = part
	}
	scalar := map[repr]int{rF16: 2, rBF16: 2, rF32: 4, rF64: 8}[r]
	for i := 0; i+scalar <= len(b); i += scalar {
		v := rng.NormFloat64() * math.Pow(10, float64(rng.IntN(7)-3))
		if op == ops.Prod {
			v = 1 + rng.NormFloat64()/64
		}
		putFloat(b[i:], r, v)
	}
}

// orderSensitiveInputs returns every rank's input of each call.
func orderSensitiveInputs(calls []call, p int, rng *rand.Rand) [][][]byte {
	inputs := make([][][]byte, len(calls))
	for j, cl := range calls {
		inputs[j] = make([][]byte, p)
		for r := range p {
			inputs[j][r] = make([]byte, cl.total()*cl.typ.Size())
			orderSensitive(inputs[j][r], cl.typ, cl.op, rng)
		}
	}
	return inputs
}

// reproducibleTypes are the floating types reproducible mode is tested
// on, each with the ops whose result depends on order.
var reproducibleTypes = []ops.Type{ops.Double, ops.Float, ops.Float16, ops.BFloat16, ops.CDoubleComplex}

// Every algorithm forced (those that cannot compute the canonical order
// fall back), every reducing collective, counts around block and segment
// boundaries, in place and not, p = 1..8 and a few larger: every result
// is the canonical association, bit for bit.
func TestReproducibleEveryAlgorithmIsCanonical(t *testing.T) {
	tu := fallbackTuner(t, "silent")
	cfg := &coll.Config{Tuner: tu, JobID: "test", Reproducible: true}
	for _, p := range []int{1, 2, 3, 4, 5, 6, 7, 8, 11, 16} {
		counts := []int{0, 1, p - 1, p, p + 1, 37, 1000}
		if p <= 4 {
			counts = append(counts, 40000) // several segment slots
		}
		rng := rand.New(rand.NewPCG(uint64(p), 14))
		var calls []call
		for _, c := range []algorithms.Collective{algorithms.Allreduce, algorithms.ReduceScatter, algorithms.ReduceScatterBlock} {
			for _, alg := range append([]string{""}, algorithms.Names(c)...) {
				for i, n := range counts {
					typ := reproducibleTypes[(i+len(alg))%len(reproducibleTypes)]
					op := []ops.Op{ops.Sum, ops.Prod}[i%2]
					blocks := make([]int, p)
					switch c {
					case algorithms.Allreduce:
						blocks = []int{n}
					case algorithms.ReduceScatterBlock:
						for r := range blocks {
							blocks[r] = n / max(p, 1)
						}
					default: // uneven, with zeros
						for r := range blocks {
							blocks[r] = n / p * ((r + i) % 3)
						}
						blocks[p-1] += n % 5
					}
					calls = append(calls, call{coll: c, alg: alg, typ: typ, op: op, inPlace: i%3 == 1, counts: blocks})
				}
			}
		}
		inputs := orderSensitiveInputs(calls, p, rng)
		runRanks(t, fmt.Sprintf("p=%d ", p), p, cfg, nil, func(cm *coll.Comm) error {
			for j, cl := range calls {
				got, err := cl.run(cm, bytes.Clone(inputs[j][cm.Rank()]))
				if err != nil {
					return fmt.Errorf("%v: %w", cl, err)
				}
				want := cl.canonical(inputs[j], cm.Rank())
				if !bytes.Equal(got, want) {
					return fmt.Errorf("%v: not the canonical association (first bytes %x, want %x)", cl, got[:min(len(got), 16)], want[:min(len(want), 16)])
				}
			}
			return nil
		})
	}
}

// Reproducible mode on (fake) device memory: the schedules run on the
// device executor with GPU kernels, which equal the host's bit for bit,
// so every algorithm forced gives the canonical association there too.
// float16 and bfloat16, which would need a float32 copy on the device,
// are refused with MPI_ERR_TYPE naming the mode, never summed otherwise.
func TestReproducibleOnDevice(t *testing.T) {
	for _, p := range []int{3, 5} {
		var calls []call
		for _, c := range []algorithms.Collective{algorithms.Allreduce, algorithms.ReduceScatter, algorithms.ReduceScatterBlock} {
			for i, alg := range algorithms.Names(c) {
				blocks := []int{7*p + 3}
				if c != algorithms.Allreduce {
					blocks = make([]int, p)
					for r := range blocks {
						if c == algorithms.ReduceScatter {
							blocks[r] = 5 + r%2
						} else {
							blocks[r] = 5
						}
					}
				}
				typ := []ops.Type{ops.Double, ops.Float}[i%2]
				calls = append(calls, call{coll: c, alg: alg, typ: typ, op: ops.Sum, inPlace: i%3 == 0, counts: blocks})
			}
		}
		rng := rand.New(rand.NewPCG(uint64(p), 16))
		inputs := orderSensitiveInputs(calls, p, rng)
		gpuJob(t, p, gpuSetup{opts: device.Options{Segment: 64, Depth: 2}, reproducible: true}, func(cm *coll.Comm, proc *fake.Process, dev int) error {
			for j, cl := range calls {
				got, err := cl.runOnDevice(cm, proc, dev, inputs[j][cm.Rank()])
				if err != nil {
					return fmt.Errorf("%v: %w", cl, err)
				}
				want := cl.canonical(inputs[j], cm.Rank())
				if !bytes.Equal(got, want) {
					return fmt.Errorf("%v on device memory: not the canonical association", cl)
				}
			}
			half := call{coll: algorithms.Allreduce, typ: ops.Float16, op: ops.Sum, counts: []int{9}}
			_, err := half.runOnDevice(cm, proc, dev, make([]byte, 18))
			var me *mpierr.Error
			if !errors.As(err, &me) || me.Class != mpierr.Type || !strings.Contains(me.Msg, "GOCOLL_REPRODUCIBLE") || !strings.Contains(me.Msg, "recvbuf") {
				return fmt.Errorf("float16 on device memory in reproducible mode: %v, want MPI_ERR_TYPE naming GOCOLL_REPRODUCIBLE and recvbuf", err)
			}
			return nil
		})
	}
}

// MPI_Reduce, every root: the binomial tree to rank 0 is T, and float16
// is reduced in float32 and rounded once there too.
func TestReproducibleReduce(t *testing.T) {
	cfg := &coll.Config{JobID: "test", Reproducible: true}
	var err error
	if cfg.Tuner, err = tuner.New(envvar.Settings{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{3, 5, 6} {
		rng := rand.New(rand.NewPCG(uint64(p), 17))
		const n = 41
		in := map[ops.Type][][]byte{}
		for _, typ := range []ops.Type{ops.Double, ops.Float16} {
			in[typ] = make([][]byte, p)
			for r := range p {
				in[typ][r] = make([]byte, n*typ.Size())
				orderSensitive(in[typ][r], typ, ops.Sum, rng)
			}
		}
		runRanks(t, fmt.Sprintf("p=%d ", p), p, cfg, nil, func(cm *coll.Comm) error {
			for root := range p {
				for _, typ := range []ops.Type{ops.Double, ops.Float16} { // one order on every rank
					x := in[typ]
					a := coll.Args{Send: x[cm.Rank()], Count: n, Type: typ, Op: coll.Op{Builtin: ops.Sum}, Root: root}
					if cm.Rank() == root {
						a.Recv = make([]byte, len(x[0]))
					}
					if err := cm.Reduce(a); err != nil {
						return err
					}
					if cm.Rank() == root && !bytes.Equal(a.Recv, canonicalReduce(ops.Sum, typ, x)) {
						return fmt.Errorf("MPI_Reduce of %v to root %d: not the canonical association", typ, root)
					}
				}
			}
			return nil
		})
	}
}
