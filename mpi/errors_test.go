package mpi_test

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/mpi"
	"github.com/gocoll/gocoll/mpierr"
)

// Bad input gives an *mpi.Error that names the call and the argument, with
// the MPI error class; never a panic or a hang.
func TestBadInput(t *testing.T) {
	x := make([]float64, 8)
	cases := []struct {
		name  string
		call  func(c *mpi.Comm) error
		class mpi.ErrorClass
		words []string
	}{
		{"op not defined on the type", func(c *mpi.Comm) error {
			return mpi.Allreduce(c, x, make([]float64, 8), mpi.Band)
		}, mpierr.Op, []string{"MPI_Allreduce", "MPI_BAND", "MPI_DOUBLE"}},
		{"overlapping buffers", func(c *mpi.Comm) error {
			return mpi.Allreduce(c, x[:4], x[2:6], mpi.Sum)
		}, mpierr.Buffer, []string{"MPI_Allreduce", "overlap", "MPI_IN_PLACE"}},
		{"short receive buffer", func(c *mpi.Comm) error {
			return mpi.Allreduce(c, x, make([]float64, 3), mpi.Sum)
		}, mpierr.Buffer, []string{"MPI_Allreduce", "recv"}},
		{"negative recvcount", func(c *mpi.Comm) error {
			return mpi.ReduceScatter(c, x, make([]float64, 4), []int{-1, 9}, mpi.Sum)
		}, mpierr.Count, []string{"MPI_Reduce_scatter", "recvcounts[0]", "negative"}},
		{"recvcounts of the wrong length", func(c *mpi.Comm) error {
			return mpi.ReduceScatter(c, x, make([]float64, 4), []int{4, 2, 2}, mpi.Sum)
		}, mpierr.Arg, []string{"MPI_Reduce_scatter", "recvcounts", "3 entries"}},
		{"block sizes do not add up", func(c *mpi.Comm) error {
			return mpi.ReduceScatterBlock(c, x, make([]float64, 3), mpi.Sum)
		}, mpierr.Count, []string{"MPI_Reduce_scatter_block", "len(recv)"}},
		{"allgather receive size", func(c *mpi.Comm) error {
			return mpi.Allgather(c, x, make([]float64, 15))
		}, mpierr.Count, []string{"MPI_Allgather", "recv"}},
		{"user op on another type", func(c *mpi.Comm) error {
			op := mpi.NewOp(func(in, inout []int32) {}, true)
			return mpi.Allreduce(c, x, make([]float64, 8), op)
		}, mpierr.Op, []string{"MPI_Allreduce", "user op", "MPI_DOUBLE"}},
		{"unknown algorithm", func(c *mpi.Comm) error {
			return mpi.Allreduce(c, x, make([]float64, 8), mpi.Sum, mpi.WithAlgorithm("tree"))
		}, mpierr.Arg, []string{"MPI_Allreduce", "tree", "rabenseifner", "ring", "recursive_doubling"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := mpi.RunLocal(2, func(c *mpi.Comm) error { return tc.call(c) })
			var e *mpi.Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v (%T), want an *mpi.Error", err, err)
			}
			if e.Class != tc.class {
				t.Errorf("class %v (%d), want %v (%d)", e.Class, e.Class, tc.class, tc.class)
			}
			for _, w := range tc.words {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not mention %q", err, w)
				}
			}
		})
	}
}

// A non-commutative op forced onto a commutative-only algorithm runs with
// the tuner's order-preserving choice instead, and the result is right.
func TestForcedAlgorithmFallsBack(t *testing.T) {
	t.Setenv("GOCOLL_FALLBACK", "silent")
	keepLeft := mpi.NewOp(func(in, inout []int32) { copy(inout, in) }, false) // x0 op ... = x0
	err := mpi.RunLocal(5, func(c *mpi.Comm) error {
		got := make([]int32, 3)
		x := []int32{int32(c.Rank() + 1), 7, int32(c.Rank() * 2)}
		if err := mpi.Allreduce(c, x, got, keepLeft, mpi.WithAlgorithm("ring")); err != nil {
			return err
		}
		if !slices.Equal(got, []int32{1, 7, 0}) {
			return errors.New("non-commutative reduction out of rank order")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The in-place forms, each on uneven data.
func TestInPlaceForms(t *testing.T) {
	err := mpi.RunLocal(3, func(c *mpi.Comm) error {
		r := c.Rank()
		buf := []int64{int64(r), 1, 2, 3, 4, int64(10 * r), 6}
		if err := mpi.AllreduceInPlace(c, buf, mpi.Sum); err != nil {
			return err
		}
		if !slices.Equal(buf, []int64{3, 3, 6, 9, 12, 30, 18}) {
			return errors.New("AllreduceInPlace")
		}
		rs := []int64{1, 2, 3, 4, 5, 6}
		if err := mpi.ReduceScatterInPlace(c, rs, []int{1, 3, 2}, mpi.Max); err != nil {
			return err
		}
		want := [][]int64{{1}, {2, 3, 4}, {5, 6}}[r]
		if !slices.Equal(rs[:len(want)], want) {
			return errors.New("ReduceScatterInPlace")
		}
		rsb := []int64{1, 2, 3, 4, 5, 6}
		if err := mpi.ReduceScatterBlockInPlace(c, rsb, mpi.Sum); err != nil {
			return err
		}
		if !slices.Equal(rsb[:2], []int64{3 * int64(2*r+1), 3 * int64(2*r+2)}) {
			return errors.New("ReduceScatterBlockInPlace")
		}
		ag := make([]int32, 6)
		ag[2*r], ag[2*r+1] = int32(r), int32(-r)
		if err := mpi.AllgatherInPlace(c, ag); err != nil {
			return err
		}
		if !slices.Equal(ag, []int32{0, 0, 1, -1, 2, -2}) {
			return errors.New("AllgatherInPlace")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Init and Finalize happen once per process, as in MPI, so the test runs
// in a child process of its own: it then passes every time it runs (go
// test -count=N), and no other test's process is finalized.
func TestInitFinalize(t *testing.T) {
	if os.Getenv("GOCOLL_TEST_INIT_FINALIZE") != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestInitFinalize$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "GOCOLL_TEST_INIT_FINALIZE=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestInitFinalize") {
			t.Fatalf("the child process: %v\n%s", err, out)
		}
		return
	}
	c, err := mpi.Init()
	if err != nil {
		t.Fatal(err)
	}
	if c.Rank() != 0 || c.Size() != 1 {
		t.Fatalf("single rank: rank %d of %d", c.Rank(), c.Size())
	}
	got := make([]float32, 2)
	if err := mpi.Allreduce(c, []float32{1.5, 2}, got, mpi.Sum); err != nil || got[0] != 1.5 {
		t.Fatalf("allreduce on one rank: %v %v", got, err)
	}
	if _, err := mpi.Init(); err == nil {
		t.Error("second Init accepted")
	}
	if err := mpi.Finalize(); err != nil {
		t.Fatal(err)
	}
	if err := mpi.Allreduce(c, []float32{1}, got[:1], mpi.Sum); err == nil {
		t.Error("collective after Finalize succeeded")
	}
	if err := mpi.Finalize(); err == nil {
		t.Error("second Finalize accepted")
	}
}
