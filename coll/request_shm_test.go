package coll_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/transport"
)

// stepped fails unless r began and moved through the shm engine's
// stepper, not on a goroutine of its own.
func stepped(what string, r *coll.Request) error {
	if begun, ok := r.Stepped(); !begun || !ok {
		return fmt.Errorf("%s: begun %v, stepped %v: the shm call was offloaded", what, begun, ok)
	}
	return nil
}

// gatheredOf checks that out holds p blocks of n int64s, block q being
// rankVector(q, n, k).
func gatheredOf(p, n, k int, out []byte) error {
	for q := range p {
		for i := range n {
			if got, want := int64At(out, q*n+i), int64(q*1000+i+k); got != want {
				return fmt.Errorf("block %d element %d is %d, want %d", q, i, got, want)
			}
		}
	}
	return nil
}

// Shm requests move by Progress, not on goroutines: several in flight on
// one communicator and on a duplicate (one step, many chunks, reduce-
// scatter, allgather through the slots and by CMA), a blocking shm call
// between them, completed out of order by Wait and Test; with and
// without the progress goroutine.
func TestSharedRequestsStep(t *testing.T) {
	const shm = "shm"
	for _, thread := range []bool{false, true} {
		for _, p := range []int{1, 2, 3, 5, 8} {
			jobWith(t, p, func(cfg *coll.Config) { cfg.ProgressThread = thread }, func(c *coll.Comm) error {
				if !c.Shared() {
					return errors.New("the communicator has no shared segment")
				}
				d, err := c.Dup("dup")
				if err != nil {
					return err
				}
				defer d.Free()
				me := c.Rank()
				sizes := []int{1003, 40000} // one step; many chunks of the 128 KiB slot
				var reqs []*coll.Request
				outs := make([][]byte, len(sizes))
				for k, n := range sizes {
					outs[k] = make([]byte, 8*n)
					r, err := c.Iallreduce(coll.Args{Send: rankVector(me, n, k), Recv: outs[k], Count: n, Type: ops.Int64, Op: opSum, Algorithm: shm})
					if err != nil {
						return err
					}
					if begun, _ := r.Stepped(); begun || k == 0 && !thread {
						// The first began at once (nothing ahead of it).
						if err := stepped("iallreduce at its start", r); err != nil {
							return err
						}
					}
					reqs = append(reqs, r)
				}
				const block = 5000
				rs := make([]byte, 8*block)
				rrs, err := c.IreduceScatterBlock(coll.Args{Send: rankVector(me, block*p, 3), Recv: rs, Count: block, Type: ops.Int64, Op: opSum, Algorithm: shm})
				if err != nil {
					return err
				}
				const big = 8192 // 64 KiB blocks: CMA where it is on and the ranks fit the cores
				ag := make([]byte, 8*big*p)
				rag, err := d.Iallgather(coll.Args{Send: rankVector(me, big, 4), Recv: ag, Count: big, Type: ops.Int64, Algorithm: shm})
				if err != nil {
					return err
				}
				small := make([]byte, 8*3*p)
				rsmall, err := c.Iallgather(coll.Args{Send: rankVector(me, 3, 5), Recv: small, Count: 3, Type: ops.Int64, Algorithm: shm})
				if err != nil {
					return err
				}
				blocking := make([]byte, 8*1003)
				if err := c.Allreduce(coll.Args{Send: rankVector(me, 1003, 7), Recv: blocking, Count: 1003, Type: ops.Int64, Op: opSum, Algorithm: shm}); err != nil {
					return err
				}
				if err := sumOf(p, 1003, 7, blocking); err != nil {
					return fmt.Errorf("the blocking call: %w", err)
				}
				if err := testUntilDone(rag, 20*time.Second); err != nil {
					return fmt.Errorf("the iallgather on the duplicate: %w", err)
				}
				for _, r := range []*coll.Request{rsmall, rrs, reqs[1], reqs[0]} {
					if err := r.Wait(); err != nil {
						return err
					}
				}
				for k, n := range sizes {
					if err := sumOf(p, n, k, outs[k]); err != nil {
						return fmt.Errorf("iallreduce of %d: %w", n, err)
					}
				}
				for i := range block {
					want := int64(0)
					for q := range p {
						want += int64(q*1000 + me*block + i + 3)
					}
					if got := int64At(rs, i); got != want {
						return fmt.Errorf("ireduce_scatter_block: element %d is %d, want %d", i, got, want)
					}
				}
				if err := gatheredOf(p, big, 4, ag); err != nil {
					return fmt.Errorf("iallgather on the duplicate: %w", err)
				}
				if err := gatheredOf(p, 3, 5, small); err != nil {
					return fmt.Errorf("small iallgather: %w", err)
				}
				for i, r := range append(reqs, rrs, rag, rsmall) {
					if err := stepped(fmt.Sprintf("request %d", i), r); err != nil {
						return err
					}
				}
				return nil
			})
		}
	}
}

// Persistent shm requests, started again and again with new data, step
// (reusing their stepper) and give the same results as each time before.
func TestSharedPersistent(t *testing.T) {
	for _, p := range []int{1, 2, 4} {
		const n, big = 20000, 8192
		job(t, p, func(c *coll.Comm) error {
			me := c.Rank()
			send, out := make([]byte, 8*n), make([]byte, 8*n)
			ar, err := c.AllreduceInit(coll.Args{Send: send, Recv: out, Count: n, Type: ops.Int64, Op: opSum, Algorithm: "shm"})
			if err != nil {
				return err
			}
			block, ag := make([]byte, 8*big), make([]byte, 8*big*p)
			gr, err := c.AllgatherInit(coll.Args{Send: block, Recv: ag, Count: big, Type: ops.Int64, Algorithm: "shm"})
			if err != nil {
				return err
			}
			for k := range 3 {
				copy(send, rankVector(me, n, k))
				copy(block, rankVector(me, big, k))
				if err := ar.Start(); err != nil {
					return err
				}
				if err := gr.Start(); err != nil {
					return err
				}
				if err := gr.Wait(); err != nil {
					return err
				}
				if err := ar.Wait(); err != nil {
					return err
				}
				if err := sumOf(p, n, k, out); err != nil {
					return fmt.Errorf("allreduce start %d: %w", k, err)
				}
				if err := gatheredOf(p, big, k, ag); err != nil {
					return fmt.Errorf("allgather start %d: %w", k, err)
				}
				if err := errors.Join(stepped("allreduce", ar), stepped("allgather", gr)); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

// A shm request whose peer never comes fails after the timeout with the
// error the blocking call gives: the call, the communicator, the
// algorithm, the peer, wrapped once.
func TestSharedRequestTimesOut(t *testing.T) {
	jobWith(t, 2, func(cfg *coll.Config) { cfg.Timeout = 300 * time.Millisecond }, func(c *coll.Comm) error {
		if c.Rank() == 1 {
			return nil // never comes
		}
		a := coll.Args{Send: rankVector(0, 10, 0), Recv: make([]byte, 80), Count: 10, Type: ops.Int64, Op: opSum, Algorithm: "shm"}
		r, err := c.Iallreduce(a)
		if err != nil {
			return err
		}
		start := time.Now()
		var nb error
		for done := false; !done; {
			if done, nb = r.Test(); time.Since(start) > 10*time.Second {
				return errors.New("the request never failed")
			}
		}
		if err := stepped("the failed request", r); err != nil {
			return err
		}
		blocking := c.Allreduce(a) // fails too: rank 1 is still missing
		var te *transport.Error
		if !errors.As(nb, &te) || te.Peer != 1 || !errors.Is(nb, transport.ErrTimeout) {
			return fmt.Errorf("got %v, want a timeout naming rank 1", nb)
		}
		// The same words, but for the name of the call the program made.
		if blocking == nil || !strings.HasPrefix(nb.Error(), "MPI_Iallreduce: MPI_Iallreduce failed") ||
			strings.ReplaceAll(nb.Error(), "MPI_Iallreduce", "MPI_Allreduce") != blocking.Error() {
			return fmt.Errorf("the request's error\n\t%v\ndiffers from the blocking call's\n\t%v", nb, blocking)
		}
		return nil
	})
}
