package coll_test

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/ops"
)

func sumInt64(c *coll.Comm, v int64) (int64, error) {
	in, out := make([]byte, 8), make([]byte, 8)
	binary.LittleEndian.PutUint64(in, uint64(v))
	err := c.Allreduce(coll.Args{Send: in, Recv: out, Count: 1, Type: ops.Int64, Op: coll.Op{Builtin: ops.Sum}})
	return int64(binary.LittleEndian.Uint64(out)), err
}

// Split by parity with reversed keys, then collectives on the halves and
// on the parent interleaved: each sees only its own members.
func TestSplitAndDup(t *testing.T) {
	const p = 7
	job(t, p, func(world *coll.Comm) error {
		r := world.Rank()
		half, err := world.Split(r%2, -r, "half")
		if err != nil {
			return err
		}
		var want []int
		for q := p - 1; q >= 0; q-- {
			if q%2 == r%2 {
				want = append(want, q)
			}
		}
		if !slices.Equal(half.Ranks(), want) || half.Ranks()[half.Rank()] != r {
			return fmt.Errorf("split: ranks %v (me %d), want %v", half.Ranks(), half.Rank(), want)
		}
		dup, err := world.Dup("dup")
		if err != nil {
			return err
		}
		if dup.Context() == world.Context() || dup.Context() == half.Context() {
			return fmt.Errorf("dup shares a context: %d", dup.Context())
		}
		for i := range 20 {
			s1, err := sumInt64(half, int64(r))
			if err != nil {
				return err
			}
			s2, err := sumInt64(world, int64(i))
			if err != nil {
				return err
			}
			s3, err := sumInt64(dup, 1)
			if err != nil {
				return err
			}
			wantHalf := int64(0 + 2 + 4 + 6)
			if r%2 == 1 {
				wantHalf = 1 + 3 + 5
			}
			if s1 != wantHalf || s2 != int64(p*i) || s3 != p {
				return fmt.Errorf("round %d: sums %d %d %d", i, s1, s2, s3)
			}
		}
		none, err := world.Split(coll.Undefined, 0, "none")
		if err != nil || none != nil {
			return fmt.Errorf("MPI_UNDEFINED color: %v %v", none, err)
		}
		half.Free()
		dup.Free()
		if _, err := sumInt64(half, 1); err == nil {
			return fmt.Errorf("collective on a freed communicator succeeded")
		}
		return nil
	})
}

// Creating and freeing communicators many times reuses context ids: no
// leak, no exhaustion.
func TestCommCreateFreeNoLeak(t *testing.T) {
	job(t, 3, func(world *coll.Comm) error {
		seen := map[uint32]bool{}
		for i := range 20000 {
			c, err := world.Dup("tmp")
			if err != nil {
				return fmt.Errorf("dup %d: %w", i, err)
			}
			seen[c.Context()] = true
			if i%1000 == 0 {
				if _, err := sumInt64(c, 1); err != nil {
					return err
				}
			}
			c.Free()
		}
		if len(seen) > 2 {
			return fmt.Errorf("%d distinct contexts for one live dup at a time", len(seen))
		}
		return nil
	})
}
