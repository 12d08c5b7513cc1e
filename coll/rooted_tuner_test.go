package coll_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/transport/inproc"
	"github.com/gocoll/gocoll/tuner"
)

// The rooted collectives ask the tuner like the others: GOCOLL_DEBUG
// reports "only algorithm", or "forced" where GOCOLL_<C>_ALGORITHM names
// it, and the result is right either way.
func TestRootedGoThroughTheTuner(t *testing.T) {
	for _, forced := range []map[algorithms.Collective]string{
		nil,
		{algorithms.Bcast: "binomial", algorithms.Reduce: "binomial", algorithms.Gather: "linear"},
	} {
		tu, err := tuner.New(envvar.Settings{Forced: forced})
		if err != nil {
			t.Fatal(err)
		}
		var log lockedWriter
		cfg := &coll.Config{Tuner: tu, JobID: "test", Debug: &log}
		const p, n = 3, 5
		eps := inproc.New(p)
		ranks := []int{0, 1, 2}
		var wg sync.WaitGroup
		errs := make([]error, p)
		for r := range p {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := coll.NewComm(eps[r], ranks, 1, "MPI_COMM_WORLD", cfg)
				if err != nil {
					errs[r] = err
					return
				}
				buf := make([]byte, 8*n)
				if r == 1 {
					buf[0] = 7
				}
				if err := c.Bcast(coll.Args{Recv: buf, Count: n, Type: ops.Double, Root: 1}); err != nil || buf[0] != 7 {
					t.Errorf("rank %d: Bcast: %v, got %d", r, err, buf[0])
				}
				in, out := make([]byte, 1), make([]byte, 1)
				in[0] = 1
				if err := c.Reduce(coll.Args{Send: in, Recv: out, Count: 1, Type: ops.Int8, Op: coll.Op{Builtin: ops.Sum}, Root: 0}); err != nil || (r == 0 && out[0] != p) {
					t.Errorf("rank %d: Reduce: %v, got %d", r, err, out[0])
				}
				all := make([]byte, p)
				if err := c.Gather(coll.Args{Send: []byte{byte(10 + r)}, Recv: all, Count: 1, Type: ops.Byte, Root: 2}); err != nil || (r == 2 && all[1] != 11) {
					t.Errorf("rank %d: Gather: %v, got %v", r, err, all)
				}
			}()
		}
		wg.Wait()
		for _, ep := range eps {
			ep.Close()
		}
		for r, err := range errs {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
		}
		how := "(only algorithm)"
		if forced != nil {
			how = "(forced)"
		}
		for _, call := range []string{"MPI_Bcast", "MPI_Reduce", "MPI_Gather"} {
			for r := range p {
				if !strings.Contains(log.String(), "rank "+string(rune('0'+r))+": "+call) {
					t.Errorf("no debug line of rank %d's %s: %s", r, call, log.String())
				}
			}
		}
		for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
			if strings.Contains(line, "MPI_Bcast") || strings.Contains(line, "MPI_Reduce ") || strings.Contains(line, "MPI_Gather") {
				if !strings.Contains(line, how) {
					t.Errorf("forced %v: %q does not say %s", forced, line, how)
				}
			}
		}
	}
}
