package coll_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/transport"
	"github.com/gocoll/gocoll/transport/inproc"
	"github.com/gocoll/gocoll/tuner"
)

// job runs f on p ranks of an in-process job and fails the test on error.
func job(t *testing.T, p int, f func(c *coll.Comm) error) {
	t.Helper()
	jobWith(t, p, nil, f)
}

// jobWith is job with a change to the configuration.
func jobWith(t *testing.T, p int, change func(*coll.Config), f func(c *coll.Comm) error) {
	t.Helper()
	tu, err := tuner.New(envvar.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &coll.Config{Tuner: tu, JobID: "test"}
	if change != nil {
		change(cfg)
	}
	// The ranks share this process, so they can share memory: the shm
	// algorithms run too.
	runRanks(t, fmt.Sprintf("p=%d ", p), p, cfg, nil, f)
}

// runRanks runs f on p in-process ranks of one world communicator, each
// a goroutine, and reports each rank's error prefixed with what. With a
// node map (nodes) the communicator gets it, and a shared segment only
// where every rank is on one node; without one it always gets a segment.
func runRanks(t *testing.T, what string, p int, cfg *coll.Config, nodes *algorithms.NodeMap, f func(c *coll.Comm) error) {
	t.Helper()
	runOn(t, what, inproc.New(p), cfg, nodes, f)
}

// runOn is runRanks over the transports eps, one a rank.
func runOn(t *testing.T, what string, eps []transport.Transport, cfg *coll.Config, nodes *algorithms.NodeMap, f func(c *coll.Comm) error) {
	t.Helper()
	p := len(eps)
	ranks := make([]int, p)
	for i := range ranks {
		ranks[i] = i
	}
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r := range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := coll.NewComm(eps[r], ranks, 1, "MPI_COMM_WORLD", cfg)
			if err == nil && nodes != nil {
				err = c.SetNodes(nodes)
			}
			if err == nil && (nodes == nil || p > 1 && nodes.OneNode()) {
				err = c.AttachShared()
			}
			if err == nil {
				err = f(c)
			}
			if err != nil {
				errs[r] = fmt.Errorf("rank %d: %w", r, err)
				eps[r].Close()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Errorf("%s%v", what, err)
		}
	}
}

// call is one collective call of the matrix.
type call struct {
	coll    algorithms.Collective
	alg     string
	typ     ops.Type
	op      ops.Op
	user    bool // the non-commutative affine-map op below, on MPI_2INT
	inPlace bool
	counts  []int // per-rank block sizes; for Allreduce, Counts[0] is the count
	// offset: the device tests' buffers start this many bytes into their
	// allocations on the ranks it names (misaligned buffers).
	offset   int
	offsetOn func(rank int) bool
}

func (c call) String() string {
	op := c.op.String()
	if c.user {
		op = "user non-commutative"
	}
	return fmt.Sprintf("%v/%s %v %s inplace=%v counts=%v", c.coll, c.alg, c.typ, op, c.inPlace, c.counts)
}

// affine is a non-commutative, associative op on MPI_2INT elements (m, c),
// the map x -> m*x + c: a op b applies a first, then b.
func affine(in, inout []byte, n int) {
	for i := 0; i < n; i++ {
		a, b := in[8*i:8*i+8], inout[8*i:8*i+8]
		am, ac := binary.LittleEndian.Uint32(a), binary.LittleEndian.Uint32(a[4:])
		bm, bc := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:])
		binary.LittleEndian.PutUint32(b, am*bm)
		binary.LittleEndian.PutUint32(b[4:], ac*bm+bc)
	}
}

func (c call) collOp() coll.Op {
	if c.user {
		return coll.Op{User: func(ops.Type) ops.Kernel { return ops.UserKernel(affine, 8) }, Commutative: false}
	}
	return coll.Op{Builtin: c.op}
}

// inputs returns every rank's send buffer for the call, the same on every
// rank since all derive them from the same seed.
func (c call) inputs(p int, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	n := c.total()
	in := make([][]byte, p)
	for r := range in {
		if c.coll == algorithms.Allgather {
			in[r] = make([]byte, c.counts[r]*c.typ.Size())
		} else {
			in[r] = make([]byte, n*c.typ.Size())
		}
		fill(in[r], c.typ, c.op, rng)
	}
	return in
}

func (c call) total() int {
	if c.coll == algorithms.Allreduce {
		return c.counts[0]
	}
	n := 0
	for _, x := range c.counts {
		n += x
	}
	return n
}

// reference computes the expected output of rank r naively: the inputs
// folded in rank order (x0 op x1 op ... op x(p-1)), or concatenated.
func (c call) reference(in [][]byte, r int) []byte {
	size := c.typ.Size()
	if c.coll == algorithms.Allgather {
		return bytes.Join(in, nil)
	}
	k := ops.UserKernel(affine, 8)
	if !c.user {
		var err error
		if k, err = ops.Lookup(c.op, c.typ); err != nil {
			panic(err)
		}
	}
	acc := bytes.Clone(in[0])
	for _, x := range in[1:] {
		k(acc, acc, x)
	}
	if c.coll == algorithms.Allreduce {
		return acc
	}
	lo := 0
	for _, x := range c.counts[:r] {
		lo += x
	}
	return acc[lo*size : (lo+c.counts[r])*size]
}

// run performs the call on rank r.
func (c call) run(cm *coll.Comm, in []byte) ([]byte, error) {
	r, size := cm.Rank(), c.typ.Size()
	a := coll.Args{Type: c.typ, Op: c.collOp(), Algorithm: c.alg, InPlace: c.inPlace}
	total := c.total()
	switch c.coll {
	case algorithms.Allreduce:
		a.Count, a.Recv, a.Send = total, make([]byte, total*size), in
		if c.inPlace {
			copy(a.Recv, in)
		}
		return a.Recv, cm.Allreduce(a)
	case algorithms.ReduceScatter, algorithms.ReduceScatterBlock:
		mine := c.counts[r] * size
		a.Counts, a.Count, a.Send, a.Recv = c.counts, c.counts[0], in, make([]byte, mine)
		if c.inPlace {
			a.Recv = bytes.Clone(in)
		}
		var err error
		if c.coll == algorithms.ReduceScatter {
			err = cm.ReduceScatter(a)
		} else {
			err = cm.ReduceScatterBlock(a)
		}
		return a.Recv[:mine], err
	default:
		a.Counts, a.Recv, a.Send = c.counts, make([]byte, total*size), in
		if c.inPlace {
			lo := 0
			for _, x := range c.counts[:r] {
				lo += x
			}
			copy(a.Recv[lo*size:], in)
		}
		return a.Recv, cm.Allgatherv(a)
	}
}

// equal compares two results on the significant bytes of each element.
// Complex products are the one place where exact inputs still leave room:
// the sign of a zero part depends on the order of the products (MPI does
// not promise associativity), so there -0 equals +0.
func equal(t ops.Type, a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	if r, part := layout(t); part != 0 {
		a, b = bytes.Clone(a), bytes.Clone(b)
		unsignZeros(a, r, t.Size()/2)
		unsignZeros(b, r, t.Size()/2)
	}
	mask := significant(t)
	for i := range a {
		if mask[i%len(mask)] && a[i] != b[i] {
			return false
		}
	}
	return true
}

// unsignZeros turns every -0 part of size bytes in representation r into +0.
func unsignZeros(buf []byte, r repr, size int) {
	sig := size // significant bytes of a part
	if r == rF80 {
		sig = 10
	}
	for off := 0; off+size <= len(buf); off += size {
		part := buf[off : off+sig]
		zero := true
		for i, x := range part {
			if x != 0 && !(i == sig-1 && x == 0x80) {
				zero = false
			}
		}
		if zero {
			part[sig-1] = 0
		}
	}
}

// matrix lists the calls run at p ranks: every collective, algorithm,
// allowed op/type pair (and the non-commutative user op), in place and
// not, with counts that split unevenly.
func matrix(p int) []call {
	var calls []call
	uneven := 2*p + 3
	blocks := func(c algorithms.Collective, k int) []int {
		counts := make([]int, p)
		for i := range counts {
			counts[i] = uneven / p
			if c == algorithms.ReduceScatter || c == algorithms.Allgather {
				counts[i] = (i*7 + k) % 4 // irregular, with zeros
			}
		}
		return counts
	}
	for _, c := range algorithms.Collectives {
		for _, a := range algorithms.All(c) {
			if !a.OnHost() {
				continue // CUDA memory only: the device matrices run them
			}
			for i, typ := range ops.Types() {
				var opsHere []ops.Op
				if c == algorithms.Allgather {
					opsHere = []ops.Op{ops.OpNull}
				} else {
					for _, op := range ops.Ops() {
						if ops.Allowed(op, typ) {
							opsHere = append(opsHere, op)
						}
					}
				}
				for j, op := range opsHere {
					for _, inPlace := range []bool{false, true} {
						counts := blocks(c, i+j)
						if c == algorithms.Allreduce {
							counts = []int{uneven}
						}
						calls = append(calls, call{coll: c, alg: a.Name, typ: typ, op: op, inPlace: inPlace, counts: counts})
					}
				}
			}
			if c.Reduces() && !a.Commutative {
				for _, inPlace := range []bool{false, true} {
					counts := blocks(c, 3)
					if c == algorithms.Allreduce {
						counts = []int{uneven}
					}
					calls = append(calls, call{coll: c, alg: a.Name, typ: ops.TwoInt, user: true, inPlace: inPlace, counts: counts})
				}
			}
		}
	}
	return calls
}

// Real data through the host executor and the in-process transport: every
// collective, algorithm and allowed op/type pair, in place and not, on
// p = 1..16, against a naive reference, all on one communicator back to
// back (which also catches messages of one call matching another's).
func TestRealDataMatrix(t *testing.T) {
	for p := 1; p <= 16; p++ {
		if testing.Short() && p > 5 && p != 8 && p != 13 {
			continue
		}
		calls := matrix(p)
		job(t, p, func(cm *coll.Comm) error {
			for i, c := range calls {
				in := c.inputs(p, uint64(i))
				got, err := c.run(cm, in[cm.Rank()])
				if err != nil {
					return fmt.Errorf("%v: %w", c, err)
				}
				if want := c.reference(in, cm.Rank()); !equal(c.typ, got, want) {
					return fmt.Errorf("%v: result differs from the naive reference", c)
				}
			}
			return nil
		})
	}
}

// MPICH's cancellation case: 1e6, -1e6 and 1e-2 mixed across ranks make
// the float sum depend on the order of additions. Every rank must still get
// the bit-identical result, whatever the algorithm.
func TestBitIdenticalAcrossRanks(t *testing.T) {
	for _, p := range []int{2, 3, 4, 5, 7, 8, 13, 16} {
		for _, alg := range algorithms.Names(algorithms.Allreduce) {
			for _, typ := range []ops.Type{ops.Float, ops.Double} {
				const n = 301
				results := make([][]byte, p)
				job(t, p, func(cm *coll.Comm) error {
					x := make([]byte, n*typ.Size())
					for i := range n {
						v := []float64{1e6, -1e6, 1e-2}[(i+cm.Rank())%3] * float64(1+i%5)
						if typ == ops.Float {
							binary.LittleEndian.PutUint32(x[4*i:], math.Float32bits(float32(v)))
						} else {
							binary.LittleEndian.PutUint64(x[8*i:], math.Float64bits(v))
						}
					}
					out := make([]byte, len(x))
					err := cm.Allreduce(coll.Args{Send: x, Recv: out, Count: n, Type: typ, Op: coll.Op{Builtin: ops.Sum}, Algorithm: alg})
					results[cm.Rank()] = out
					return err
				})
				for r := 1; r < p; r++ {
					if !bytes.Equal(results[r], results[0]) {
						t.Errorf("p=%d %s %v: rank %d's result differs from rank 0's", p, alg, typ, r)
					}
				}
			}
		}
	}
}

// The rooted collectives with real data, every root, in place at the root
// and not, a non-commutative op for Reduce.
func TestRootedRealData(t *testing.T) {
	for _, p := range []int{1, 2, 3, 5, 8} {
		job(t, p, func(cm *coll.Comm) error {
			r := cm.Rank()
			for root := range p {
				for _, inPlace := range []bool{false, true} {
					// Bcast
					buf := make([]byte, 4*7)
					if r == root {
						for i := range buf {
							buf[i] = byte(i + root)
						}
					}
					if err := cm.Bcast(coll.Args{Recv: buf, Count: 7, Type: ops.Int32, Root: root}); err != nil {
						return err
					}
					for i := range buf {
						if buf[i] != byte(i+root) {
							return fmt.Errorf("bcast root %d: byte %d = %d", root, i, buf[i])
						}
					}
					// Reduce with the affine op: rank order matters.
					in := make([]byte, 8*3)
					for i := 0; i < 3; i++ {
						binary.LittleEndian.PutUint32(in[8*i:], uint32(r+2+i))
						binary.LittleEndian.PutUint32(in[8*i+4:], uint32(r*3+i))
					}
					args := coll.Args{Send: in, Count: 3, Type: ops.TwoInt, Op: coll.Op{User: func(ops.Type) ops.Kernel { return ops.UserKernel(affine, 8) }}, Root: root}
					if r == root {
						args.Recv = make([]byte, len(in))
						if inPlace {
							copy(args.Recv, in)
							args.Send, args.InPlace = nil, true
						}
					}
					if err := cm.Reduce(args); err != nil {
						return err
					}
					if r == root {
						want := make([]byte, len(in))
						k := ops.UserKernel(affine, 8)
						for q := 0; q < p; q++ {
							x := make([]byte, len(in))
							for i := 0; i < 3; i++ {
								binary.LittleEndian.PutUint32(x[8*i:], uint32(q+2+i))
								binary.LittleEndian.PutUint32(x[8*i+4:], uint32(q*3+i))
							}
							if q == 0 {
								copy(want, x)
							} else {
								k(want, want, x)
							}
						}
						if !bytes.Equal(args.Recv, want) {
							return fmt.Errorf("reduce root %d inplace=%v: wrong result", root, inPlace)
						}
					}
					// Gather
					mine := []byte{byte(r), byte(r * 2)}
					ga := coll.Args{Send: mine, Count: 2, Type: ops.Byte, Root: root}
					if r == root {
						ga.Recv = make([]byte, 2*p)
						if inPlace {
							copy(ga.Recv[2*r:], mine)
							ga.Send, ga.InPlace = nil, true
						}
					}
					if err := cm.Gather(ga); err != nil {
						return err
					}
					if r == root {
						for q := 0; q < p; q++ {
							if ga.Recv[2*q] != byte(q) || ga.Recv[2*q+1] != byte(2*q) {
								return fmt.Errorf("gather root %d: block %d wrong", root, q)
							}
						}
					}
					if err := cm.Barrier(); err != nil {
						return err
					}
				}
			}
			if err := cm.Bcast(coll.Args{Recv: make([]byte, 4), Count: 1, Type: ops.Int32, Root: p}); err == nil {
				return fmt.Errorf("bcast to root %d of %d accepted", p, p)
			}
			return nil
		})
	}
}
