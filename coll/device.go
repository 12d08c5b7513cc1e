package coll

import (
	"fmt"

	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/executor/device"
	"github.com/gocoll/gocoll/gpu"
)

// CUDA device memory is decided at the entry: the caller classifies its
// buffers (Memory, or the C entries' own query) and passes device memory
// by address (Args.SendDevice, RecvDevice); such a call takes the device
// route (route_device.go). Without CUDA (GOCOLL_CUDA=off, no driver, or no
// context yet) classification is a nil check or an atomic load.

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
	// Group is how a communicator's device group is made
	// (GOCOLL_CUDA_SLOT, GOCOLL_CUDA_SYNC); Exchange, Barrier and Log are
	// the communicator's.
	Group device.GroupOptions
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
	cfg.Device.Group.Slot = s.CUDASlot
	if s.CUDAHostSync {
		cfg.Device.Group.Sync = device.SyncHost
	}
	return nil
}

// deviceState is a communicator's CUDA state.
type deviceState struct {
	rt   *gpu.Runtime // overrides Config.Device.Runtime; set by tests only (export_test.go)
	exec *device.Executor
	// group runs the device algorithms (oneshot, twoshot), made at the
	// first device call where every rank maps the others' memory
	// (groupTried); nil where it cannot be made.
	group      *device.Group
	groupTried bool
}

// cuda returns the communicator's CUDA runtime, or nil.
func (c *Comm) cuda() *gpu.Runtime {
	if c.device.rt != nil {
		return c.device.rt
	}
	return c.cfg.Device.Runtime
}

// CUDA returns the runtime the communicator classifies buffers with (nil
// without CUDA): the entries that move device bytes themselves (capi's
// point-to-point calls) use the same one.
func (c *Comm) CUDA() *gpu.Runtime { return c.cuda() }

// Memory says where the memory at p lives, as the communicator's
// collectives see it: host memory without CUDA. The entries (capi, the
// preload, the Go API) ask it once per buffer and call, and pass device
// memory as Args.SendDevice and RecvDevice.
func (c *Comm) Memory(p uintptr) gpu.Memory { return c.cuda().Classify(p) }

// closeDevice frees the communicator's device group and executor; with
// meet, the group's ranks meet first (see Group.Close).
func (c *Comm) closeDevice(meet bool) {
	if g := c.device.group; g != nil {
		var barrier func() error
		if meet {
			barrier = c.hostBarrier(c.name)
		}
		if err := g.Close(barrier); err != nil && c.cfg.Debug != nil {
			fmt.Fprintf(c.cfg.Debug, "gocoll: rank %d: %s: freeing the device group: %v\n", c.rank, c.name, err)
		}
		c.device.group = nil
	}
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
