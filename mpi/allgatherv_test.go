package mpi_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/mpi"
)

// Allgatherv places each rank's block where displs says: with gaps, out
// of rank order, in place and not, at p = 1..5, every algorithm; the gaps
// keep what was there.
func TestAllgathervDispls(t *testing.T) {
	for p := 1; p <= 5; p++ {
		counts := make([]int, p)
		displs := make([]int, p)
		end := 0
		for r := p - 1; r >= 0; r-- { // blocks in reverse rank order, a gap of 2 after each
			counts[r] = (r*7)%4 + 1
			displs[r] = end
			end += counts[r] + 2
		}
		for _, alg := range []string{"auto", "ring", "bruck", "recursive_doubling"} {
			for _, inPlace := range []bool{false, true} {
				err := mpi.RunLocal(p, func(c *mpi.Comm) error {
					me := c.Rank()
					mine := make([]int32, counts[me])
					recv := slices.Repeat([]int32{-1}, end)
					for i := range mine {
						mine[i] = int32(100*me + i)
					}
					var err error
					if inPlace {
						copy(recv[displs[me]:], mine)
						err = mpi.AllgathervInPlace(c, recv, counts, mpi.Displs(displs), mpi.WithAlgorithm(alg))
					} else {
						err = mpi.Allgatherv(c, mine, recv, counts, mpi.Displs(displs), mpi.WithAlgorithm(alg))
					}
					if err != nil {
						return err
					}
					want := slices.Repeat([]int32{-1}, end)
					for r := range p {
						for i := range counts[r] {
							want[displs[r]+i] = int32(100*r + i)
						}
					}
					if !slices.Equal(recv, want) {
						return fmt.Errorf("rank %d: %v, want %v", me, recv, want)
					}
					return nil
				})
				if err != nil {
					t.Errorf("p=%d %s inPlace=%v: %v", p, alg, inPlace, err)
				}
			}
		}
	}
}

// Bad displacements are errors that name them; a send buffer inside a
// displaced block is refused.
func TestAllgathervDisplsErrors(t *testing.T) {
	for _, tc := range []struct {
		displs []int
		want   string
	}{
		{[]int{0}, "displs has 1 entries"},
		{[]int{0, -1}, "displs[1] is negative"},
		{[]int{0, 3}, "recvbuf"}, // the second block ends past recv
	} {
		err := mpi.RunLocal(2, func(c *mpi.Comm) error {
			recv := make([]int32, 4)
			return mpi.Allgatherv(c, []int32{1, 2}, recv, []int{2, 2}, mpi.Displs(tc.displs))
		})
		var me *mpi.Error
		if !errors.As(err, &me) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("displs %v: %v, want an *mpi.Error saying %q", tc.displs, err, tc.want)
		}
	}
	err := mpi.RunLocal(2, func(c *mpi.Comm) error {
		recv := make([]int32, 8)
		return mpi.Allgatherv(c, recv[5:7], recv, []int{2, 2}, mpi.Displs([]int{4, 0}))
	})
	if err == nil || !strings.Contains(err.Error(), "sendbuf overlaps the block of rank 0") {
		t.Errorf("send inside a block: %v", err)
	}
}
