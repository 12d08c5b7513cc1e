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
	if !a.OnHost() {
		return false // CUDA memory only: the bundle measures those (docs/cuda.md)
	}
	if a.Direct {
		return sh.Nodes == 1
	}
	return !a.SizeDependent || sh.Composes()
}

// smallCalls is how many calls gocoll-tune times of each algorithm per
// round at sizes up to smallMax bytes, where a call takes a microsecond
// or two: a millisecond of back-to-back calls is a few hundred of them,
// and one preemption of a loaded machine decides the median (issue 29).
// There every round times each algorithm in turn (interleaved, so that
// a quiet or busy minute falls on all of them) with a barrier before
// each call, as collbench and the OSU benchmarks do, and the lowest
// round is kept. Above smallMax, Time's median of back-to-back calls.
const smallCalls, smallMax = 1000, 8 << 10

// measureCollective times every algorithm of coll at each size on c, whose
// ranks have shape sh.
func measureCollective(c *mpi.Comm, coll algorithms.Collective, sh tuner.Shape, o options) ([]measured, error) {
	p := c.Size()
	var out []measured
	for b := o.min; b <= o.max; b *= 4 {
		n := max(int(b/4)/p, 1) * p
		send, recv := make([]float32, n), make([]float32, n)
		r := measured{coll: coll.String(), p: p, bytes: int64(4 * n), us: map[string]float64{}}
		calls := map[string]func() error{}
		for _, a := range algorithms.All(coll) {
			if !candidate(a, sh) {
				continue
			}
			opt := mpi.WithAlgorithm(a.Name)
			calls[a.Name] = func() error {
				switch coll {
				case algorithms.Allreduce:
					return mpi.Allreduce(c, send, recv, mpi.Sum, opt)
				case algorithms.ReduceScatterBlock:
					return mpi.ReduceScatterBlock(c, send, recv[:n/p], mpi.Sum, opt)
				}
				return mpi.Allgather(c, send[:n/p], recv, opt)
			}
			r.algs = append(r.algs, a.Name)
		}
		var err error
		if 4*n <= smallMax {
			err = timeInterleaved(c, o.reps, r.algs, calls, r.us)
		} else {
			for _, alg := range r.algs {
				var t float64
				if t, err = Time(c, o.reps, calls[alg]); err != nil {
					err = fmt.Errorf("%s: %w", alg, err)
					break
				}
				r.us[alg] = t * 1e6
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s %d B: %w", coll, b, err)
		}
		for _, alg := range r.algs {
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

// timeInterleaved times smallCalls calls of each of algs per round,
// rounds rounds, the algorithms in turn within a round and in the
// opposite order the next, and keeps in us (µs) each one's lowest
// round: the slowest rank's mean call, a barrier before each.
func timeInterleaved(c *mpi.Comm, rounds int, algs []string, calls map[string]func() error, us map[string]float64) error {
	for _, alg := range algs { // warm up (and build the schedules)
		if err := calls[alg](); err != nil {
			return fmt.Errorf("%s: %w", alg, err)
		}
	}
	for round := range max(rounds, 1) {
		for i := range algs {
			alg := algs[i]
			if round%2 == 1 {
				alg = algs[len(algs)-1-i]
			}
			t, err := timeEach(c, smallCalls, calls[alg])
			if err != nil {
				return fmt.Errorf("%s: %w", alg, err)
			}
			if old, ok := us[alg]; !ok || t*1e6 < old {
				us[alg] = t * 1e6
			}
		}
	}
	return nil
}

// timeEach returns the slowest rank's mean time of calls calls, each
// after a barrier and timed alone.
func timeEach(c *mpi.Comm, calls int, call func() error) (float64, error) {
	var total time.Duration
	for range calls {
		c.Barrier()
		t0 := time.Now()
		if err := call(); err != nil {
			return 0, err
		}
		total += time.Since(t0)
	}
	d := []float64{total.Seconds() / float64(calls)}
	if err := mpi.AllreduceInPlace(c, d, mpi.Max); err != nil {
		return 0, err
	}
	return d[0], nil
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
