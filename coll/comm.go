// Package coll is gocoll's dispatch layer. A collective call is checked
// once (validate.go), then decided once (route.go): where its buffers live,
// the GOCOLL_CHECK agreement, the tuner's algorithm, and the route that
// runs it: a schedule on the host executor (route_host.go), the
// shared-memory engine (route_shm.go), the device executor on CUDA memory
// (route_device.go) or the shared-memory form of a hierarchical algorithm
// (route_hierarchical.go). Every route starts a call and returns its
// stepper; a blocking call is start then finish (call.go), a request is
// started and moved on by Test, Wait, other calls or the progress goroutine
// (request.go, progress.go). The C ABI (capi), the preload and the Go API
// (mpi) are thin layers over it.
package coll

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/intranode"
	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/transport"
	"github.com/gocoll/gocoll/tuner"
)

// Config is what every communicator of a job shares.
type Config struct {
	Tuner *tuner.Tuner
	// Debug, when set, receives one line per call (GOCOLL_DEBUG=info).
	Debug io.Writer
	// JobID names shared segments; Timeout bounds waits on them.
	JobID   string
	Timeout time.Duration
	// Check (GOCOLL_CHECK=1) makes every collective first verify that all
	// ranks called the same one with consistent arguments.
	Check bool
	// SharedSlot is the bytes per rank and step of shared segments
	// (GOCOLL_SHM_SLOT; 0: intranode's default).
	SharedSlot int
	// SharedNoCMA (GOCOLL_SHM_CMA=0): the shm allgather copies through
	// the segment at every size, never with cross-memory attach.
	SharedNoCMA bool
	// Fit (GOCOLL_FIT): the model's machine is fitted in the job, at the
	// first call the model decides across nodes (fit.go); FitSave
	// (GOCOLL_FIT_SAVE) is where rank 0 of the fitting communicator
	// writes it.
	Fit     bool
	FitSave string
	// Device is how CUDA device memory is handled (GOCOLL_CUDA).
	Device DeviceConfig
	// Reproducible (GOCOLL_REPRODUCIBLE=1): reductions whose result
	// depends on the order of the terms return the canonical association
	// (algorithms/canonical.go), bit for bit (reproducible.go).
	Reproducible bool
	// ProgressThread (GOCOLL_PROGRESS_THREAD=1): a goroutine moves
	// requests on (request.go).
	ProgressThread bool
	// Report (GOCOLL_REPORT=1): MPI_Finalize prints the path counters
	// (package counters) on stderr.
	Report bool

	poolOnce sync.Once
	pool     *contextPool
	fit      jobFit // the machine fitted in the job, as this process knows it
}

// Comm is a communicator: an ordered group of the transport's ranks with a
// context of its own, so that its messages never match another
// communicator's.
type Comm struct {
	t     transport.Transport
	ranks []int // transport rank of each communicator rank
	rank  int
	ctx   uint32
	name  string
	cfg   *Config
	nodes *algorithms.NodeMap // which ranks share a node; nil: unknown

	mu      sync.Mutex // one collective at a time
	closed  bool
	seq     uint32
	cache   scheduleCache
	barrier []byte // Barrier's one byte per rank
	shared  *intranode.Group
	// hier: the node and slice communicators of hierarchical calls in
	// the shm form (hierarchy.go), made at the first such call
	// (hierTried), nil where they cannot serve.
	hier      *hierarchy
	hierTried bool
	device    deviceState // CUDA: the device executor, made at the first device call
	// The in-job fit (fit.go): the tuner of the machine c fitted or
	// agreed on (nil: cfg.Tuner's), and whether it did (or tried).
	fitTuner *tuner.Tuner
	fitDone  bool
	// steps is what the routes keep between calls: one call of a
	// communicator runs at a time (route.go).
	steps steps
	// GOCOLL_CHECK: the call's signature, until run checks it (a value,
	// not a pointer: taking its address would allocate on every call).
	pending    signature
	hasPending bool

	// Requests started and not yet complete, in call order (request.go);
	// qmu guards queue, inFlight counts it for a lock-free look.
	qmu      sync.Mutex
	queue    []*Request
	inFlight atomic.Int32
	freed    atomic.Bool // closed, for Start, which must not wait for mu
	loop     *progressLoop
}

// NewComm returns the communicator of the given transport ranks (in
// communicator rank order) with context ctx; the transport's own rank must
// be among them. Every member must create it with the same ranks and ctx.
func NewComm(t transport.Transport, ranks []int, ctx uint32, name string, cfg *Config) (*Comm, error) {
	c := &Comm{t: t, ranks: ranks, rank: -1, ctx: ctx, name: name, cfg: cfg, loop: processLoop}
	for i, r := range ranks {
		if r == t.Rank() {
			c.rank = i
		}
	}
	if c.rank < 0 {
		return nil, fmt.Errorf("coll: transport rank %d is not a member of %s", t.Rank(), name)
	}
	return c, nil
}

// Rank returns this process's rank in the communicator.
func (c *Comm) Rank() int { return c.rank }

// Size returns the number of ranks in the communicator.
func (c *Comm) Size() int { return len(c.ranks) }

// Name returns the communicator's name, used in messages.
func (c *Comm) Name() string { return c.name }

// Context returns the communicator's context id.
func (c *Comm) Context() uint32 { return c.ctx }

// Transport returns the transport the communicator runs on.
func (c *Comm) Transport() transport.Transport { return c.t }

// TransportRank returns the transport rank of communicator rank r.
func (c *Comm) TransportRank(r int) int { return c.ranks[r] }

// Config returns the configuration the communicator was created with.
func (c *Comm) Config() *Config { return c.cfg }

// Close marks the communicator freed: later calls fail with MPI_ERR_COMM.
// A device group's ranks free their regions at once: Close is for
// MPI_Finalize, after the job's last barrier (Free meets first).
// It unmaps its shared segment (once a hierarchical call running on a
// goroutine of its own is done with it), but does not close the
// transport, which other communicators share.
func (c *Comm) Close() { c.close(false) }

// close is Close; with meet, the device group's ranks meet before
// freeing their regions (Free's collective).
func (c *Comm) close(meet bool) {
	c.mu.Lock()
	c.steps.piece.settle()
	c.closed = true
	c.freed.Store(true)
	c.closeDevice(meet)
	if c.shared != nil {
		c.shared.Close()
		c.shared = nil
	}
	if c.hier != nil {
		c.hier.free()
		c.hier = nil
	}
	c.mu.Unlock()
}

// elemSize is the size in bytes of one element of the call.
func (a Args) elemSize() int { return a.Type.Size() * max(a.Mult, 1) }

// Op is a reduction operation: a predefined one, or a user function.
type Op struct {
	Builtin ops.Op // OpNull for a user-defined op
	// User returns the kernel of a user-defined op for datatype t; it is
	// called once per collective call.
	User        func(t ops.Type) ops.Kernel
	Commutative bool
}

// kernel returns the reduction kernel of op on t.
func (op Op) kernel(call string, t ops.Type) (ops.Kernel, error) {
	if op.Builtin == ops.OpNull {
		if op.User == nil {
			return nil, argError(call, mpierr.Op, "invalid op (MPI_OP_NULL)")
		}
		return op.User(t), nil
	}
	k, err := ops.Lookup(op.Builtin, t)
	if err != nil {
		return nil, opError(call, err)
	}
	return k, nil
}

// commutative reports whether the op is commutative.
func (op Op) commutative() bool { return op.Builtin != ops.OpNull || op.Commutative }

// Args are the arguments of one collective call, in bytes and elements.
type Args struct {
	Send, Recv []byte // host memory; Send is ignored in place
	// SendDevice and RecvDevice are Send and Recv where they are CUDA
	// memory: by address, as the caller classified them (Comm.Memory),
	// never as Go bytes. Set a buffer in one form or the other. (Pointers:
	// every call copies its Args, and most calls have none.)
	SendDevice, RecvDevice *gpu.Buffer
	InPlace                bool // MPI_IN_PLACE as the send buffer

	// Count is, for Allreduce, the number of elements; for
	// ReduceScatterBlock the elements each rank receives; for Allgather
	// the elements each rank contributes.
	Count int
	// Counts are the recvcounts of ReduceScatter and Allgatherv.
	Counts []int
	// Displs are Allgatherv's displs: where each rank's block starts in
	// Recv, in elements. nil: packed in rank order.
	Displs []int

	Type ops.Type
	// Mult is the number of Type elements in one element of the call (a
	// contiguous derived datatype of the C ABI); 0 means 1. Predefined ops
	// work on the Type elements; user ops get whole elements.
	Mult int
	Op   Op
	Root int // rooted collectives

	// Algorithm forces an algorithm for this call ("" or "auto": the
	// environment's choice, else the tuner's).
	Algorithm string
	// Reproducible asks for the canonical association for this call, as
	// GOCOLL_REPRODUCIBLE=1 does for every call (reproducible.go).
	Reproducible bool

	// own marks gocoll's own calls (setting up communicators and shared
	// segments): the path counters (GOCOLL_REPORT) count the program's
	// calls only.
	own bool
}
