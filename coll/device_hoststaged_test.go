package coll_test

import (
	"fmt"
	"testing"

	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/coll/counters"
	"github.com/gocoll/gocoll/gpu/gputest/fake"
)

// hostStagedMatrix is the device matrix's calls (every GPU op/type pair,
// the pairs without a GPU kernel, the non-commutative user op, in place
// and not, irregular counts) once each, as hoststaged.
func hostStagedMatrix(p int) []call {
	var calls []call
	seen := map[string]bool{}
	for _, c := range deviceMatrix(p) {
		c.alg = "hoststaged"
		if k := c.String(); !seen[k] {
			seen[k] = true
			calls = append(calls, c)
		}
	}
	return calls
}

// The hoststaged algorithm on (fake) device memory against the naive
// reference: ranks as processes and as one process, every call on the
// route (its counter moves, nothing falls back), and the copies ordered
// after the application's work (the fake defers the default streams'
// writes until something orders after them).
func TestDeviceHostStagedMatrix(t *testing.T) {
	for _, shared := range []bool{false, true} {
		for _, p := range []int{1, 2, 3, 5} {
			calls := hostStagedMatrix(p)
			before := counters.Snapshot()
			gpuJob(t, p, gpuSetup{shared: shared}, func(cm *coll.Comm, proc *fake.Process, dev int) error {
				if err := runMatrix(cm, proc, dev, calls); err != nil {
					return fmt.Errorf("shared=%v: %w", shared, err)
				}
				return nil
			})
			if got := countsOf(before, "hoststaged"); got != int64(p*len(calls)) {
				t.Errorf("shared=%v p=%d: %d calls hoststaged, want %d", shared, p, got, p*len(calls))
			}
		}
	}
}
