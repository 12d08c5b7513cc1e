package mpi_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gocoll/gocoll/mpi"
	"github.com/gocoll/gocoll/mpierr"
)

// Four in-process ranks on two hosts, placed round-robin (a b a b) and in
// blocks (a a b b): SplitShared gives each rank the ranks of its host, in
// key order (the keys reverse it), and an allreduce forced to the shm
// algorithm runs on them (GOCOLL_FALLBACK=error: it would fail without a
// shared segment), while on the world, which spans both hosts, it fails.
// A split of the world by parity, then SplitShared, derives the halves'
// maps from the world's.
func TestSplitShared(t *testing.T) {
	t.Setenv("GOCOLL_FALLBACK", "error")
	for _, hosts := range [][]string{{"a", "b", "a", "b"}, {"a", "a", "b", "b"}} {
		// onHost returns, in reverse order, the ranks among members
		// (world ranks, in the order of the communicator) on r's host.
		onHost := func(members []int, r int) []int {
			var out []int
			for i := len(members) - 1; i >= 0; i-- {
				if hosts[members[i]] == hosts[r] {
					out = append(out, members[i])
				}
			}
			return out
		}
		// check splits c (world ranks members) by node and checks it.
		check := func(what string, c *mpi.Comm, members []int, r int) error {
			node, err := c.SplitShared(-c.Rank())
			if err != nil {
				return fmt.Errorf("%s: SplitShared: %w", what, err)
			}
			defer node.Free()
			want := onHost(members, r)
			got := make([]int32, node.Size())
			if err := mpi.Allgather(node, []int32{int32(r)}, got); err != nil {
				return err
			}
			if !slices.Equal(got, toInt32(want)) || got[node.Rank()] != int32(r) {
				return fmt.Errorf("%s: node communicator of world ranks %v (me %d), want %v", what, got, node.Rank(), want)
			}
			if node.Size() == 1 {
				return nil
			}
			sum := make([]int64, 1)
			if err := mpi.Allreduce(node, []int64{int64(r)}, sum, mpi.Sum, mpi.WithAlgorithm("shm")); err != nil {
				return fmt.Errorf("%s: shm allreduce on the node communicator: %w", what, err)
			}
			var w int64
			for _, q := range want {
				w += int64(q)
			}
			if sum[0] != w {
				return fmt.Errorf("%s: shm allreduce: %d, want %d", what, sum[0], w)
			}
			return nil
		}
		err := mpi.RunLocalOnHosts(hosts, func(world *mpi.Comm) error {
			r := world.Rank()
			if err := check("world", world, []int{0, 1, 2, 3}, r); err != nil {
				return err
			}
			sum := make([]int64, 1)
			err := mpi.Allreduce(world, []int64{1}, sum, mpi.Sum, mpi.WithAlgorithm("shm"))
			var me *mpierr.Error
			if !errors.As(err, &me) || me.Class != mpierr.Arg {
				return fmt.Errorf("shm allreduce on the world of two hosts: %v, want MPI_ERR_ARG", err)
			}
			half, err := world.Split(r%2, r)
			if err != nil {
				return err
			}
			defer half.Free()
			return check(fmt.Sprintf("half %d", r%2), half, []int{r % 2, r%2 + 2}, r)
		})
		if err != nil {
			t.Errorf("hosts %v: %v", hosts, err)
		}
	}
}

func toInt32(v []int) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}
