package mpi

import (
	"errors"
	"fmt"
	"github.com/gocoll/gocoll/envvar"
	"os"
	"sync"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/coll/counters"
	"github.com/gocoll/gocoll/job"
	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/transport/inproc"
)

// Comm is a communicator: the ranks that take part in a collective.
type Comm struct {
	c *coll.Comm
}

// Rank returns this rank's number in the communicator, 0 <= Rank < Size.
func (c *Comm) Rank() int { return c.c.Rank() }

// Size returns the number of ranks in the communicator.
func (c *Comm) Size() int { return c.c.Size() }

// Error is the error of a failed call: errors.As gives the MPI call, the
// error class and a message that names the argument.
type Error = mpierr.Error

// ErrorClass is an MPI error class.
type ErrorClass = mpierr.Class

// world is the state Init creates and Finalize tears down.
var world struct {
	sync.Mutex
	comm      *Comm
	job       *job.Job
	finalized bool
	report    bool // GOCOLL_REPORT=1
}

// Init starts gocoll and returns the world communicator: the ranks started
// by gocollrun, MPICH's mpiexec, Slurm's srun or Open MPI's mpirun
// (through PMI-1, PMI-2 or PMIx: package job), connected by shared memory
// on one host and TCP between hosts. A program started without a launcher
// runs as a single rank.
func Init() (*Comm, error) {
	world.Lock()
	defer world.Unlock()
	if world.comm != nil || world.finalized {
		return nil, errors.New("mpi.Init: already called")
	}
	// Parsed once, now (a program may set GOCOLL_ variables before
	// Init), for the job and every communicator.
	set, err := settings()
	if err != nil {
		return nil, fmt.Errorf("mpi.Init: %v", err)
	}
	cfg, err := coll.NewConfig(set)
	if err != nil {
		return nil, fmt.Errorf("mpi.Init: %v", err)
	}
	j, err := job.StartWith(set)
	if err != nil {
		return nil, fmt.Errorf("mpi.Init: %v", err)
	}
	ranks := make([]int, j.Size)
	for i := range ranks {
		ranks[i] = i
	}
	cfg.JobID, cfg.Timeout = j.JobID, j.Timeout
	c, err := coll.NewComm(j.T, ranks, worldContext, "MPI_COMM_WORLD", cfg)
	if err != nil {
		j.Close()
		return nil, err
	}
	if err := c.SetNodes(algorithms.NewNodeMap(j.Hosts)); err != nil {
		j.Close()
		return nil, err
	}
	if j.OneHost() && j.Size > 1 {
		c.AttachShared() // if it fails everywhere, the transport algorithms run
	}
	world.comm, world.job, world.report = &Comm{c}, j, cfg.Report
	return world.comm, nil
}

// settings are the GOCOLL_ variables as they are now, which Init and
// RunLocal start from; they cap the kernels' instruction set
// (GOCOLL_OPS_ISA) for the process.
func settings() (envvar.Settings, error) {
	set, err := envvar.Parse(os.Getenv)
	if err != nil {
		return set, err
	}
	return set, ops.CapISA(set.OpsISA)
}

// worldContext is the context id of every job's world communicator.
const worldContext = 1

// Finalize shuts gocoll down. The world communicator is unusable after.
// With GOCOLL_REPORT=1 it first prints Counters on stderr, one line per
// collective (`gocoll: rank 0: report: MPI_Allreduce go=5 ring=5`).
func Finalize() error {
	world.Lock()
	defer world.Unlock()
	if world.comm == nil {
		return errors.New("mpi.Finalize: Init was not called")
	}
	// No rank may close its transports while a peer still needs them
	// (gocoll's own barrier: Counters count the program's calls).
	err := world.comm.c.Sync()
	if world.report {
		counters.Report(os.Stderr, world.job.Rank)
	}
	world.finalized = true
	world.comm.c.Close()
	err = errors.Join(err, world.job.Close())
	world.comm, world.job = nil, nil
	return err
}

// RunLocal runs f on n ranks, each a goroutine of this process, connected
// by an in-process transport, and returns when all have returned. The
// error joins those of the ranks that failed, each prefixed with its rank.
// The ranks read the same GOCOLL_* variables as Init.
func RunLocal(n int, f func(c *Comm) error) error {
	if n < 1 {
		return fmt.Errorf("mpi.RunLocal: %d ranks", n)
	}
	return runLocal(make([]string, n), f)
}

// runLocal is RunLocal with rank r on host hosts[r]: the ranks' node map
// is made from these names, so that tests can place in-process ranks on
// several nodes. Ranks on one node get a shared segment, as under Init.
func runLocal(hosts []string, f func(c *Comm) error) error {
	n := len(hosts)
	nodes := algorithms.NewNodeMap(hosts)
	set, err := settings()
	var cfg *coll.Config
	if err == nil {
		cfg, err = coll.NewConfig(set)
	}
	if err != nil {
		return fmt.Errorf("mpi.RunLocal: %v", err)
	}
	cfg.JobID = fmt.Sprintf("local%d", os.Getpid())
	eps := inproc.New(n)
	ranks := make([]int, n)
	for i := range ranks {
		ranks[i] = i
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if v := recover(); v != nil {
					errs[r] = fmt.Errorf("rank %d: panic: %v", r, v)
					eps[r].Close() // so that the others fail instead of waiting
				}
			}()
			c, err := coll.NewComm(eps[r], ranks, worldContext, "MPI_COMM_WORLD", cfg)
			if err == nil {
				err = c.SetNodes(nodes)
			}
			if err == nil && n > 1 && nodes.OneNode() {
				c.AttachShared() // the ranks share this process's memory
			}
			if err == nil {
				err = f(&Comm{c})
			}
			if err != nil {
				errs[r] = fmt.Errorf("rank %d: %w", r, err)
				eps[r].Close()
			}
		}()
	}
	wg.Wait()
	for _, ep := range eps {
		ep.Close()
	}
	return errors.Join(errs...)
}

// Barrier returns once every rank of c has entered it.
func (c *Comm) Barrier() error { return c.c.Barrier() }

// Dup returns a new communicator with the same ranks, whose collectives
// never mix with c's. Collective over c.
func (c *Comm) Dup() (*Comm, error) {
	d, err := c.c.Dup(c.c.Name() + "/dup")
	if err != nil {
		return nil, err
	}
	return &Comm{d}, nil
}

// Split partitions c by color (ranks with the same color end up in the same
// new communicator), ordered by key then by rank in c, as MPI_Comm_split
// does. A negative color joins no communicator: Split returns nil.
// Collective over c.
func (c *Comm) Split(color, key int) (*Comm, error) {
	if color < 0 {
		color = coll.Undefined
	}
	s, err := c.c.Split(color, key, c.c.Name()+"/split")
	if err != nil || s == nil {
		return nil, err
	}
	return &Comm{s}, nil
}

// SplitShared returns the communicator of the ranks of c that share this
// rank's node (its shared-memory domain), ordered by key then by rank in
// c, as MPI_Comm_split_type with MPI_COMM_TYPE_SHARED does. Its
// collectives can use shared memory even when c spans several nodes.
// Collective over c.
func (c *Comm) SplitShared(key int) (*Comm, error) {
	s, err := c.c.SplitShared(key, c.c.Name()+"/shared")
	if err != nil {
		return nil, err
	}
	return &Comm{s}, nil
}

// Free releases a communicator made by Dup, Split or SplitShared.
func (c *Comm) Free() { c.c.Free() }
