package coll_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/executor/device"
	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/gpu/gputest/fake"
	"github.com/gocoll/gocoll/ops"
)

// devBuf is device memory as the entries pass it to coll: by address,
// classified by the communicator (gocoll must never read it with the CPU;
// the fake makes such a read fault).
func devBuf(cm *coll.Comm, p uintptr, n int) *gpu.Buffer {
	return &gpu.Buffer{Ptr: p, Len: n, Mem: cm.Memory(p)}
}

// gpuSetup is how a test job's ranks see CUDA.
type gpuSetup struct {
	machine fake.Options
	opts    device.Options
	noIPC   bool
	shared  bool // one fake process for all ranks (a Go program's RunLocal)
	devices func(rank int) int
	debug   *lockedWriter // GOCOLL_DEBUG=info's lines, if not nil
	// reproducible: GOCOLL_REPRODUCIBLE=1
	reproducible bool
	thread       bool                // GOCOLL_PROGRESS_THREAD=1
	group        device.GroupOptions // GOCOLL_CUDA_SLOT, GOCOLL_CUDA_SYNC
	// onMachine, if set, receives the fake machine before the job starts.
	onMachine func(m *fake.Machine)
}

// gpuJob runs f on p ranks, each a fake CUDA process on one fake node
// (or all the same process), and returns the node.
func gpuJob(t *testing.T, p int, s gpuSetup, f func(c *coll.Comm, proc *fake.Process, dev int) error) *fake.Machine {
	t.Helper()
	m := fake.NewMachine(s.machine)
	if s.onMachine != nil {
		s.onMachine(m)
	}
	procs := make([]*fake.Process, p)
	rts := make([]*gpu.Runtime, p)
	for r := range p {
		if s.shared && r > 0 {
			procs[r], rts[r] = procs[0], rts[0]
			continue
		}
		procs[r] = m.NewProcess()
		rt, err := gpu.NewRuntime(procs[r], gpu.Auto)
		if err != nil {
			t.Fatal(err)
		}
		rts[r] = rt
	}
	jobWith(t, p, func(cfg *coll.Config) {
		cfg.Device.Options = s.opts
		cfg.Device.NoIPC = s.noIPC
		cfg.Reproducible = s.reproducible
		cfg.ProgressThread = s.thread
		cfg.Device.Group = s.group
		if s.debug != nil {
			cfg.Debug = s.debug
		}
	}, func(c *coll.Comm) error {
		dev := 0
		if s.devices != nil {
			dev = s.devices(c.Rank())
		}
		procs[c.Rank()].AppInit(dev)
		c.SetCUDA(rts[c.Rank()])
		err := f(c, procs[c.Rank()], dev)
		if err == nil {
			// As MPI_Finalize: no rank frees what a peer may still read.
			err = c.Sync()
		}
		c.Close()
		return err
	})
	if n := m.OpenMappings(); n != 0 {
		t.Errorf("%d IPC mappings left open after every communicator closed", n)
	}
	return m
}

// deviceTypes are the datatypes with GPU kernels, one per machine type.
var deviceTypes = []ops.Type{ops.Float16, ops.BFloat16, ops.Float, ops.Double, ops.Int32, ops.Int64, ops.Uint32, ops.Uint64}

// deviceMatrix lists the calls of the device matrix at p ranks: every
// schedule algorithm of every collective with every GPU op/type pair, in
// place and not; a few pairs that reduce on the host (bitwise, MAXLOC,
// complex, the non-commutative user op); counts that split unevenly, a
// long one (many segments) among them.
func deviceMatrix(p int) []call {
	var calls []call
	long := 37*p + 11
	for _, c := range algorithms.Collectives {
		for _, a := range algorithms.All(c) {
			if !a.IsSchedule() {
				continue
			}
			var pairs []call
			for _, typ := range deviceTypes {
				if c == algorithms.Allgather {
					pairs = append(pairs, call{typ: typ})
					continue
				}
				for _, op := range gpu.ReduceOps {
					pairs = append(pairs, call{typ: typ, op: op})
				}
			}
			if c.Reduces() {
				pairs = append(pairs, call{typ: ops.Int32, op: ops.Band}, call{typ: ops.DoubleInt, op: ops.Maxloc},
					call{typ: ops.CDoubleComplex, op: ops.Prod})
				if !a.Commutative {
					pairs = append(pairs, call{typ: ops.TwoInt, user: true})
				}
			}
			for k, pair := range pairs {
				for _, inPlace := range []bool{false, true} {
					n := 2*p + 3
					if (k+len(calls))%5 == 0 {
						n = long
					}
					counts := make([]int, p)
					for i := range counts {
						counts[i] = n / p
						if c == algorithms.ReduceScatter || c == algorithms.Allgather {
							counts[i] = (i*7 + k) % 5 // irregular, with zeros
						}
					}
					if c == algorithms.Allreduce {
						counts = []int{n}
					}
					x := pair
					x.coll, x.alg, x.inPlace, x.counts = c, a.Name, inPlace, counts
					if x.op == ops.OpNull && !x.user && c != algorithms.Allgather {
						continue
					}
					calls = append(calls, x)
				}
			}
		}
	}
	return calls
}

// runOnDevice performs the call on rank r with its buffers in device
// memory of proc, and returns the result read back.
func (c call) runOnDevice(cm *coll.Comm, proc *fake.Process, dev int, in []byte) ([]byte, error) {
	r, size := cm.Rank(), c.typ.Size()
	a := coll.Args{Type: c.typ, Op: c.collOp(), Algorithm: c.alg, InPlace: c.inPlace}
	total := c.total()
	alloc := func(data []byte, n int) *gpu.Buffer {
		ptr := proc.Malloc(dev, max(n, 1)+c.offset)
		if c.offsetOn != nil && c.offsetOn(r) {
			ptr += uintptr(c.offset)
		}
		if data != nil {
			proc.Write(ptr, data)
		}
		return devBuf(cm, ptr, n)
	}
	read := func(b *gpu.Buffer, n int) []byte {
		if n == 0 {
			return []byte{}
		}
		return proc.Read(b.Ptr, n)
	}
	switch c.coll {
	case algorithms.Allreduce:
		a.Count = total
		if c.inPlace {
			a.RecvDevice = alloc(in, total*size)
		} else {
			a.SendDevice, a.RecvDevice = alloc(in, len(in)), alloc(nil, total*size)
		}
		err := cm.Allreduce(a)
		return read(a.RecvDevice, total*size), err
	case algorithms.ReduceScatter, algorithms.ReduceScatterBlock:
		mine := c.counts[r] * size
		a.Counts, a.Count = c.counts, c.counts[0]
		if c.inPlace {
			a.RecvDevice = alloc(in, len(in))
		} else {
			a.SendDevice, a.RecvDevice = alloc(in, len(in)), alloc(nil, mine)
		}
		var err error
		if c.coll == algorithms.ReduceScatter {
			err = cm.ReduceScatter(a)
		} else {
			err = cm.ReduceScatterBlock(a)
		}
		return read(a.RecvDevice, mine), err
	default:
		a.Counts = c.counts
		lo := 0
		for _, x := range c.counts[:r] {
			lo += x
		}
		if c.inPlace {
			buf := make([]byte, total*size)
			copy(buf[lo*size:], in)
			a.RecvDevice = alloc(buf, total*size)
		} else {
			a.SendDevice, a.RecvDevice = alloc(in, len(in)), alloc(nil, total*size)
		}
		err := cm.Allgatherv(a)
		return read(a.RecvDevice, total*size), err
	}
}

// runMatrix runs the device matrix on one communicator, back to back.
func runMatrix(cm *coll.Comm, proc *fake.Process, dev int, calls []call) error {
	p := cm.Size()
	for i, c := range calls {
		in := c.inputs(p, uint64(i))
		got, err := c.runOnDevice(cm, proc, dev, in[cm.Rank()])
		if err != nil {
			return fmt.Errorf("%v: %w", c, err)
		}
		if want := c.reference(in, cm.Rank()); !equal(c.typ, got, want) {
			return fmt.Errorf("%v on device memory: result differs from the naive reference", c)
		}
	}
	return nil
}

// Real data in (fake) device memory through every schedule algorithm of
// every collective, every GPU op/type pair and some host-reduced ones, in
// place and not, ranks as separate CUDA processes on one node: IPC
// between them, GPU kernels for the reductions. Segments are tiny so that
// messages are pipelined over many of them.
func TestDeviceMatrixIPC(t *testing.T) {
	for _, p := range []int{1, 2, 3, 4, 5} {
		calls := deviceMatrix(p)
		var stats []device.Stats
		statsCh := make(chan device.Stats, p)
		m := gpuJob(t, p, gpuSetup{opts: device.Options{Segment: 64, Depth: 2}}, func(cm *coll.Comm, proc *fake.Process, dev int) error {
			err := runMatrix(cm, proc, dev, calls)
			statsCh <- cm.DeviceStats()
			return err
		})
		close(statsCh)
		for s := range statsCh {
			stats = append(stats, s)
		}
		checkDevicePaths(t, p, m, stats, "ipc")
	}
}

// The same through pinned host memory only (GOCOLL_CUDA_IPC=0), with
// streams that run late at random, which shows any missing wait.
func TestDeviceMatrixStaged(t *testing.T) {
	for _, p := range []int{2, 4} {
		calls := deviceMatrix(p)
		statsCh := make(chan device.Stats, p)
		m := gpuJob(t, p, gpuSetup{machine: fake.Options{Jitter: 30 * time.Microsecond}, noIPC: true,
			opts: device.Options{Segment: 48, Depth: 3}}, func(cm *coll.Comm, proc *fake.Process, dev int) error {
			err := runMatrix(cm, proc, dev, calls)
			statsCh <- cm.DeviceStats()
			return err
		})
		close(statsCh)
		var stats []device.Stats
		for s := range statsCh {
			stats = append(stats, s)
		}
		checkDevicePaths(t, p, m, stats, "staged")
	}
}

// Ranks that are goroutines of one CUDA process copy from each other's
// memory directly.
func TestDeviceDirect(t *testing.T) {
	const p = 3
	calls := deviceMatrix(p)
	statsCh := make(chan device.Stats, p)
	m := gpuJob(t, p, gpuSetup{shared: true, opts: device.Options{Segment: 256}}, func(cm *coll.Comm, proc *fake.Process, dev int) error {
		err := runMatrix(cm, proc, dev, calls)
		statsCh <- cm.DeviceStats()
		return err
	})
	close(statsCh)
	var stats []device.Stats
	for s := range statsCh {
		stats = append(stats, s)
	}
	checkDevicePaths(t, p, m, stats, "direct")
}

// Ranks on two GPUs that cannot reach each other: every IPC descriptor is
// refused and the data comes staged instead, with the right result.
func TestDeviceIPCFallback(t *testing.T) {
	const p = 4
	calls := deviceMatrix(p)[:40]
	statsCh := make(chan device.Stats, p)
	gpuJob(t, p, gpuSetup{machine: fake.Options{Devices: 2, NoPeerAccess: true}, devices: func(r int) int { return r % 2 },
		opts: device.Options{Segment: 128}}, func(cm *coll.Comm, proc *fake.Process, dev int) error {
		err := runMatrix(cm, proc, dev, calls)
		statsCh <- cm.DeviceStats()
		return err
	})
	close(statsCh)
	fallbacks := 0
	for s := range statsCh {
		fallbacks += s.Fallbacks
	}
	if fallbacks == 0 {
		t.Error("no IPC transfer fell back to staging between devices without peer access")
	}
}

// checkDevicePaths checks that the calls took the device paths: GPU
// kernels for the GPU pairs, host reductions for the others, and the
// expected kind of transfer.
func checkDevicePaths(t *testing.T, p int, m *fake.Machine, stats []device.Stats, path string) {
	t.Helper()
	st := m.Stats()
	for _, typ := range deviceTypes {
		for _, op := range gpu.ReduceOps {
			name := gpu.Kernel(op, typ)
			if p > 1 && st.Launches[name] == 0 {
				t.Errorf("p=%d: kernel %s never launched", p, name)
			}
		}
	}
	var sum device.Stats
	for _, s := range stats {
		sum.Staged += s.Staged
		sum.IPC += s.IPC
		sum.Direct += s.Direct
		sum.HostReduce += s.HostReduce
		sum.GPUReduce += s.GPUReduce
		sum.Segments += s.Segments
	}
	if p == 1 {
		return
	}
	if sum.HostReduce == 0 || sum.GPUReduce == 0 {
		t.Errorf("p=%d: %d host and %d GPU reductions, want both", p, sum.HostReduce, sum.GPUReduce)
	}
	switch path {
	case "ipc":
		if sum.IPC == 0 || st.IPCOpens == 0 {
			t.Errorf("p=%d: no IPC transfer (%+v, %d opens)", p, sum, st.IPCOpens)
		}
	case "staged":
		if sum.Staged == 0 || sum.IPC+sum.Direct != 0 || sum.Segments <= sum.Staged {
			t.Errorf("p=%d: staged transfers %+v: want only staged ones, in several segments", p, sum)
		}
	case "direct":
		if sum.Direct == 0 || sum.IPC != 0 || st.IPCOpens != 0 {
			t.Errorf("p=%d: transfers %+v: want direct ones", p, sum)
		}
	}
}

// A forced shm algorithm is never run on device memory: the tuner's
// restriction sends the call to a schedule.
func TestDeviceNeverShm(t *testing.T) {
	gpuJob(t, 3, gpuSetup{}, func(cm *coll.Comm, proc *fake.Process, dev int) error {
		if !cm.Shared() {
			return fmt.Errorf("the test needs a shared segment")
		}
		n := 5
		x := proc.Malloc(dev, 8*n)
		proc.Write(x, bytes.Repeat([]byte{1, 0, 0, 0, 0, 0, 0, 0}, n))
		a := coll.Args{InPlace: true, RecvDevice: devBuf(cm, x, 8*n), Count: n, Type: ops.Int64, Op: coll.Op{Builtin: ops.Sum}, Algorithm: "shm"}
		if err := cm.Allreduce(a); err != nil {
			return err
		}
		if got := proc.Read(x, 8); got[0] != 3 {
			return fmt.Errorf("sum %d, want 3", got[0])
		}
		return nil
	})
}

// Mixed buffers on one rank: a host send buffer and a device receive
// buffer, and the other way round.
func TestDeviceMixedBuffers(t *testing.T) {
	gpuJob(t, 3, gpuSetup{opts: device.Options{Segment: 32}}, func(cm *coll.Comm, proc *fake.Process, dev int) error {
		n := 7
		host := make([]byte, 4*n)
		for i := range n {
			host[4*i] = byte(cm.Rank() + i)
		}
		d := proc.Malloc(dev, 4*n)
		if err := cm.Allreduce(coll.Args{Send: host, RecvDevice: devBuf(cm, d, 4*n), Count: n, Type: ops.Int32, Op: coll.Op{Builtin: ops.Sum}}); err != nil {
			return err
		}
		got := proc.Read(d, 4*n)
		for i := range n {
			if want := byte(3*i + 3); got[4*i] != want {
				return fmt.Errorf("device recv: element %d = %d, want %d", i, got[4*i], want)
			}
		}
		out := make([]byte, 4*n)
		if err := cm.Allreduce(coll.Args{SendDevice: devBuf(cm, d, 4*n), Recv: out, Count: n, Type: ops.Int32, Op: coll.Op{Builtin: ops.Max}}); err != nil {
			return err
		}
		if !bytes.Equal(out, got) {
			return fmt.Errorf("host recv: %v, want %v", out, got)
		}
		return nil
	})
}

// With GOCOLL_CHECK=1, a call where some ranks pass device memory and
// others host memory fails on every rank, naming the difference, instead
// of hanging.
func TestDeviceMixedRanksChecked(t *testing.T) {
	m := fake.NewMachine(fake.Options{})
	const p = 3
	procs, rts := make([]*fake.Process, p), make([]*gpu.Runtime, p)
	for r := range p {
		procs[r] = m.NewProcess()
		procs[r].AppInit(0)
		rts[r], _ = gpu.NewRuntime(procs[r], gpu.Auto)
	}
	errs := make([]error, p)
	jobWith(t, p, func(cfg *coll.Config) { cfg.Check = true }, func(cm *coll.Comm) error {
		r := cm.Rank()
		cm.SetCUDA(rts[r])
		a := coll.Args{InPlace: true, Recv: make([]byte, 8), Count: 1, Type: ops.Int64, Op: coll.Op{Builtin: ops.Sum}}
		if r == 1 {
			a.Recv, a.RecvDevice = nil, devBuf(cm, procs[r].Malloc(0, 8), 8)
		}
		errs[r] = cm.Allreduce(a)
		return nil
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "device memory") {
			t.Errorf("rank %d: %v; want a mismatch naming device memory", r, err)
		}
	}
}
