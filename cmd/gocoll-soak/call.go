package main

import (
	"fmt"
	"math/rand/v2"
	"unsafe"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/mpi"
)

// call is one random collective call, the same on every member.
type call struct {
	rng           *rand.Rand
	members       []int // world rank of each member, in communicator order
	maxCount      int
	transportOnly bool

	coll    string // allreduce, reduce_scatter, reduce_scatter_block, allgather, allgatherv
	typ     string // int32, int64, uint8, float32, float64, intint
	op      string
	count   int   // allreduce: elements; rsb, allgather: per rank
	counts  []int // reduce_scatter, allgatherv
	inPlace bool
	alg     string

	comm *mpi.Comm
	rank int
}

var opsFor = map[string][]string{
	"int32":   {"sum", "prod", "max", "min", "band", "bor", "bxor", "land", "lor", "usersum"},
	"int64":   {"sum", "prod", "max", "min", "band", "bxor", "lor"},
	"uint8":   {"sum", "max", "min", "band", "bxor"},
	"float32": {"sum", "prod", "max", "min"},
	"float64": {"sum", "prod", "max", "min", "usersum"},
	"intint":  {"maxloc", "minloc", "affine"},
}

// pick draws the call. Every draw depends only on the communicator's size
// and the random source, so that every member draws the same call.
func (c *call) pick() {
	r := c.rng
	size := len(c.members)
	c.coll = []string{"allreduce", "allreduce", "reduce_scatter", "reduce_scatter_block", "allgather", "allgatherv"}[r.IntN(6)]
	c.typ = []string{"int32", "int64", "uint8", "float32", "float64", "intint"}[r.IntN(6)]
	c.op = opsFor[c.typ][r.IntN(len(opsFor[c.typ]))]
	var n int
	switch x := r.IntN(100); {
	case x < 8:
		n = 0
	case x < 40:
		n = 1 + r.IntN(64)
	case x < 70:
		n = 65 + r.IntN(4096-64)
	case x < 92:
		n = 4097 + r.IntN(65536-4096)
	default:
		n = 65537 + r.IntN(max(c.maxCount-65536, 1))
	}
	n = min(n, c.maxCount)
	c.count = n
	if c.coll != "allreduce" {
		c.count = n / size
	}
	c.counts = make([]int, size)
	for q := range c.counts {
		if r.IntN(5) > 0 {
			c.counts[q] = r.IntN(2*(n/size) + 1)
		}
	}
	c.inPlace = c.coll != "allgatherv" && r.IntN(3) == 0
	var coll algorithms.Collective
	switch c.coll {
	case "allreduce":
		coll = algorithms.Allreduce
	case "reduce_scatter":
		coll = algorithms.ReduceScatter
	case "reduce_scatter_block":
		coll = algorithms.ReduceScatterBlock
	default:
		coll = algorithms.Allgather
	}
	names := algorithmsFor(coll, c.transportOnly)
	c.alg = names[r.IntN(len(names))]
}

func (c *call) describe() string {
	n := fmt.Sprint(c.count)
	if c.coll == "reduce_scatter" || c.coll == "allgatherv" {
		n = fmt.Sprint(c.counts)
		if len(n) > 60 {
			n = n[:60] + "...]"
		}
	}
	alg := c.alg
	if alg == "" {
		alg = "tuned"
	}
	return fmt.Sprintf("%s %s %s n=%s inPlace=%v alg=%s", c.coll, c.typ, c.op, n, c.inPlace, alg)
}

// run makes the call on this rank and checks the result; it returns the
// bytes this rank received into.
func (c *call) run() (int, error) {
	switch c.typ {
	case "int32":
		return runTyped(c, func(v int64) int32 { return int32(v) })
	case "int64":
		return runTyped(c, func(v int64) int64 { return v })
	case "uint8":
		return runTyped(c, func(v int64) uint8 { return uint8(v) })
	case "float32":
		return runTyped(c, func(v int64) float32 { return float32(v) })
	case "float64":
		return runTyped(c, func(v int64) float64 { return float64(v) })
	}
	return runTyped(c, func(v int64) mpi.IntInt { return mpi.IntInt{Val: int32(v >> 32), Loc: int32(v)} })
}

// value is member q's element i (q is the rank in the communicator; the
// value depends on its world rank too), as an int64 the type converts:
// small, so that sums and products are exact; for pairs, Val<<32 | Loc.
func (c *call) value(q, i int) int64 {
	w := int64(c.members[q])
	i64 := int64(i)
	switch c.op {
	case "prod":
		return 1 + (w+i64)%2
	case "land", "lor":
		return (w*3 + i64) % 4 % 2
	case "maxloc", "minloc":
		return ((w*5+i64*3)%6)<<32 | int64(q)
	case "affine": // the map x -> m*x + c, m odd
		return (1+2*((w+i64)%3))<<32 | (w*7+i64)%100
	}
	v := (w*131 + i64*31) % 17
	if c.typ == "uint8" {
		return v
	}
	return v - 8
}

// opOf returns the mpi op and the reference combination a op b (a is the
// lower rank's).
func opOf[T mpi.Elem](c *call) (mpi.Op, func(a, b T) T) {
	var z T
	switch any(z).(type) {
	case mpi.IntInt:
		pair := func(f func(a, b mpi.IntInt) mpi.IntInt) func(a, b T) T {
			return func(a, b T) T { return any(f(any(a).(mpi.IntInt), any(b).(mpi.IntInt))).(T) }
		}
		switch c.op {
		case "maxloc":
			return mpi.Maxloc, pair(func(a, b mpi.IntInt) mpi.IntInt {
				if b.Val > a.Val || b.Val == a.Val && b.Loc < a.Loc {
					return b
				}
				return a
			})
		case "minloc":
			return mpi.Minloc, pair(func(a, b mpi.IntInt) mpi.IntInt {
				if b.Val < a.Val || b.Val == a.Val && b.Loc < a.Loc {
					return b
				}
				return a
			})
		}
		// affine: a then b, x -> b.m*(a.m*x + a.c) + b.c; not commutative
		affine := func(a, b mpi.IntInt) mpi.IntInt {
			return mpi.IntInt{Val: b.Val * a.Val, Loc: b.Val*a.Loc + b.Loc}
		}
		op := mpi.NewOp(func(in, inout []mpi.IntInt) {
			for i := range inout {
				inout[i] = affine(in[i], inout[i])
			}
		}, false)
		return op, pair(affine)
	}
	return numericOp[T](c)
}

// number is the element types with arithmetic.
type number interface {
	int32 | int64 | uint8 | float32 | float64
}

func numericOp[T mpi.Elem](c *call) (mpi.Op, func(a, b T) T) {
	var z T
	switch any(z).(type) {
	case int32:
		return arith[int32, T](c, true)
	case int64:
		return arith[int64, T](c, true)
	case uint8:
		return arith[uint8, T](c, true)
	case float32:
		return arith[float32, T](c, false)
	}
	return arith[float64, T](c, false)
}

func arith[N number, T mpi.Elem](c *call, integer bool) (mpi.Op, func(a, b T) T) {
	wrap := func(f func(a, b N) N) func(a, b T) T {
		return func(a, b T) T { return any(f(any(a).(N), any(b).(N))).(T) }
	}
	b2n := func(b bool) N {
		if b {
			return 1
		}
		return 0
	}
	switch c.op {
	case "prod":
		return mpi.Prod, wrap(func(a, b N) N { return a * b })
	case "max":
		return mpi.Max, wrap(func(a, b N) N { return max(a, b) })
	case "min":
		return mpi.Min, wrap(func(a, b N) N { return min(a, b) })
	case "land":
		return mpi.Land, wrap(func(a, b N) N { return b2n(a != 0 && b != 0) })
	case "lor":
		return mpi.Lor, wrap(func(a, b N) N { return b2n(a != 0 || b != 0) })
	case "band", "bor", "bxor":
		return bitwise[N, T](c.op, wrap)
	case "usersum":
		op := mpi.NewOp(func(in, inout []N) {
			for i := range inout {
				inout[i] += in[i]
			}
		}, true)
		return op, wrap(func(a, b N) N { return a + b })
	}
	return mpi.Sum, wrap(func(a, b N) N { return a + b })
}

func bitwise[N number, T mpi.Elem](op string, wrap func(f func(a, b N) N) func(a, b T) T) (mpi.Op, func(a, b T) T) {
	bits := func(f func(a, b int64) int64) func(a, b N) N {
		return func(a, b N) N { return N(f(int64(a), int64(b))) }
	}
	switch op {
	case "band":
		return mpi.Band, wrap(bits(func(a, b int64) int64 { return a & b }))
	case "bor":
		return mpi.Bor, wrap(bits(func(a, b int64) int64 { return a | b }))
	}
	return mpi.Bxor, wrap(bits(func(a, b int64) int64 { return a ^ b }))
}

func runTyped[T mpi.Elem](c *call, conv func(int64) T) (int, error) {
	size, me := len(c.members), c.rank
	var opts []mpi.Option
	if c.alg != "" {
		opts = append(opts, mpi.WithAlgorithm(c.alg))
	}
	input := func(q, n int) []T {
		v := make([]T, n)
		for i := range v {
			v[i] = conv(c.value(q, i))
		}
		return v
	}
	var zero T
	elem := int(sizeOfT(zero))
	switch c.coll {
	case "allgather", "allgatherv":
		counts := c.counts
		if c.coll == "allgather" {
			counts = make([]int, size)
			for q := range counts {
				counts[q] = c.count
			}
		}
		total, at := 0, 0
		for q, n := range counts {
			total += n
			if q < me {
				at += n
			}
		}
		recv := make([]T, total)
		var err error
		switch {
		case c.coll == "allgatherv":
			err = mpi.Allgatherv(c.comm, input(me, counts[me]), recv, counts, opts...)
		case c.inPlace:
			copy(recv[at:], input(me, counts[me]))
			err = mpi.AllgatherInPlace(c.comm, recv, opts...)
		default:
			err = mpi.Allgather(c.comm, input(me, counts[me]), recv, opts...)
		}
		if err != nil {
			return 0, err
		}
		off := 0
		for q, n := range counts {
			want := input(q, n)
			for i := range n {
				if recv[off+i] != want[i] {
					return total * elem, fmt.Errorf("wrong result: element %d (rank %d's %d) is %v, want %v", off+i, q, i, recv[off+i], want[i])
				}
			}
			off += n
		}
		return total * elem, nil
	}

	// The reductions: the expected vector, folded in rank order.
	op, f := opOf[T](c)
	n := c.count // allreduce
	var counts []int
	switch c.coll {
	case "reduce_scatter":
		counts = c.counts
	case "reduce_scatter_block":
		counts = make([]int, size)
		for q := range counts {
			counts[q] = c.count
		}
	}
	if counts != nil {
		n = 0
		for _, k := range counts {
			n += k
		}
	}
	want := input(0, n)
	for q := 1; q < size; q++ {
		x := input(q, n)
		for i := range want {
			want[i] = f(want[i], x[i])
		}
	}
	in := input(me, n)
	var got []T
	var err error
	switch c.coll {
	case "allreduce":
		if c.inPlace {
			err, got = mpi.AllreduceInPlace(c.comm, in, op, opts...), in
		} else {
			got = make([]T, n)
			err = mpi.Allreduce(c.comm, in, got, op, opts...)
		}
	case "reduce_scatter":
		if c.inPlace {
			err, got = mpi.ReduceScatterInPlace(c.comm, in, counts, op, opts...), in[:counts[me]]
		} else {
			got = make([]T, counts[me])
			err = mpi.ReduceScatter(c.comm, in, got, counts, op, opts...)
		}
	default:
		if c.inPlace {
			err, got = mpi.ReduceScatterBlockInPlace(c.comm, in, op, opts...), in[:c.count]
		} else {
			got = make([]T, c.count)
			err = mpi.ReduceScatterBlock(c.comm, in, got, op, opts...)
		}
	}
	if err != nil {
		return 0, err
	}
	off := 0
	if counts != nil {
		for q := range me {
			off += counts[q]
		}
	}
	for i := range got {
		if got[i] != want[off+i] {
			return len(got) * elem, fmt.Errorf("wrong result: element %d is %v, want %v", i, got[i], want[off+i])
		}
	}
	return len(got) * elem, nil
}

// sizeOfT is the size in bytes of one element.
func sizeOfT[T any](z T) uintptr { return unsafe.Sizeof(z) }
