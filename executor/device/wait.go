package device

import (
	"time"

	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/internal/pause"
)

// spinFor is how long a host wait for the GPU polls without pause before
// it backs off: a step of a small collective completes in microseconds,
// while a yield on a thread locked to its goroutine hands the thread over
// twice and a sleep costs tens of microseconds (the timer slack). Where
// the node is crowded (Options.Crowded) a wait polls 64 times, not for a
// millisecond: a rank spinning on a core its peer needs delays the very
// work it waits for (on the fake driver, whose GPU is goroutines, a
// millisecond's spin per wait made the device matrices 4x slower).
const spinFor = time.Millisecond

// waitEvent waits on the host until ev has completed: cuEventQuery in a
// loop for st.spin, then cuEventSynchronize. gocoll's events have no
// CU_EVENT_BLOCKING_SYNC, so that follows the context's scheduling
// policy (spin, or yield where threads outnumber cores) and never
// sleeps until an interrupt. A schedule waits once per segment, so what
// a wait costs past the spin counts: polling with sleeps instead (20 µs,
// 60-80 with the timer's slack) made the device matrices on the fake
// driver, whose waits outlast the spin, 30x slower.
func (st *state) waitEvent(drv gpu.Driver, ev gpu.Event) error {
	done, err := spinUntil(st.spin, func() (bool, error) { return drv.EventQuery(ev) })
	if done || err != nil {
		return err
	}
	return drv.EventSynchronize(ev)
}

// waitStream waits on the host until everything queued on the state's
// compute stream has completed: cuStreamQuery in a loop for st.spin,
// then every 20 µs (a call waits for its stream once or twice).
func (st *state) waitStream(drv gpu.Driver) error {
	query := func() (bool, error) { return drv.StreamQuery(st.comp) }
	done, err := spinUntil(st.spin, query)
	for !done && err == nil {
		pause.For(20 * time.Microsecond)
		done, err = query()
	}
	return err
}

// spinUntil polls done without pause until it says so, fails, or spin
// has passed (64 polls at least), and reports whether it said so.
func spinUntil(spin time.Duration, done func() (bool, error)) (bool, error) {
	start := time.Now()
	for i := 1; ; i++ {
		ok, err := done()
		if err != nil || ok {
			return ok, err
		}
		if i%64 == 0 && time.Since(start) >= spin {
			return false, nil
		}
	}
}
