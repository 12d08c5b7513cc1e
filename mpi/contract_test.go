package mpi_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/mpi"
)

// evenCounts splits n into p blocks of q or q+1 elements.
func evenCounts(n, p int) []int {
	counts := make([]int, p)
	for i := range counts {
		counts[i] = n / p
		if i < n%p {
			counts[i]++
		}
	}
	return counts
}

// The seed's contracts: on 4 ranks with x_i(r) = 100r + i, Allreduce gives
// 600 + 4i everywhere; ReduceScatter gives rank r its shard of that, and
// Allgather of the shards gives the full result back. With 1003 elements
// the shards are uneven (251, 251, 251, 250) and no padding shows.
func TestSeedContracts(t *testing.T) {
	for _, count := range []int{20, 1003} {
		for _, alg := range algorithms.Names(algorithms.Allreduce) {
			t.Run(fmt.Sprintf("count=%d/%s", count, alg), func(t *testing.T) {
				err := mpi.RunLocal(4, func(c *mpi.Comm) error {
					r := c.Rank()
					x := make([]int64, count)
					want := make([]int64, count)
					for i := range x {
						x[i] = int64(100*r + i)
						want[i] = int64(600 + 4*i)
					}
					sum := make([]int64, count)
					if err := mpi.Allreduce(c, x, sum, mpi.Sum, mpi.WithAlgorithm(alg)); err != nil {
						return err
					}
					if !slices.Equal(sum, want) {
						return fmt.Errorf("allreduce: got %v..., want %v...", sum[:4], want[:4])
					}
					counts := evenCounts(count, 4)
					lo := 0
					for _, n := range counts[:r] {
						lo += n
					}
					shard := make([]int64, counts[r])
					if err := mpi.ReduceScatter(c, x, shard, counts, mpi.Sum); err != nil {
						return err
					}
					if !slices.Equal(shard, want[lo:lo+counts[r]]) {
						return fmt.Errorf("reduce-scatter shard of rank %d: got %v", r, shard)
					}
					if count == 20 { // the block form, 5 elements each
						block := make([]int64, 5)
						if err := mpi.ReduceScatterBlock(c, x, block, mpi.Sum); err != nil {
							return err
						}
						if !slices.Equal(block, want[5*r:5*r+5]) {
							return fmt.Errorf("reduce-scatter-block of rank %d: got %v, want elements %d..%d", r, block, 5*r, 5*r+4)
						}
					}
					full := make([]int64, count)
					if err := mpi.Allgatherv(c, shard, full, counts); err != nil {
						return err
					}
					if !slices.Equal(full, want) {
						return fmt.Errorf("allgather of the shards differs from the allreduce")
					}
					// MAX in the reduce-scatter stage gives another result.
					maxShard := make([]int64, counts[r])
					if err := mpi.ReduceScatter(c, x, maxShard, counts, mpi.Max); err != nil {
						return err
					}
					if slices.Equal(maxShard, shard) && len(shard) > 0 {
						return fmt.Errorf("MAX and SUM reduce-scatter agree: %v", shard)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}
