package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/mpi"
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

// candidate reports whether algorithm a is measured or priced on ranks
// of shape sh: the shm algorithms need one node; the hierarchical ones,
// as in the tuner, a shape with phases to compose (elsewhere they are a
// flat algorithm under another name, and sort first among the
// allreduces, so they would win every tie).
func candidate(a *algorithms.Algorithm, sh tuner.Shape) bool {
	if a.Device {
		return false // CUDA memory only: the bundle measures those (docs/cuda.md)
	}
	if a.Direct {
		return sh.Nodes == 1
	}
	return !a.SizeDependent || sh.Composes()
}

// measureCollective times every algorithm of coll at each size on c, whose
// ranks have shape sh.
func measureCollective(c *mpi.Comm, coll algorithms.Collective, sh tuner.Shape, o options) ([]measured, error) {
	p := c.Size()
	var out []measured
	for b := o.min; b <= o.max; b *= 4 {
		n := max(int(b/4)/p, 1) * p
		send, recv := make([]float32, n), make([]float32, n)
		r := measured{coll: coll.String(), p: p, bytes: int64(4 * n), us: map[string]float64{}}
		for _, a := range algorithms.All(coll) {
			if !candidate(a, sh) {
				continue
			}
			alg := a.Name
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
			t, err := Time(c, o.reps, call)
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
// size ranges, for calls of exactly shape sh (ranks, nodes, ranks per
// node): a rule holds only where it was measured or priced.
func rulesFromWinners(coll algorithms.Collective, sh tuner.Shape, res []measured) []tuner.Rule {
	var rules []tuner.Rule
	for i := 0; i < len(res); {
		j := i
		for j+1 < len(res) && res[j+1].best == res[i].best {
			j++
		}
		r := tuner.Rule{Collective: tuner.CollectiveName(coll), Algorithm: res[i].best,
			MinRanks: sh.P, MaxRanks: sh.P, MinNodes: sh.Nodes, MaxNodes: sh.Nodes, MinPerNode: sh.PerNode, MaxPerNode: sh.PerNode}
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

// Time returns the slowest rank's median time of call over reps
// repetitions, each of enough calls back to back to last about a
// millisecond (after one call to warm up).
func Time(c *mpi.Comm, reps int, call func() error) (float64, error) {
	if err := call(); err != nil { // warm up (and build the schedule)
		return 0, err
	}
	iters := 1
	for {
		d, err := timeIters(c, iters, call)
		if err != nil {
			return 0, err
		}
		if d*float64(iters) > 1e-3 || iters >= 1<<16 {
			break
		}
		iters *= 4
	}
	var times []float64
	for range max(reps, 1) {
		d, err := timeIters(c, iters, call)
		if err != nil {
			return 0, err
		}
		times = append(times, d)
	}
	slices.Sort(times)
	return times[len(times)/2], nil
}

// timeIters returns the slowest rank's time per call of iters calls.
func timeIters(c *mpi.Comm, iters int, call func() error) (float64, error) {
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
	return d[0], nil
}

var errShmStep = errors.New("the shm allreduce on node 0 failed (see rank 0)")
