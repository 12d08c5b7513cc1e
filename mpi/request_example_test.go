package mpi_test

import (
	"fmt"

	"github.com/gocoll/gocoll/mpi"
)

// A nonblocking allreduce runs while the rank does other work, and a
// persistent one is prepared once and started three times.
func ExampleIallreduce() {
	err := mpi.RunLocal(3, func(c *mpi.Comm) error {
		x := []int{c.Rank() + 1}
		sum := make([]int, 1)
		r, err := mpi.Iallreduce(c, x, sum, mpi.Sum)
		if err != nil {
			return err
		}
		// ... compute here, leaving x and sum alone ...
		if err := r.Wait(); err != nil {
			return err
		}
		p, err := mpi.AllreduceInit(c, x, sum, mpi.Sum)
		if err != nil {
			return err
		}
		total := sum[0]
		for range 3 {
			x[0]++
			if err := p.Start(); err != nil {
				return err
			}
			if err := p.Wait(); err != nil {
				return err
			}
			total += sum[0]
		}
		if c.Rank() == 0 {
			fmt.Println(total) // 6 + 9 + 12 + 15
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: 42
}
