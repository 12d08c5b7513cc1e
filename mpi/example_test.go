package mpi_test

import (
	"fmt"

	"github.com/gocoll/gocoll/mpi"
)

// Four ranks add up their vectors; every rank gets the sum.
func ExampleAllreduce() {
	err := mpi.RunLocal(4, func(c *mpi.Comm) error {
		x := []int{c.Rank(), 10 * c.Rank()}
		sum := make([]int, 2)
		if err := mpi.Allreduce(c, x, sum, mpi.Sum); err != nil {
			return err
		}
		if c.Rank() == 0 {
			fmt.Println(sum)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: [6 60]
}

// Each rank receives its own block of the sum.
func ExampleReduceScatterBlock() {
	err := mpi.RunLocal(3, func(c *mpi.Comm) error {
		x := []float64{1, 2, 3, 4, 5, 6} // two elements for each of 3 ranks
		mine := make([]float64, 2)
		if err := mpi.ReduceScatterBlock(c, x, mine, mpi.Sum); err != nil {
			return err
		}
		if c.Rank() == 1 {
			fmt.Println(mine)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: [9 12]
}

// Every rank contributes its rank number; everyone receives them all.
func ExampleAllgather() {
	err := mpi.RunLocal(4, func(c *mpi.Comm) error {
		all := make([]int32, 4)
		if err := mpi.Allgather(c, []int32{int32(c.Rank())}, all); err != nil {
			return err
		}
		if c.Rank() == 3 {
			fmt.Println(all)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: [0 1 2 3]
}

// A user-defined, non-commutative op: 2x2 integer matrix products come out
// in rank order, M0 M1 M2.
func ExampleNewOp() {
	matmul := mpi.NewOp(func(in, inout []int32) {
		for i := 0; i+4 <= len(in); i += 4 {
			a, b := in[i:i+4], inout[i:i+4]
			b[0], b[1], b[2], b[3] = a[0]*b[0]+a[1]*b[2], a[0]*b[1]+a[1]*b[3], a[2]*b[0]+a[3]*b[2], a[2]*b[1]+a[3]*b[3]
		}
	}, false)
	err := mpi.RunLocal(3, func(c *mpi.Comm) error {
		m := [][]int32{{1, 1, 0, 1}, {2, 0, 0, 1}, {1, 0, 3, 1}}[c.Rank()]
		prod := make([]int32, 4)
		if err := mpi.Allreduce(c, m, prod, matmul, mpi.WithAlgorithm("recursive_doubling")); err != nil {
			return err
		}
		if c.Rank() == 0 {
			fmt.Println(prod)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: [5 1 3 1]
}

// Maxloc finds the largest value and the rank that holds it.
func ExampleMaxloc() {
	err := mpi.RunLocal(4, func(c *mpi.Comm) error {
		v := []mpi.DoubleInt{{Val: []float64{3, 9, 2, 9}[c.Rank()], Loc: int32(c.Rank())}}
		best := make([]mpi.DoubleInt, 1)
		if err := mpi.Allreduce(c, v, best, mpi.Maxloc); err != nil {
			return err
		}
		if c.Rank() == 0 {
			fmt.Printf("max %v at rank %d\n", best[0].Val, best[0].Loc)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: max 9 at rank 1
}

// Counters say which algorithm ran each call.
func ExampleCounters() {
	before := mpi.Counters()["MPI_Allreduce"].Algorithms["ring"]
	err := mpi.RunLocal(4, func(c *mpi.Comm) error {
		x, sum := []float64{1}, make([]float64, 1)
		return mpi.Allreduce(c, x, sum, mpi.Sum, mpi.WithAlgorithm("ring"))
	})
	if err != nil {
		fmt.Println(err)
	}
	fmt.Println("ring ran", mpi.Counters()["MPI_Allreduce"].Algorithms["ring"]-before, "calls") // one per rank
	// Output: ring ran 4 calls
}

// Each rank sums with the ranks of its node, over shared memory.
// RunLocal's ranks all share one node, so here the node communicator is
// the world; under gocollrun on several hosts it holds each host's ranks.
func ExampleComm_SplitShared() {
	err := mpi.RunLocal(4, func(c *mpi.Comm) error {
		node, err := c.SplitShared(0)
		if err != nil {
			return err
		}
		defer node.Free()
		sum := make([]int, 1)
		if err := mpi.Allreduce(node, []int{c.Rank()}, sum, mpi.Sum); err != nil {
			return err
		}
		if c.Rank() == 0 {
			fmt.Println("node of", node.Size(), "ranks, sum", sum[0])
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: node of 4 ranks, sum 6
}

// Three ranks add 1, 1e16 and -1e16. In floating point the order decides:
// (1 + 1e16) - 1e16 is 0, 1 + (1e16 - 1e16) is 1. mpi.Reproducible asks for
// the canonical order, the same for every algorithm, size and layout:
// (x0 + x1) + x2 here, so the sum is 0 on every rank and every run.
func ExampleReproducible() {
	err := mpi.RunLocal(3, func(c *mpi.Comm) error {
		x := []float64{[]float64{1, 1e16, -1e16}[c.Rank()]}
		sum := make([]float64, 1)
		for _, alg := range []string{"auto", "ring", "recursive_doubling"} {
			if err := mpi.Allreduce(c, x, sum, mpi.Sum, mpi.Reproducible(), mpi.WithAlgorithm(alg)); err != nil {
				return err
			}
			if c.Rank() == 0 {
				fmt.Println(alg, sum)
			}
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// auto [0]
	// ring [0]
	// recursive_doubling [0]
}
