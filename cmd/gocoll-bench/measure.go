package main

import (
	"fmt"
	"slices"
	"strings"
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
	case "int8":
		return measureT[int8](c, coll, alg, typ, bytes, o)
	case "int16":
		return measureT[int16](c, coll, alg, typ, bytes, o)
	case "int32":
		return measureT[int32](c, coll, alg, typ, bytes, o)
	case "int64":
		return measureT[int64](c, coll, alg, typ, bytes, o)
	case "uint8", "byte":
		return measureT[uint8](c, coll, alg, typ, bytes, o)
	case "uint16":
		return measureT[uint16](c, coll, alg, typ, bytes, o)
	case "uint32":
		return measureT[uint32](c, coll, alg, typ, bytes, o)
	case "uint64":
		return measureT[uint64](c, coll, alg, typ, bytes, o)
	}
	return Result{}, fmt.Errorf("unknown datatype %q (%s)", typ, strings.Join(datatypes, ", "))
}

// datatypes are -d's names: Go's types (MPI_FLOAT, MPI_DOUBLE,
// MPI_INT8_T...); byte is uint8, the size of MPI_CHAR, which the Go API
// has no type for.
var datatypes = []string{"float32", "float64", "int8", "int16", "int32", "int64", "uint8", "byte", "uint16", "uint32", "uint64"}

type number interface {
	int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64 | float32 | float64
}

// value is rank r's element i of a reduction: small integers, so sums
// are exact (and wrap alike on both sides in the narrow integers).
func value[T number](r, i int) T { return T((r + i) % 13) }

// gathered is rank r's element i of an allgather: different on every
// rank at every index (up to 97 ranks), so that a block in the wrong
// place shows.
func gathered[T number](r, i int) T { return T((r*37+i)%97 + 1) }

func busFactor(c algorithms.Collective, p int) float64 {
	if c == algorithms.Allreduce {
		return 2 * float64(p-1) / float64(p)
	}
	return float64(p-1) / float64(p)
}

// recvcounts is MPI_Reduce_scatter's recvcounts for n elements over p ranks,
// as the MPI suites split them: n/p each, one more for each of the first
// n%p ranks.
func recvcounts(n, p int) []int {
	counts := make([]int, p)
	for i := range counts {
		counts[i] = n / p
		if i < n%p {
			counts[i]++
		}
	}
	return counts
}

// layout is one call's buffers: n elements in the whole vector (the send
// buffer of a reduction, the output of an allgather), the counts each rank
// receives of a reduce-scatter or sends of an allgather, and the bytes the
// result reports (see -per-rank).
func layout(coll algorithms.Collective, size, p int, bytes int64, perRank bool) (n int, counts []int, reported int64) {
	e := max(int(bytes)/size, 1)
	switch coll {
	case algorithms.ReduceScatter:
		n, counts = e, recvcounts(e, p)
	case algorithms.ReduceScatterBlock:
		n = max(e/p, 1) * p
		counts = recvcounts(n, p)
	case algorithms.Allgather:
		blk := max(e/p, 1)
		if perRank {
			blk = e
		}
		n = blk * p
		counts = recvcounts(n, p)
		if perRank {
			return n, counts, int64(blk * size)
		}
	default:
		n = e
	}
	return n, counts, int64(n * size)
}

func measureT[T number](c *mpi.Comm, coll algorithms.Collective, alg, typ string, bytes int64, o options) (Result, error) {
	p, r := c.Size(), c.Rank()
	var z T
	size := int(unsafe.Sizeof(z))
	n, counts, reported := layout(coll, size, p, bytes, o.perRank)
	displ := 0
	if counts != nil {
		for _, k := range counts[:r] {
			displ += k
		}
	}
	send, recv := make([]T, n), make([]T, n)
	for i := range send {
		if coll == algorithms.Allgather {
			send[i] = gathered[T](r, i)
		} else {
			send[i] = value[T](r, i)
		}
	}
	var opts []mpi.Option
	if alg != "auto" {
		opts = append(opts, mpi.WithAlgorithm(alg))
	}
	call := func() error {
		switch coll {
		case algorithms.Allreduce:
			return mpi.Allreduce(c, send, recv, mpi.Sum, opts...)
		case algorithms.ReduceScatterBlock:
			return mpi.ReduceScatterBlock(c, send, recv[:counts[r]], mpi.Sum, opts...)
		case algorithms.ReduceScatter:
			return mpi.ReduceScatter(c, send, recv[:counts[r]], counts, mpi.Sum, opts...)
		}
		return mpi.Allgather(c, send[:counts[r]], recv, opts...)
	}
	// With -barrier every call, warm-up and timed, starts from a barrier.
	step := func() error {
		if o.barrier {
			if err := c.Barrier(); err != nil {
				return err
			}
		}
		return call()
	}
	for range o.warmup {
		if err := step(); err != nil {
			return Result{}, err
		}
	}
	res := Result{Collective: coll.String(), Algorithm: alg, Datatype: typ, Ranks: p, Bytes: reported,
		Size: "total", Barrier: o.barrier}
	if coll == algorithms.Allgather && o.perRank {
		res.Size = "per-rank"
	}
	if o.check {
		clear(recv)
		if err := step(); err != nil {
			return Result{}, err
		}
		bad := []int32{int32(checkResult(coll, recv, p, r, counts, displ))}
		if err := mpi.AllreduceInPlace(c, bad, mpi.Sum); err != nil {
			return Result{}, err
		}
		res.Check = "ok"
		if bad[0] > 0 {
			res.Check = fmt.Sprintf("FAIL(%d)", bad[0])
		}
	}
	// Fewer calls for large messages: about 64 MiB moved per repetition.
	iters := max(1, min(o.iters, int((64<<20)/max(int64(n*size), 1))))
	var times []float64
	for range o.reps {
		t, err := timeCalls(c, call, iters, o.barrier)
		if err != nil {
			return Result{}, err
		}
		times = append(times, t)
	}
	slices.Sort(times)
	med := times[len(times)/2]
	res.MinUs, res.MedianUs, res.MaxUs = 1e6*times[0], 1e6*med, 1e6*times[len(times)-1]
	res.AlgBW = float64(n*size) / med / 1e9
	res.BusBW = res.AlgBW * busFactor(coll, p)
	return res, nil
}

// timeCalls runs iters calls and returns the seconds per call: back to
// back, the slowest rank's mean (nccl-tests); with barrier, a barrier
// before each call, only the call timed, each rank's mean averaged over
// the ranks (the MPI suites' average).
func timeCalls(c *mpi.Comm, call func() error, iters int, barrier bool) (float64, error) {
	if !barrier {
		if err := c.Barrier(); err != nil {
			return 0, err
		}
		t0 := time.Now()
		for range iters {
			if err := call(); err != nil {
				return 0, err
			}
		}
		slowest := []float64{time.Since(t0).Seconds() / float64(iters)}
		err := mpi.AllreduceInPlace(c, slowest, mpi.Max)
		return slowest[0], err
	}
	var sum time.Duration
	for range iters {
		if err := c.Barrier(); err != nil {
			return 0, err
		}
		t0 := time.Now()
		if err := call(); err != nil {
			return 0, err
		}
		sum += time.Since(t0)
	}
	mean := []float64{sum.Seconds() / float64(iters)}
	err := mpi.AllreduceInPlace(c, mean, mpi.Sum)
	return mean[0] / float64(c.Size()), err
}

// checkResult returns the number of wrong elements on rank r: the result,
// and zeros (recv was cleared) after a reduce-scatter's block.
func checkResult[T number](coll algorithms.Collective, recv []T, p, r int, counts []int, displ int) int {
	bad := 0
	for j := range recv {
		var want T
		switch coll {
		case algorithms.Allreduce:
			for q := range p {
				want += value[T](q, j)
			}
		case algorithms.ReduceScatter, algorithms.ReduceScatterBlock:
			if j >= counts[r] {
				break
			}
			for q := range p {
				want += value[T](q, displ+j)
			}
		default:
			blk := len(recv) / p
			want = gathered[T](j/blk, j%blk)
		}
		if recv[j] != want {
			bad++
		}
	}
	return bad
}
