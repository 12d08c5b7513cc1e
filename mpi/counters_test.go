package mpi_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/mpi"
)

// delta returns what moved in call's counts between two snapshots.
func delta(before, after map[string]mpi.CallCounts, call string) mpi.CallCounts {
	b, a := before[call], after[call]
	d := mpi.CallCounts{Go: a.Go - b.Go, Fallback: a.Fallback - b.Fallback, Algorithms: map[string]int64{}}
	for name, n := range a.Algorithms {
		if n != b.Algorithms[name] {
			d.Algorithms[name] = n - b.Algorithms[name]
		}
	}
	return d
}

func (tc counterCase) check(t *testing.T, d mpi.CallCounts) {
	t.Helper()
	var sum int64
	for _, n := range d.Algorithms {
		sum += n
	}
	if d.Go != tc.goCalls || d.Fallback != tc.fallback || sum != d.Go || (tc.alg != "" && d.Algorithms[tc.alg] != tc.goCalls-tc.fallback) {
		t.Errorf("%s: counters moved by %+v; want go=%d, %s=%d, fallback=%d, algorithms adding up to go",
			tc.name, d, tc.goCalls, tc.alg, tc.goCalls-tc.fallback, tc.fallback)
	}
}

type counterCase struct {
	name, call, alg string
	env             map[string]string
	run             func(c *mpi.Comm) error
	goCalls         int64 // over all ranks
	fallback        int64
}

// Counters say which algorithm ran each call: a forced one (per call or
// by environment), the tuner's choice when the forced one cannot run,
// nothing when GOCOLL_FALLBACK=error refuses the call.
func TestCounters(t *testing.T) {
	const p = 3
	keepLeft := mpi.NewOp(func(in, inout []int32) { copy(inout, in) }, false)
	cases := []counterCase{
		{name: "allreduce forced per call", call: "MPI_Allreduce", alg: "ring", goCalls: 2 * p,
			run: func(c *mpi.Comm) error {
				x, y := []int32{1, 2, 3}, make([]int32, 3)
				for range 2 {
					if err := mpi.Allreduce(c, x, y, mpi.Sum, mpi.WithAlgorithm("ring")); err != nil {
						return err
					}
				}
				return nil
			}},
		{name: "allreduce forced by environment", call: "MPI_Allreduce", alg: "rabenseifner", goCalls: p,
			env: map[string]string{"GOCOLL_ALLREDUCE_ALGORITHM": "rabenseifner"},
			run: func(c *mpi.Comm) error {
				return mpi.Allreduce(c, []int32{1}, make([]int32, 1), mpi.Max)
			}},
		{name: "allgather forced by environment", call: "MPI_Allgather", alg: "recursive_doubling", goCalls: p,
			env: map[string]string{"GOCOLL_ALLGATHER_ALGORITHM": "recursive_doubling"},
			run: func(c *mpi.Comm) error {
				return mpi.Allgather(c, []float64{1, 2}, make([]float64, 2*p))
			}},
		{name: "ring cannot take a non-commutative op", call: "MPI_Allreduce", goCalls: p, fallback: p,
			env: map[string]string{"GOCOLL_FALLBACK": "silent"},
			run: func(c *mpi.Comm) error {
				return mpi.Allreduce(c, []int32{1}, make([]int32, 1), keepLeft, mpi.WithAlgorithm("ring"))
			}},
		{name: "GOCOLL_FALLBACK=error refuses, runs nothing", call: "MPI_Reduce_scatter_block", goCalls: 0,
			env: map[string]string{"GOCOLL_FALLBACK": "error", "GOCOLL_REDUCE_SCATTER_BLOCK_ALGORITHM": "recursive_halving"},
			run: func(c *mpi.Comm) error {
				err := mpi.ReduceScatterBlock(c, make([]int32, p), make([]int32, 1), keepLeft)
				var me *mpi.Error
				if !errors.As(err, &me) || !strings.Contains(err.Error(), `"recursive_halving"`) {
					return fmt.Errorf("want an *mpi.Error naming recursive_halving, got %v", err)
				}
				return nil
			}},
		{name: "barrier", call: "MPI_Barrier", alg: "bruck", goCalls: 3 * p,
			run: func(c *mpi.Comm) error {
				for range 3 {
					if err := c.Barrier(); err != nil {
						return err
					}
				}
				return nil
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			before := mpi.Counters()
			if err := mpi.RunLocal(p, tc.run); err != nil {
				t.Fatal(err)
			}
			tc.check(t, delta(before, mpi.Counters(), tc.call))
		})
	}
}

// Communicators made by Dup and Split, whose setup runs collectives of
// gocoll's own, count none of them.
func TestCountersLeaveOutGocollsOwnCalls(t *testing.T) {
	before := mpi.Counters()
	err := mpi.RunLocal(4, func(c *mpi.Comm) error {
		d, err := c.Dup()
		if err != nil {
			return err
		}
		defer d.Free()
		s, err := c.Split(c.Rank()%2, 0)
		if err != nil {
			return err
		}
		s.Free()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	after := mpi.Counters()
	for call, k := range after {
		if d := delta(before, after, call); d.Go != 0 || len(d.Algorithms) != 0 {
			t.Errorf("%s counted %+v (now %+v)", call, d, k)
		}
	}
}

// With GOCOLL_REPORT=1, Finalize prints the report line of each
// collective the program called, and nothing for its own barrier.
func TestFinalizeReport(t *testing.T) {
	if os.Getenv("GOCOLL_TEST_FINALIZE_REPORT") != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFinalizeReport$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "GOCOLL_TEST_FINALIZE_REPORT=1", "GOCOLL_REPORT=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestFinalizeReport") {
			t.Fatalf("the child process: %v\n%s", err, out)
		}
		want := "gocoll: rank 0: report: MPI_Allreduce go=3 recursive_doubling=3\n"
		if !strings.Contains(string(out), want) || strings.Count(string(out), "report:") != 1 {
			t.Errorf("want exactly the report line %q:\n%s", want, out)
		}
		return
	}
	c, err := mpi.Init()
	if err != nil {
		t.Fatal(err)
	}
	got := make([]int64, 1)
	for range 3 {
		if err := mpi.Allreduce(c, []int64{1}, got, mpi.Sum, mpi.WithAlgorithm("recursive_doubling")); err != nil {
			t.Fatal(err)
		}
	}
	if err := mpi.Finalize(); err != nil {
		t.Fatal(err)
	}
}
