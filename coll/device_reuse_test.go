package coll_test

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/gpu/gputest/fake"
	"github.com/gocoll/gocoll/ops"
)

// Address reuse over IPC, in a job of processes: each rank allreduces a
// device buffer, frees it and allocates the same size again, which the
// fake places at the freed address (as cudaMalloc often does), with new
// data. Every call must sum the new data, and once every rank has made
// the call after the reuse, no IPC mapping of a freed buffer is open.
func TestDeviceAddressReuse(t *testing.T) {
	const p, n, cycles = 3, 300, 3
	var machine *fake.Machine
	var opens, closes int // rank 0's record of the IPC calls
	m := gpuJob(t, p, gpuSetup{}, func(cm *coll.Comm, proc *fake.Process, dev int) error {
		if cm.Rank() == 0 {
			machine = proc.Machine()
		}
		var x uintptr
		for cycle := range cycles {
			buf := make([]byte, 8*n)
			for i := range n {
				binary.LittleEndian.PutUint64(buf[8*i:], uint64(1000*cycle+10*cm.Rank()+i))
			}
			y := proc.Malloc(dev, 8*n)
			if cycle > 0 && y != x {
				return fmt.Errorf("cycle %d: the fake allocated at %#x, not at the freed %#x", cycle, y, x)
			}
			x = y
			proc.Write(x, buf)
			a := coll.Args{InPlace: true, RecvDevice: devBuf(cm, x, 8*n), Count: n, Type: ops.Int64, Op: coll.Op{Builtin: ops.Sum}, Algorithm: "ring"}
			if err := cm.Allreduce(a); err != nil {
				return err
			}
			got := proc.Read(x, 8*n)
			for i := range n {
				want := uint64(p*(1000*cycle+i) + 10*(0+1+2))
				if v := binary.LittleEndian.Uint64(got[8*i:]); v != want {
					return fmt.Errorf("cycle %d: element %d = %d, want %d", cycle, i, v, want)
				}
			}
			if err := cm.Barrier(); err != nil {
				return err
			}
			if cm.Rank() == 0 {
				st := machine.Stats()
				if k := machine.FreedMapped(); k != 0 {
					return fmt.Errorf("cycle %d: %d IPC mappings of freed buffers still open", cycle, k)
				}
				if st.IPCOpens <= opens || (cycle > 0 && st.IPCCloses <= closes) {
					return fmt.Errorf("cycle %d: %d IPC opens, %d closes (before: %d, %d): want the user buffers mapped anew and the old mappings closed",
						cycle, st.IPCOpens, st.IPCCloses, opens, closes)
				}
				opens, closes = st.IPCOpens, st.IPCCloses
			}
			if err := cm.Barrier(); err != nil {
				return err
			}
			if err := proc.Free(x); err != nil {
				return err
			}
		}
		return nil
	})
	if m.FreedMapped() != 0 {
		t.Errorf("%d IPC mappings of freed buffers open after the job", m.FreedMapped())
	}
}
