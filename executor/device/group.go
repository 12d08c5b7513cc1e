package device

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"unsafe"

	"github.com/gocoll/gocoll/gpu"
)

// A Group runs collectives straight on the device memory of a
// communicator's ranks on one node, where every rank reaches every
// other's (CUDA IPC between processes, or one process): the one-shot and
// two-shot collectives of peer.go, which no schedule can express.
//
// Each rank allocates one region at the group's creation and the ranks
// map each other's regions once, until Close:
//
//	0      its sequence word: the number of synchronisations this rank's
//	       stream has reached (every rank makes the same ones, in order)
//	256    pointer tables the kernels read: the one-shot sources of
//	       either slot (fixed), and a call's sources and destinations
//	       (written by the call's own stream, StreamBatchMemOp)
//	slots  two one-shot slots of Slot bytes: call k copies its input into
//	       slot k%2
//
// A synchronisation is: write my sequence word, wait until every peer's
// is as far (SyncMemOps: one cuStreamBatchMemOp on the stream, no host
// wait), or wait on the host for my stream and meet in a host barrier
// (SyncHost). Why the slots are safe to rewrite: call k+2 copies into
// slot k%2 after its stream passed call k+1's synchronisation, which
// every peer's stream reached only after its call-k kernel, the last
// reader of slot k%2.
type Group struct {
	x       *Executor
	w       *workspace
	st      *state
	rank, p int
	opts    GroupOptions

	region devMem    // this rank's
	bases  []uintptr // every rank's region as this rank reaches it
	opened []bool    // bases[q] is an IPC mapping (closed by Close)
	grid   int       // blocks of a peer kernel
	seq    uint32    // synchronisations made
	calls  uint64    // one-shot calls made (their slot's parity)

	cur   *peerCall // the call started and not done
	stats GroupStats
}

// SyncMode is how a Group's ranks synchronise the steps of a call.
type SyncMode uint8

const (
	// SyncMemOps: stream memory operations on the mapped sequence words;
	// nothing waits on the host until the call's end.
	SyncMemOps SyncMode = iota
	// SyncHost: the host waits for its stream to reach the step, then
	// the ranks meet in GroupOptions.Barrier. For ranks that share a GPU
	// without MPS, if a stream that waits for another process's write
	// holds the time-sliced GPU: which is faster there is measured
	// (docs/cuda.md).
	SyncHost
)

func (m SyncMode) String() string { return [...]string{"memops", "host"}[m] }

// GroupOptions configure NewGroup. Slot and Sync must be the same on
// every rank.
type GroupOptions struct {
	// Slot is the bytes of each of a rank's two one-shot slots (default
	// DefaultSlot): the largest one-shot allreduce.
	Slot int
	Sync SyncMode
	// Exchange gathers every rank's record (all of one length) in rank
	// order, rank q's at q*len(mine): the communicator's host exchange.
	Exchange func(mine []byte) ([]byte, error)
	// Barrier is SyncHost's meeting of the ranks on the host.
	Barrier func() error
	// Log, if set, receives what the group says under GOCOLL_DEBUG=info.
	Log io.Writer
}

// DefaultSlot is GroupOptions.Slot's default.
const DefaultSlot = 1 << 20

// GroupStats counts a group's calls by how they ran.
type GroupStats struct {
	OneShot, TwoShot, Staged int // calls, by route (Staged: two-shot through the slots)
	Exchanges                int // host exchanges of buffer descriptors
	Launches                 int // kernel launches
}

// Region layout (see Group).
const (
	regionTables = 256
	regionAlign  = 4096
)

// NewGroup makes the group of the executor's communicator, whose
// buffers live in mem's context: every rank calls it, in the same call,
// with the same options. It fails on every rank (and frees what it made)
// when a rank cannot reach another's device memory, or cannot allocate or
// map a region; the communicator's calls then run as schedules.
func (x *Executor) NewGroup(mem gpu.Memory, rank int, opts GroupOptions) (*Group, error) {
	p := len(x.peers)
	if p == 0 || rank < 0 || rank >= p {
		return nil, errors.New("device group: the communicator's peers are unknown")
	}
	if p > gpu.PeerMaxSources {
		return nil, fmt.Errorf("device group: %d ranks, at most %d", p, gpu.PeerMaxSources)
	}
	for q, pr := range x.peers {
		if pr == PeerStaged {
			return nil, fmt.Errorf("device group: rank %d cannot reach rank %d's device memory (another node, or GOCOLL_CUDA_IPC=0)", rank, q)
		}
	}
	if opts.Slot <= 0 {
		opts.Slot = DefaultSlot
	}
	opts.Slot = (opts.Slot + regionAlign - 1) / regionAlign * regionAlign
	if opts.Sync == SyncHost && opts.Barrier == nil {
		return nil, errors.New("device group: SyncHost needs a host barrier")
	}
	st, leave, err := x.state(mem)
	if err != nil {
		return nil, err
	}
	defer leave()
	g := &Group{x: x, w: st.w, st: st, rank: rank, p: p, opts: opts, bases: make([]uintptr, p), opened: make([]bool, p)}
	made := g.make()
	// Every rank says whether it could (all or none keep the group),
	// whether its driver has stream memory operations, and where its
	// region is.
	rec := make([]byte, groupRecLen)
	if made == nil {
		rec[0] = 1
		g.descriptorOf(g.region.ptr, g.region.mem).encode(rec[2:])
	}
	if n, err := g.w.drv.DeviceAttribute(g.w.dev, gpu.DeviceAttrStreamMemOps); err == nil && n > 0 {
		rec[1] = 1
	}
	all, err := opts.Exchange(rec)
	if err == nil && made == nil {
		made = g.mapPeers(all)
	}
	shares := err == nil && g.sharesOneGPU(all)
	if err == nil && g.opts.Sync == SyncMemOps && opts.Barrier != nil {
		for q := range p {
			if all[q*groupRecLen+1] == 0 {
				// A driver with stream memory operations off
				// (NVreg_EnableStreamMemOPs=0 before CUDA 12): the same
				// steps, met on the host.
				g.opts.Sync = SyncHost
				if opts.Log != nil {
					fmt.Fprintf(opts.Log, "gocoll: rank %d: device group: rank %d's driver has no stream memory operations: host synchronisation\n", rank, q)
				}
				break
			}
		}
	}
	ok := make([]byte, 1)
	if made == nil {
		ok[0] = 1
	}
	oks, err2 := opts.Exchange(ok)
	if err == nil {
		err = err2
	}
	if err == nil && made == nil {
		for q, v := range oks {
			if v != 1 {
				made = fmt.Errorf("rank %d could not set its part up", q)
				break
			}
		}
	}
	if err == nil {
		err = made
	}
	if err == nil {
		err = g.writeTables()
	}
	if err != nil {
		g.free()
		return nil, fmt.Errorf("device group: %w", err)
	}
	if n, err := g.w.drv.DeviceAttribute(g.w.dev, gpu.DeviceAttrMultiprocessorCount); err == nil && n > 0 {
		g.grid = 2 * n
	} else {
		g.grid = 64
	}
	if opts.Log != nil {
		where := "their GPUs"
		if shares {
			where = "one GPU, time-sliced"
		}
		fmt.Fprintf(opts.Log, "gocoll: rank %d: device group of %d ranks on %s: %d KiB one-shot slots, %s synchronisation\n",
			rank, p, where, g.opts.Slot>>10, g.opts.Sync)
	}
	return g, nil
}

// groupRecLen is a rank's record at NewGroup: whether it made its
// region, whether its driver has stream memory operations, the region.
const groupRecLen = 2 + descLen

// sharesOneGPU reports whether every other rank is another process on
// this rank's GPU (the bus ids of the records): their contexts share it
// time-sliced, unless under MPS, which no driver call tells.
func (g *Group) sharesOneGPU(all []byte) bool {
	for q := range g.p {
		if q == g.rank {
			continue
		}
		d, err := decodeDescriptor(all[q*groupRecLen+2 : (q+1)*groupRecLen])
		if err != nil || d.kind != descIPC || d.bus != g.w.bus {
			return false
		}
	}
	return g.p > 1
}

// make allocates this rank's region and zeroes its sequence word.
func (g *Group) make() error {
	drv := g.w.drv
	n := g.slotsOff() + 2*g.opts.Slot
	ptr, err := drv.MemAlloc(n)
	if err != nil {
		return fmt.Errorf("region of %d bytes: %w", n, err)
	}
	g.region = devMem{ptr: ptr, n: n, mem: gpu.Memory{Kind: gpu.Device, Context: g.w.ctx, Device: g.w.dev, Base: ptr, Size: n}}
	if a, err := drv.PointerAttributes(ptr); err == nil {
		g.region.mem.BufferID = a.BufferID
	}
	if err := drv.MemsetD32Async(ptr, 0, regionTables/4, g.st.comp); err != nil {
		return err
	}
	return g.sync()
}

// descriptorOf describes this rank's memory at ptr (in allocation mem)
// for its peers: an IPC handle, or the address itself where every peer
// shares the process.
func (g *Group) descriptorOf(ptr uintptr, mem gpu.Memory) descriptor {
	d := descriptor{kind: descDirect, addr: uint64(ptr), len: uint64(mem.Size), rt: g.w.rt.ID()}
	for q, pr := range g.x.peers {
		if q != g.rank && pr == PeerIPC {
			d.kind = descStaged // until a handle is found
			if h, ok := g.w.handle(mem); ok {
				d.kind, d.handle, d.offset, d.bus = descIPC, h, uint64(ptr-mem.Base), g.w.bus
				d.base, d.buf = uint64(mem.Base), mem.BufferID
			}
			break
		}
	}
	return d
}

// mapPeers maps every peer's region from the exchanged records.
func (g *Group) mapPeers(all []byte) error {
	for q := range g.p {
		rec := all[q*groupRecLen : (q+1)*groupRecLen]
		if rec[0] != 1 {
			return fmt.Errorf("rank %d has no region", q)
		}
		d, err := decodeDescriptor(rec[2:])
		if err != nil {
			return err
		}
		switch {
		case q == g.rank:
			g.bases[q] = g.region.ptr
		case g.x.peers[q] == PeerDirect:
			g.bases[q] = uintptr(d.addr) // one process: one address space
		case d.kind == descIPC:
			ptr, err := g.w.drv.IpcOpenMemHandle(d.handle)
			if err != nil {
				return fmt.Errorf("mapping rank %d's region: %w", q, err)
			}
			g.bases[q], g.opened[q] = ptr, true // a region is its own allocation: offset 0
		default:
			return fmt.Errorf("rank %d's region cannot be shared (no IPC handle)", q)
		}
	}
	return nil
}

// writeTables writes the one-shot source tables: for slot k, every
// rank's slot k as this rank reaches it.
func (g *Group) writeTables() error {
	b := make([]byte, 2*8*g.p)
	for k := range 2 {
		for q := range g.p {
			binary.LittleEndian.PutUint64(b[8*(k*g.p+q):], uint64(g.bases[q]+g.slot(k)))
		}
	}
	if err := g.w.drv.MemcpyAsync(g.region.ptr+g.table(0), uintptr(unsafe.Pointer(&b[0])), len(b), g.st.comp); err != nil {
		return err
	}
	err := g.sync()
	runtime.KeepAlive(b) // until the copy is done
	return err
}

// sync waits for everything queued on the group's stream.
func (g *Group) sync() error {
	ev, err := g.st.event()
	if err != nil {
		return err
	}
	defer g.st.putEvents(ev)
	if err := g.w.drv.EventRecord(ev, g.st.comp); err != nil {
		return err
	}
	return g.st.waitEvent(g.w.drv, ev)
}

// Where things are in a region: the sequence word at 0; pointer table t
// (0 and 1: slot sources; 2: a call's sources; 3: its destinations); the
// slots.
func (g *Group) table(t int) uintptr { return uintptr(regionTables + 8*g.p*t) }
func (g *Group) slotsOff() int {
	return (regionTables + 4*8*g.p + regionAlign - 1) / regionAlign * regionAlign
}
func (g *Group) slot(k int) uintptr { return uintptr(g.slotsOff() + k*g.opts.Slot) }

// Slot is the bytes of each one-shot slot.
func (g *Group) Slot() int { return g.opts.Slot }

// Stats returns the group's counters.
func (g *Group) Stats() GroupStats { return g.stats }

// Close unmaps the peers' regions and frees this rank's: a collective,
// as freeing the communicator is. A one-shot call ends when this rank's
// kernel has read every slot, while a peer's may still be reading mine;
// so each rank waits for its stream, then meets the others (barrier, on
// the host: a dead peer ends it with the communicator's timeout, not a
// hang), and only then frees its region.
func (g *Group) Close(barrier func() error) error {
	leave, err := g.w.enter()
	if err != nil {
		return err
	}
	defer leave()
	errs := []error{g.sync()}
	if barrier != nil {
		errs = append(errs, barrier())
	}
	return errors.Join(append(errs, g.free())...)
}

func (g *Group) free() error {
	var errs []error
	for q, o := range g.opened {
		if o {
			errs = append(errs, g.w.drv.IpcCloseMemHandle(g.bases[q]))
			g.opened[q] = false
		}
	}
	if g.region.ptr != 0 {
		g.w.forgetHandle(g.region.mem)
		errs = append(errs, g.w.drv.MemFree(g.region.ptr))
		g.region = devMem{}
	}
	return errors.Join(errs...)
}
