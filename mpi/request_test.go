package mpi_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/mpi"
)

// Every nonblocking and persistent form in flight together on one
// communicator, the persistent ones started twice, at p = 1..4.
func TestEveryRequestForm(t *testing.T) {
	for p := 1; p <= 4; p++ {
		err := mpi.RunLocal(p, func(c *mpi.Comm) error {
			r, n := c.Rank(), c.Size()
			in := make([]int64, 2*n) // two elements per rank
			for i := range in {
				in[i] = int64(100*r + i)
			}
			// sum over ranks q of 100*q + i
			want := func(i int) int64 { return int64(100*n*(n-1)/2 + n*i) }
			counts := make([]int, n)
			for q := range counts {
				counts[q] = 2
			}
			ar, rsb, rs := make([]int64, 2*n), make([]int64, 2), make([]int64, 2)
			ag := make([]int64, n)
			var reqs []*mpi.Request
			add := func(q *mpi.Request, err error) error {
				reqs = append(reqs, q)
				return err
			}
			for _, err := range []error{
				add(mpi.Iallreduce(c, in, ar, mpi.Sum)),
				add(mpi.IreduceScatterBlock(c, in, rsb, mpi.Sum)),
				add(mpi.IreduceScatter(c, in, rs, counts, mpi.Sum)),
				add(mpi.Iallgather(c, []int64{int64(r)}, ag)),
			} {
				if err != nil {
					return err
				}
			}
			for _, q := range slices.Backward(reqs) {
				if err := q.Wait(); err != nil {
					return err
				}
			}
			if err := check(ar, rsb, rs, ag, r, n, want); err != nil {
				return fmt.Errorf("nonblocking: %w", err)
			}
			var inits []*mpi.Request
			addInit := func(q *mpi.Request, err error) error {
				inits = append(inits, q)
				return err
			}
			for _, err := range []error{
				addInit(mpi.AllreduceInit(c, in, ar, mpi.Sum)),
				addInit(mpi.ReduceScatterBlockInit(c, in, rsb, mpi.Sum)),
				addInit(mpi.ReduceScatterInit(c, in, rs, counts, mpi.Sum)),
				addInit(mpi.AllgatherInit(c, []int64{int64(r)}, ag)),
			} {
				if err != nil {
					return err
				}
			}
			for round := range 2 {
				clear(ar)
				clear(rsb)
				clear(rs)
				clear(ag)
				for _, q := range inits {
					if err := q.Start(); err != nil {
						return err
					}
				}
				for _, q := range inits {
					for done := false; !done; {
						var err error
						if done, err = q.Test(); err != nil {
							return err
						}
					}
				}
				if err := check(ar, rsb, rs, ag, r, n, want); err != nil {
					return fmt.Errorf("persistent, start %d: %w", round+1, err)
				}
			}
			return nil
		})
		if err != nil {
			t.Errorf("p=%d: %v", p, err)
		}
	}
}

func check(ar, rsb, rs, ag []int64, r, n int, want func(int) int64) error {
	for i, v := range ar {
		if v != want(i) {
			return fmt.Errorf("allreduce element %d = %d, want %d", i, v, want(i))
		}
	}
	for i := range 2 {
		if rsb[i] != want(2*r+i) || rs[i] != want(2*r+i) {
			return fmt.Errorf("reduce-scatter element %d = %d (block) %d, want %d", i, rsb[i], rs[i], want(2*r+i))
		}
	}
	for q, v := range ag {
		if v != int64(q) {
			return fmt.Errorf("allgather block %d = %d", q, v)
		}
	}
	return nil
}

// A request form's bad argument is an error naming that form.
func TestRequestFormErrors(t *testing.T) {
	err := mpi.RunLocal(2, func(c *mpi.Comm) error {
		_, err := mpi.IreduceScatterBlock(c, make([]float64, 3), make([]float64, 2), mpi.Sum)
		if err == nil || !strings.Contains(err.Error(), "MPI_Ireduce_scatter_block") {
			return fmt.Errorf("IreduceScatterBlock of 3 into 2x2: %v", err)
		}
		_, err = mpi.ReduceScatterInit(c, make([]float64, 4), make([]float64, 2), []int{2}, mpi.Sum)
		if err == nil || !strings.Contains(err.Error(), "MPI_Reduce_scatter_init") {
			return fmt.Errorf("ReduceScatterInit with one count for two ranks: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}
