package main

import (
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/mpi"
)

func measure(c *mpi.Comm, coll algorithms.Collective, alg, typ string, bytes int64, o options) (Result, error) {
	switch typ {
	case "float32":
		return measureT[float32](c, coll, alg, typ, bytes, o)
	case "float64":
		return measureT[float64](c, coll, alg, typ, bytes, o)
	case "int32":
		return measureT[int32](c, coll, alg, typ, bytes, o)
	case "int64":
		return measureT[int64](c, coll, alg, typ, bytes, o)
	}
	return Result{}, fmt.Errorf("unknown datatype %q (float32, float64, int32, int64)", typ)
}

type number interface {
	int32 | int64 | float32 | float64
}

// value is rank r's element i: small integers, so sums are exact.
func value[T number](r, i int) T { return T((r + i) % 13) }

func busFactor(c algorithms.Collective, p int) float64 {
	if c == algorithms.Allreduce {
		return 2 * float64(p-1) / float64(p)
	}
	return float64(p-1) / float64(p)
}

func measureT[T number](c *mpi.Comm, coll algorithms.Collective, alg, typ string, bytes int64, o options) (Result, error) {
	p, r := c.Size(), c.Rank()
	var z T
	size := int(unsafe.Sizeof(z))
	n := max(int(bytes)/size/p, 1) * p // elements of the whole vector
	blk := n / p
	send, recv := make([]T, n), make([]T, n)
	for i := range send {
		send[i] = value[T](r, i)
	}
	var opts []mpi.Option
	if alg != "auto" {
		opts = append(opts, mpi.WithAlgorithm(alg))
	}
	counts := make([]int, p)
	for i := range counts {
		counts[i] = blk
	}
	call := func() error {
		switch coll {
		case algorithms.Allreduce:
			return mpi.Allreduce(c, send, recv, mpi.Sum, opts...)
		case algorithms.ReduceScatterBlock:
			return mpi.ReduceScatterBlock(c, send, recv[:blk], mpi.Sum, opts...)
		case algorithms.ReduceScatter:
			return mpi.ReduceScatter(c, send, recv[:blk], counts, mpi.Sum, opts...)
		}
		return mpi.Allgather(c, send[:blk], recv, opts...)
	}
	for range o.warmup {
		if err := call(); err != nil {
			return Result{}, err
		}
	}
	res := Result{Collective: coll.String(), Algorithm: alg, Datatype: typ, Ranks: p, Bytes: int64(n * size)}
	if o.check {
		clear(recv)
		if err := call(); err != nil {
			return Result{}, err
		}
		bad := []int32{int32(checkResult(coll, recv, p, r, n))}
		if err := mpi.AllreduceInPlace(c, bad, mpi.Sum); err != nil {
			return Result{}, err
		}
		res.Check = "ok"
		if bad[0] > 0 {
			res.Check = fmt.Sprintf("FAIL(%d)", bad[0])
		}
	}
	// Fewer calls for large messages: about 64 MiB moved per repetition.
	iters := max(1, min(o.iters, int((64<<20)/max(bytes, 1))))
	var times []float64
	for range o.reps {
		if err := c.Barrier(); err != nil {
			return Result{}, err
		}
		t0 := time.Now()
		for range iters {
			if err := call(); err != nil {
				return Result{}, err
			}
		}
		slowest := []float64{time.Since(t0).Seconds() / float64(iters)}
		if err := mpi.AllreduceInPlace(c, slowest, mpi.Max); err != nil {
			return Result{}, err
		}
		times = append(times, slowest[0])
	}
	slices.Sort(times)
	med := times[len(times)/2]
	res.MinUs, res.MedianUs, res.MaxUs = 1e6*times[0], 1e6*med, 1e6*times[len(times)-1]
	res.AlgBW = float64(res.Bytes) / med / 1e9
	res.BusBW = res.AlgBW * busFactor(coll, p)
	return res, nil
}

// checkResult returns the number of wrong elements on rank r.
func checkResult[T number](coll algorithms.Collective, recv []T, p, r, n int) int {
	blk := n / p
	bad := 0
	for j := range recv {
		var want T
		switch coll {
		case algorithms.Allreduce:
			for q := range p {
				want += value[T](q, j)
			}
		case algorithms.ReduceScatter, algorithms.ReduceScatterBlock:
			if j >= blk {
				continue
			}
			for q := range p {
				want += value[T](q, r*blk+j)
			}
		default:
			want = value[T](j/blk, j%blk)
		}
		if recv[j] != want {
			bad++
		}
	}
	return bad
}
