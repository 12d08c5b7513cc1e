package coll_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/coll/counters"
	"github.com/gocoll/gocoll/executor/device"
	"github.com/gocoll/gocoll/gpu/gputest/fake"
	"github.com/gocoll/gocoll/ops"
)

// An allocation another process cannot map (its cuIpcOpenMemHandle
// fails) is staged alone: the call on it is right, GOCOLL_DEBUG=info
// says so, and the next call, on a new allocation of the same process,
// maps it (CUDA IPC again), both on a schedule (ring: the executor's
// transfers) and on the device group (twoshot: staged through the
// slots, then zero copy).
func TestDeviceIPCRefusedPerAllocation(t *testing.T) {
	const p, n = 2, 1024
	for _, alg := range []string{"ring", "twoshot"} {
		var m *fake.Machine
		debug := &lockedWriter{}
		before := counters.Snapshot()
		type result struct{ first, second device.Stats }
		res := make([]result, p)
		gpuJob(t, p, gpuSetup{debug: debug, onMachine: func(mm *fake.Machine) { m = mm }}, func(cm *coll.Comm, proc *fake.Process, dev int) error {
			r := cm.Rank()
			c := call{coll: algorithms.Allreduce, alg: alg, typ: ops.Float, op: ops.Sum, counts: []int{n}}
			run := func(seed uint64, refuse bool) (device.Stats, error) {
				in := c.inputs(p, seed)
				send, recv := proc.Malloc(dev, 4*n), proc.Malloc(dev, 4*n)
				defer proc.Free(send)
				defer proc.Free(recv)
				if refuse && r == 0 {
					m.RefuseIPCOpen(send)
					m.RefuseIPCOpen(recv)
				}
				proc.Write(send, in[r])
				a := coll.Args{SendDevice: devBuf(cm, send, 4*n), RecvDevice: devBuf(cm, recv, 4*n), Count: n, Type: ops.Float, Op: coll.Op{Builtin: ops.Sum}, Algorithm: alg}
				if err := cm.Allreduce(a); err != nil {
					return device.Stats{}, err
				}
				if got, want := proc.Read(recv, 4*n), c.reference(in, r); !equal(ops.Float, got, want) {
					return device.Stats{}, fmt.Errorf("%s, seed %d: wrong result", alg, seed)
				}
				err := cm.Sync() // every rank is done with the buffers before they are freed
				return cm.DeviceStats(), err
			}
			first, err := run(1, true)
			if err != nil {
				return err
			}
			second, err := run(2, false)
			res[r] = result{first, second}
			return err
		})
		log := debug.String()
		if !strings.Contains(log, "cannot be mapped here") {
			t.Errorf("%s: GOCOLL_DEBUG=info does not say an allocation could not be mapped:\n%s", alg, log)
		}
		// Rank 1 mapped rank 0's first buffers and failed; the second
		// ones it mapped.
		switch alg {
		case "ring":
			f, s := res[0].first, res[0].second
			if f.Fallbacks == 0 {
				t.Errorf("ring: rank 0's transfers from the refused allocation were not staged (%+v)", f)
			}
			if s.Fallbacks != f.Fallbacks || s.IPC <= f.IPC {
				t.Errorf("ring: the next allocation did not go by CUDA IPC: after the first call %+v, after the second %+v", f, s)
			}
		case "twoshot":
			staged, two := countsOf(before, "device_staged"), countsOf(before, "twoshot")
			if staged != p || two != 2*p {
				t.Errorf("twoshot: %d calls staged, %d twoshot calls; want %d staged (the refused allocation's) of %d", staged, two, p, 2*p)
			}
		}
	}
}
