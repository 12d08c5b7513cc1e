package main

import (
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/model"
	"github.com/gocoll/gocoll/mpi"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/tuner"
)

// measured is one size of one collective: the median time of every
// algorithm, and the fastest.
type measured struct {
	coll  string
	p     int
	bytes int64
	algs  []string
	us    map[string]float64
	best  string
}

// timeCall returns the slowest rank's median time of call over reps
// repetitions (each of enough iterations to last about a millisecond).
func timeCall(c *mpi.Comm, reps int, call func() error) (float64, error) {
	if err := call(); err != nil { // warm up (and build the schedule)
		return 0, err
	}
	iters := 1
	for {
		c.Barrier()
		t0 := time.Now()
		for range iters {
			if err := call(); err != nil {
				return 0, err
			}
		}
		d := []float64{time.Since(t0).Seconds()}
		if err := mpi.AllreduceInPlace(c, d, mpi.Max); err != nil {
			return 0, err
		}
		if d[0] > 1e-3 || iters >= 1<<16 {
			break
		}
		iters *= 4
	}
	var times []float64
	for range reps {
		c.Barrier()
		t0 := time.Now()
		for range iters {
			if err := call(); err != nil {
				return 0, err
			}
		}
		d := []float64{time.Since(t0).Seconds() / float64(iters)}
		if err := mpi.AllreduceInPlace(c, d, mpi.Max); err != nil {
			return 0, err
		}
		times = append(times, d[0])
	}
	slices.Sort(times)
	return times[len(times)/2], nil
}

// untuned is the algorithm no tuning file names yet: hierarchical needs a
// node map, which neither a measurement on one host nor the model's
// one-level machine has; without one it is a flat algorithm under another
// name (and sorts first among the allreduces, so it would win every tie).
const untuned = "hierarchical"

// measureCollective times every algorithm of coll at each size.
func measureCollective(c *mpi.Comm, coll algorithms.Collective, o options) ([]measured, error) {
	p := c.Size()
	var out []measured
	for b := o.min; b <= o.max; b *= 4 {
		n := max(int(b/4)/p, 1) * p
		send, recv := make([]float32, n), make([]float32, n)
		r := measured{coll: coll.String(), p: p, bytes: int64(4 * n), us: map[string]float64{}}
		for _, alg := range algorithms.Names(coll) {
			if alg == untuned {
				continue
			}
			opt := mpi.WithAlgorithm(alg)
			call := func() error {
				switch coll {
				case algorithms.Allreduce:
					return mpi.Allreduce(c, send, recv, mpi.Sum, opt)
				case algorithms.ReduceScatterBlock:
					return mpi.ReduceScatterBlock(c, send, recv[:n/p], mpi.Sum, opt)
				}
				return mpi.Allgather(c, send[:n/p], recv, opt)
			}
			t, err := timeCall(c, o.reps, call)
			if err != nil {
				return nil, fmt.Errorf("%s %s %d B: %w", coll, alg, b, err)
			}
			r.algs = append(r.algs, alg)
			r.us[alg] = t * 1e6
			if r.best == "" || r.us[alg] < r.us[r.best] {
				r.best = alg
			}
		}
		out = append(out, r)
		if c.Rank() == 0 {
			fmt.Fprintf(os.Stderr, "\r%s %d B: %s          ", coll, b, r.best)
		}
	}
	return out, nil
}

// rulesFromWinners turns the fastest algorithm at increasing sizes into
// size ranges, for ranks minP..maxP.
func rulesFromWinners(coll algorithms.Collective, minP, maxP int, res []measured) []tuner.Rule {
	var rules []tuner.Rule
	for i := 0; i < len(res); {
		j := i
		for j+1 < len(res) && res[j+1].best == res[i].best {
			j++
		}
		r := tuner.Rule{Collective: tuner.CollectiveName(coll), MinRanks: minP, MaxRanks: maxP, Algorithm: res[i].best}
		if i > 0 {
			r.MinBytes = (res[i-1].bytes + res[i].bytes) / 2
		}
		if j+1 < len(res) {
			r.MaxBytes = (res[j].bytes + res[j+1].bytes) / 2
		}
		rules = append(rules, r)
		i = j + 1
	}
	return rules
}

// measureMachine fits the model's parameters on this machine: a
// ping-pong between ranks 0 and 1 for alpha and beta, the float32 sum
// kernel for gamma and memmove for delta (on every rank; rank 0's count).
func measureMachine(c *mpi.Comm, o options) (model.Machine, error) {
	var m model.Machine
	pair, err := c.Split(map[bool]int{true: 0, false: -1}[c.Rank() < 2], c.Rank())
	if err != nil {
		return m, err
	}
	var sizes []float64
	var times []float64
	if pair != nil {
		for b := 8; b <= 4<<20; b *= 8 {
			send, buf := make([]byte, b/2), make([]byte, b)
			t, err := timeCall(pair, o.reps, func() error {
				return mpi.Allgather(pair, send, buf, mpi.WithAlgorithm("ring"))
			})
			if err != nil {
				return m, err
			}
			sizes, times = append(sizes, float64(b/2)), append(times, t) // one message of b/2 each way
		}
		pair.Free()
	}
	// Least squares of t = alpha + beta * n.
	if len(sizes) > 1 {
		var sx, sy, sxx, sxy float64
		for i := range sizes {
			sx, sy, sxx, sxy = sx+sizes[i], sy+times[i], sxx+sizes[i]*sizes[i], sxy+sizes[i]*times[i]
		}
		k := float64(len(sizes))
		m.Beta = (k*sxy - sx*sy) / (k*sxx - sx*sx)
		m.Alpha = max((sy-m.Beta*sx)/k, times[0]/2)
	}
	const n = 16 << 20
	a, b := make([]byte, n), make([]byte, n)
	k, _ := ops.Lookup(ops.Sum, ops.Float)
	m.Gamma = timeLocal(func() { k(a, a, b) }) / n
	m.Delta = timeLocal(func() { copy(a, b) }) / n
	params := []float64{m.Alpha, m.Beta, m.Gamma, m.Delta}
	if err := mpi.Bcast(c, params, 0); err != nil {
		return m, err
	}
	return model.Machine{Alpha: params[0], Beta: params[1], Gamma: params[2], Delta: params[3]}, nil
}

func timeLocal(f func()) float64 {
	f()
	best := 1e9
	for range 5 {
		t0 := time.Now()
		f()
		best = min(best, time.Since(t0).Seconds())
	}
	return best
}
