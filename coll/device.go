package coll

import (
	"fmt"
	"unsafe"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/executor/device"
	"github.com/gocoll/gocoll/executor/host"
	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/schedule"
	"github.com/gocoll/gocoll/transport"
)

// CUDA device memory is decided here, at the entry: run classifies the
// call's buffers; when one of them is device memory the call runs the
// schedule the tuner chose (never an shm algorithm: their restriction
// says host memory only) on the device executor instead of the host
// executor. Without CUDA (GOCOLL_CUDA=off, no driver, or no context yet)
// classification is a nil check or an atomic load.

// DeviceConfig is how a job's communicators treat CUDA memory.
type DeviceConfig struct {
	// Runtime is the process's CUDA runtime; nil means every buffer is
	// host memory (GOCOLL_CUDA=off, or no driver).
	Runtime *gpu.Runtime
	// Options tune the device executor; Options.Segment must be the same
	// on every rank.
	Options device.Options
	// NoIPC stages every device transfer through host memory, also
	// between processes of one node (GOCOLL_CUDA_IPC=0).
	NoIPC bool
}

// LoadDevice sets cfg.Device from GOCOLL_CUDA and GOCOLL_CUDA_IPC (s.CUDA,
// s.CUDANoIPC): the driver is loaded (never initialised, in auto mode) if
// the machine has one. With GOCOLL_CUDA=on it fails, naming what is
// missing, when there is no driver or no device.
func (cfg *Config) LoadDevice(s envvar.Settings) error {
	mode := map[envvar.CUDAMode]gpu.Mode{envvar.CUDAAuto: gpu.Auto, envvar.CUDAOff: gpu.Off, envvar.CUDAOn: gpu.On}[s.CUDA]
	rt, err := gpu.Open(mode)
	if err != nil {
		return err
	}
	cfg.Device.Runtime, cfg.Device.NoIPC = rt, s.CUDANoIPC
	return nil
}

// gpuOp is the predefined op and datatype of a reducing call, from which
// the device executor picks a GPU kernel.
type gpuOp struct {
	op  ops.Op
	typ ops.Type
}

func gpuOpOf(a Args) gpuOp { return gpuOp{a.Op.Builtin, a.Type} }

// deviceState is a communicator's CUDA state.
type deviceState struct {
	rt   *gpu.Runtime // overrides Config.Device.Runtime; set by tests only (export_test.go)
	exec *device.Executor
}

// cuda returns the communicator's CUDA runtime, or nil.
func (c *Comm) cuda() *gpu.Runtime {
	if c.device.rt != nil {
		return c.device.rt
	}
	return c.cfg.Device.Runtime
}

// Memory says where the memory at p lives, as the communicator's
// collectives see it: host memory without CUDA.
func (c *Comm) Memory(p uintptr) gpu.Memory { return c.cuda().Classify(p) }

// placed is where a call's buffers live.
type placed struct {
	in, out gpu.Memory
}

// classify says where in and out live; device reports whether the call
// must run on the device executor.
func (c *Comm) classify(in, out []byte) (pl placed, device bool) {
	rt := c.cuda()
	if rt == nil {
		return pl, false
	}
	if len(out) > 0 {
		pl.out = rt.Classify(addrOf(out))
	}
	if len(in) > 0 {
		pl.in = rt.Classify(addrOf(in))
	}
	return pl, pl.in.OnDevice() || pl.out.OnDevice()
}

// memoryNote is the end of GOCOLL_DEBUG's line for a call.
func memoryNote(onDevice bool) string {
	if onDevice {
		return " memory=device"
	}
	return ""
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// runDevice runs schedule s on the device executor; c.mu is held and
// c.seq advanced for the call.
func (c *Comm) runDevice(call, alg string, s *schedule.Schedule, pl placed, in, out []byte, size int, kernel ops.Kernel, g []gpuOp) error {
	x, err := c.deviceExecutor(call)
	if err != nil {
		return err
	}
	dc := c.deviceCall(s, pl, in, out, size, kernel, g)
	if err := x.Run(&dc); err != nil {
		return deviceError(c, call, alg, err)
	}
	return nil
}

// deviceCall describes a call of schedule s to the device executor, with
// the GPU kernel of its op and type where there is one; c.seq is already
// advanced (and the executor made: its set-up advances it too).
func (c *Comm) deviceCall(s *schedule.Schedule, pl placed, in, out []byte, size int, kernel ops.Kernel, g []gpuOp) device.Call {
	dc := device.Call{
		Sched: s, ElemSize: size, Reduce: host.Kernel(kernel),
		In:  device.Buffer{Ptr: addrOf(in), Len: len(in), Mem: pl.in},
		Out: device.Buffer{Ptr: addrOf(out), Len: len(out), Mem: pl.out},
		T:   c.t, Ranks: c.ranks, Tag: transport.Tag{Context: c.ctx, Seq: c.seq},
	}
	if kernel != nil && len(g) > 0 {
		if dc.Kernel = gpu.Kernel(g[0].op, g[0].typ); dc.Kernel != "" {
			dc.Elem = gpu.ElemOf(g[0].typ)
		}
	}
	return dc
}

// deviceError wraps a failure of the device executor running alg.
func deviceError(c *Comm, call, alg string, err error) error {
	return c.runError(call, alg+" on device memory", err)
}

// deviceExecutor returns the communicator's device executor, made at its
// first device call together with the exchange that tells each rank how
// it reaches the others' GPU memory (CUDA IPC on one node). Collective:
// every rank passes device memory to the same call.
func (c *Comm) deviceExecutor(call string) (*device.Executor, error) {
	if c.device.exec != nil {
		return c.device.exec, nil
	}
	rt := c.cuda()
	p := c.Size()
	buf := make([]byte, device.RecordLen*p)
	copy(buf[c.rank*device.RecordLen:], device.Record(rt, !c.cfg.Device.NoIPC))
	bruck, _ := algorithms.Lookup(algorithms.Allgather, "bruck")
	params := algorithms.Params{P: p, Rank: c.rank, Counts: c.uniform(device.RecordLen), Commutative: true, InPlace: true}
	c.seq++
	c.call = hostCall(c, bruck.Build(params), buf[c.rank*device.RecordLen:(c.rank+1)*device.RecordLen], buf, 1, nil)
	if err := c.exec.Run(&c.call); err != nil {
		return nil, c.runError(call, "bruck (CUDA set-up)", err)
	}
	records := make([][]byte, p)
	for q := range records {
		records[q] = buf[q*device.RecordLen : (q+1)*device.RecordLen]
	}
	peers, err := device.Peers(records, c.rank)
	if err != nil {
		return nil, &mpierr.Error{Call: call, Class: mpierr.Other, Msg: err.Error()}
	}
	c.seq++ // the call's own messages
	c.device.exec = device.New(rt, c.cfg.Device.Options, peers)
	if c.cfg.Debug != nil {
		fmt.Fprintf(c.cfg.Debug, "gocoll: rank %d: %s: device memory: peers %v\n", c.rank, c.name, peers)
	}
	return c.device.exec, nil
}

// closeDevice frees the communicator's device executor.
func (c *Comm) closeDevice() {
	if c.device.exec != nil {
		if err := c.device.exec.Close(); err != nil && c.cfg.Debug != nil {
			fmt.Fprintf(c.cfg.Debug, "gocoll: rank %d: %s: freeing CUDA resources: %v\n", c.rank, c.name, err)
		}
		c.device.exec = nil
	}
}

// DeviceStats returns the counters of the communicator's device
// executor (zero before its first device call).
func (c *Comm) DeviceStats() device.Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.device.exec == nil {
		return device.Stats{}
	}
	return c.device.exec.Stats()
}
