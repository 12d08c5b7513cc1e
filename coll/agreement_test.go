package coll_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/transport/inproc"
	"github.com/gocoll/gocoll/tuner"
)

// checkedJob runs f on p ranks with GOCOLL_CHECK on and returns each
// rank's error; it fails the test if the ranks do not all return.
func checkedJob(t *testing.T, p int, f func(c *coll.Comm) error) []error {
	t.Helper()
	tu, _ := tuner.New(envvar.Settings{})
	cfg := &coll.Config{Tuner: tu, JobID: "test", Check: true}
	eps := inproc.New(p)
	defer func() {
		for _, ep := range eps {
			ep.Close()
		}
	}()
	ranks := make([]int, p)
	for i := range ranks {
		ranks[i] = i
	}
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r := range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := coll.NewComm(eps[r], ranks, 1, "MPI_COMM_WORLD", cfg)
			if err == nil {
				err = f(c)
			}
			errs[r] = err
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("ranks hang: the check did not catch the mismatch")
	}
	return errs
}

func sum(c *coll.Comm, n int) error {
	buf := make([]byte, 8*n)
	return c.Allreduce(coll.Args{Send: buf, Recv: make([]byte, 8*n), Count: n, Type: ops.Double, Op: coll.Op{Builtin: ops.Sum}})
}

// Mismatched calls fail on every rank with a message naming both calls,
// instead of hanging or corrupting memory.
func TestCheckCatchesMismatches(t *testing.T) {
	cases := []struct {
		name string
		bad  func(c *coll.Comm) error // what rank 2 does instead of sum(c, 10)
		want string
	}{
		{"count", func(c *coll.Comm) error { return sum(c, 9) }, "count 9"},
		{"op", func(c *coll.Comm) error {
			buf := make([]byte, 80)
			return c.Allreduce(coll.Args{Send: buf, Recv: make([]byte, 80), Count: 10, Type: ops.Double, Op: coll.Op{Builtin: ops.Max}})
		}, "MPI_MAX"},
		{"datatype", func(c *coll.Comm) error {
			buf := make([]byte, 80)
			return c.Allreduce(coll.Args{Send: buf, Recv: make([]byte, 80), Count: 10, Type: ops.Int64, Op: coll.Op{Builtin: ops.Sum}})
		}, "MPI_INT64_T"},
		{"collective", func(c *coll.Comm) error {
			return c.Allgather(coll.Args{Send: make([]byte, 8), Recv: make([]byte, 32), Count: 1, Type: ops.Double})
		}, "MPI_Allgather"},
		{"barrier", func(c *coll.Comm) error { return c.Barrier() }, "MPI_Barrier"},
		{"reproducible", func(c *coll.Comm) error {
			buf := make([]byte, 80)
			return c.Allreduce(coll.Args{Send: buf, Recv: make([]byte, 80), Count: 10, Type: ops.Double, Op: coll.Op{Builtin: ops.Sum}, Reproducible: true})
		}, "MPI_SUM, reproducible)"},
		{"invalid arguments", func(c *coll.Comm) error {
			return c.Allreduce(coll.Args{Send: nil, Recv: make([]byte, 80), Count: 10, Type: ops.Double, Op: coll.Op{Builtin: ops.Sum}})
		}, "rank 2 passed invalid arguments"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := checkedJob(t, 4, func(c *coll.Comm) error {
				if c.Rank() == 2 {
					return tc.bad(c)
				}
				return sum(c, 10)
			})
			for r, err := range errs {
				var e *mpierr.Error
				if !errors.As(err, &e) {
					t.Fatalf("rank %d: got %v, want an MPI error", r, err)
				}
				if r != 2 && !strings.Contains(err.Error(), tc.want) {
					t.Errorf("rank %d: %q does not mention %q", r, err, tc.want)
				}
				// Every rank, the odd one too, names the same pair, so
				// the message that ends the job does not depend on
				// which rank fails first.
				if tc.name != "invalid arguments" && !strings.Contains(err.Error(), "rank 0 calls MPI_Allreduce(count 10, MPI_DOUBLE x1, MPI_SUM) but rank 2 calls ") {
					t.Errorf("rank %d: %q does not name rank 0's call and then rank 2's", r, err)
				}
			}
		})
	}
}

// Matching calls pass the check, and their results are right.
func TestCheckPassesMatchingCalls(t *testing.T) {
	errs := checkedJob(t, 3, func(c *coll.Comm) error {
		for range 10 {
			if err := sum(c, 100); err != nil {
				return err
			}
			if err := c.Barrier(); err != nil {
				return err
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
