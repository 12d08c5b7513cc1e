// Package algorithms holds gocoll's collective algorithms, one file each,
// and the registry that names them.
//
// An algorithm is a pure function from the shape of a call (collective,
// number of ranks, this rank, counts, op commutativity) to the schedule this
// rank performs. It does no I/O and knows nothing of bytes, memory spaces or
// transports: package executor gives schedules their meaning.
package algorithms

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gocoll/gocoll/schedule"
)

// Collective names one of the collectives gocoll implements.
type Collective uint8

const (
	Allreduce Collective = iota
	ReduceScatter
	ReduceScatterBlock
	Allgather
	// The rooted collectives the C ABI also needs. They have one
	// algorithm each and no tuning.
	Bcast
	Reduce
	Gather
)

// Collectives lists the four collectives gocoll is about, each with
// several algorithms, a tuner rule set and a GOCOLL_*_ALGORITHM variable.
var Collectives = []Collective{Allreduce, ReduceScatter, ReduceScatterBlock, Allgather}

// Rooted lists the rooted collectives.
var Rooted = []Collective{Bcast, Reduce, Gather}

// String returns the MPI name of the collective.
func (c Collective) String() string {
	switch c {
	case Allreduce:
		return "MPI_Allreduce"
	case ReduceScatter:
		return "MPI_Reduce_scatter"
	case ReduceScatterBlock:
		return "MPI_Reduce_scatter_block"
	case Allgather:
		return "MPI_Allgather"
	case Bcast:
		return "MPI_Bcast"
	case Reduce:
		return "MPI_Reduce"
	case Gather:
		return "MPI_Gather"
	}
	return fmt.Sprintf("collective(%d)", uint8(c))
}

// EnvName returns the collective's part of environment variable names, as in
// GOCOLL_ALLREDUCE_ALGORITHM.
func (c Collective) EnvName() string {
	return strings.ToUpper(strings.TrimPrefix(c.String(), "MPI_"))
}

// Reduces reports whether the collective combines data with an op.
func (c Collective) Reduces() bool { return c != Allgather && c != Bcast && c != Gather }

// Params is the shape of one call, as seen by one rank.
type Params struct {
	P    int // ranks in the communicator
	Rank int // this rank, 0 <= Rank < P
	Root int // the root of a rooted collective

	// Count is the number of elements of an Allreduce, Bcast or Reduce.
	Count int
	// Counts holds one block size per rank: the recvcounts of
	// MPI_Reduce_scatter (all equal for MPI_Reduce_scatter_block), the
	// counts each rank contributes to MPI_Allgather(v) or MPI_Gather. Nil
	// for the others.
	Counts []int

	// Commutative is false for user-defined ops that are not; algorithms
	// that do not preserve rank order are then never used.
	Commutative bool
	// InPlace is the MPI_IN_PLACE form. Schedules are correct either way;
	// an algorithm may use the flag to save a copy.
	InPlace bool
	// SharedMemory says every rank of the communicator maps one shared
	// segment (they share a host), which the shm algorithms need.
	SharedMemory bool
	// DeviceMemory says the call's buffers are CUDA device memory: the
	// device executor runs the schedule, and the shm algorithms, which
	// copy with the CPU, cannot run it.
	DeviceMemory bool
	// DeviceGroup says the call can run on the communicator's device
	// group (executor/device.Group): CUDA memory of one context on one
	// node, every rank mapping the others', and for a reduction a GPU
	// kernel of its op and type. The Device algorithms need it.
	DeviceGroup bool
	// Reproducible asks for the canonical association (canonical.go) at
	// every element: GOCOLL_REPRODUCIBLE=1 and an op whose result depends
	// on the order of its terms. Algorithms that do not compute it fail
	// Check.
	Reproducible bool
	// Nodes is the communicator's node map (which ranks share a node);
	// nil when unknown. The hierarchical algorithms need it.
	Nodes *NodeMap
}

// Blocks returns the per-rank blocks of a ReduceScatter or Allgather call.
func (p Params) Blocks() schedule.Blocks { return schedule.BlocksOf(p.Counts) }

// Total returns the number of elements of the full vector: Count for
// Allreduce, the sum of Counts otherwise.
func (p Params) Total() int {
	if p.Counts == nil {
		return p.Count
	}
	n := 0
	for _, c := range p.Counts {
		n += c
	}
	return n
}

// Algorithm is one entry of the registry: a name, the restrictions under
// which it is correct, and the function that builds its schedules.
type Algorithm struct {
	Name       string
	Collective Collective
	// Commutative: the algorithm combines contributions out of rank order,
	// so it needs a commutative op.
	Commutative bool
	// Canonical, when set, reports whether every element of call p's
	// result is the canonical association T(0, p) (canonical.go) for a
	// commutative op whose result depends on order, so that the algorithm
	// may run in reproducible mode. The check executor proves it
	// (check.Canonical). Nil: never, beyond what Reproducible grants every
	// algorithm.
	Canonical func(p Params) bool
	// Summary is one line for docs/tuning.md's Algorithms table and
	// `gocollrun --info`.
	Summary string
	// Cost is the alpha-beta-gamma cost for p ranks and n elements (of
	// size 1), p a power of two.
	Cost string
	// Build returns the schedule of rank p.Rank. It must not be called
	// when Check(p) fails. Nil unless IsSchedule.
	Build func(p Params) *schedule.Schedule
	// Direct marks an algorithm that is not a schedule: package intranode
	// runs it on the communicator's shared segment. It needs
	// Params.SharedMemory.
	Direct bool
	// Device marks an algorithm that is not a schedule and runs on CUDA
	// memory: the device group runs it on the ranks' mapped memory. It
	// needs Params.DeviceGroup.
	Device bool
	// HostStaged marks an algorithm that is not a schedule and runs a
	// call on CUDA memory through host memory: its input copied down,
	// the shm engine, its result copied up. It needs Params.DeviceMemory
	// and Params.SharedMemory.
	HostStaged bool
	// Restrict, when set, returns an error naming a restriction that
	// depends on more than the fields above (the node map, say), or nil.
	Restrict func(p Params) error
	// SizeDependent marks an algorithm whose schedule's shape (its
	// rounds and peers) depends on the counts, not only on the ranks: it
	// picks its phases' algorithms by size (the hierarchical ones). A
	// schedule built at one count then says nothing of another's; AtSize
	// says which shape a count gets.
	SizeDependent bool
	// AtSize, set for a SizeDependent algorithm, returns the algorithm
	// that builds, at any count, the schedule shape this one builds for
	// call p: this one with its phases' algorithms fixed to p's. It is not
	// SizeDependent, not registered (ID -1), and the same pointer for
	// every call whose schedules have the same shape, so that the model
	// prepares one plan per shape and scales it to every size that has it,
	// as it does for any other algorithm.
	AtSize func(p Params) *Algorithm

	id int // 1 + its place in registration order; 0: not registered
}

// ID returns a small number, 0 <= ID < NumIDs(), unique to each registered
// algorithm (the variants of ReduceScatterBlock have their own), so that
// per-algorithm tables are arrays instead of maps; -1 for an algorithm
// that was never registered.
func (a *Algorithm) ID() int { return a.id - 1 }

// NumIDs returns the number of registered algorithms, one more than the
// largest ID.
func NumIDs() int { return numIDs }

// IsSchedule reports whether the algorithm builds schedules, which every
// executor runs: neither a Direct (shm), a Device nor a HostStaged
// algorithm.
func (a *Algorithm) IsSchedule() bool { return !a.Direct && !a.Device && !a.HostStaged }

// OnHost reports whether the algorithm can run a call on host memory:
// neither a Device nor a HostStaged one.
func (a *Algorithm) OnHost() bool { return !a.Device && !a.HostStaged }

// Placed reports whether the call's memory and placement let the
// algorithm run (host or CUDA memory, a shared segment, a device group):
// the first of Check's restrictions, without building an error, for the
// tuner, which asks every rule in range on every call, and whose device
// rules come first.
func (a *Algorithm) Placed(p Params) bool {
	switch {
	case a.Direct:
		return p.SharedMemory && !p.DeviceMemory
	case a.HostStaged:
		return p.DeviceMemory && p.SharedMemory
	case a.Device:
		return p.DeviceGroup
	}
	return true
}

// Check returns an error that names the restriction p violates, or nil.
func (a *Algorithm) Check(p Params) error {
	if a.Commutative && !p.Commutative {
		return fmt.Errorf("%s algorithm %q needs a commutative op", a.Collective, a.Name)
	}
	if a.Direct && !p.SharedMemory {
		return fmt.Errorf("%s algorithm %q needs every rank on one host (a shared-memory segment)", a.Collective, a.Name)
	}
	if a.Direct && p.DeviceMemory {
		return fmt.Errorf("%s algorithm %q works on host memory only, and the buffers are CUDA device memory", a.Collective, a.Name)
	}
	if a.HostStaged && !(p.DeviceMemory && p.SharedMemory) {
		return fmt.Errorf("%s algorithm %q needs CUDA device memory and every rank on one host (a shared segment)", a.Collective, a.Name)
	}
	if a.Device && !p.DeviceGroup {
		return fmt.Errorf("%s algorithm %q needs CUDA device memory on one node where every rank maps the others' (a device group), and for a reduction a GPU kernel of its op and type", a.Collective, a.Name)
	}
	if p.Reproducible && !a.Reproducible(p) {
		return fmt.Errorf("%s algorithm %q does not combine %d ranks in the canonical order that GOCOLL_REPRODUCIBLE=1 asks for", a.Collective, a.Name, p.P)
	}
	if a.Restrict != nil {
		if err := a.Restrict(p); err != nil {
			return fmt.Errorf("%s algorithm %q %v", a.Collective, a.Name, err)
		}
	}
	return nil
}

var (
	registry = map[Collective]map[string]*Algorithm{}
	numIDs   int
)

// sorted holds each collective's algorithms sorted by name, for All,
// which a call runs through when there is only one: built as they
// register (at init), so that All allocates nothing.
var sorted = map[Collective][]*Algorithm{}

// register adds algorithms at init time.
func register(algs ...*Algorithm) {
	for _, a := range algs {
		m := registry[a.Collective]
		if m == nil {
			m = map[string]*Algorithm{}
			registry[a.Collective] = m
		}
		if m[a.Name] != nil {
			panic("algorithms: duplicate " + a.Name)
		}
		numIDs++
		a.id = numIDs
		m[a.Name] = a
		all := append(sorted[a.Collective], a)
		sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
		sorted[a.Collective] = all
	}
}

// Lookup returns the named algorithm of collective c. An unknown name is an
// error that lists the valid ones.
func Lookup(c Collective, name string) (*Algorithm, error) {
	if a := registry[c][name]; a != nil {
		return a, nil
	}
	return nil, fmt.Errorf("%s has no algorithm %q (valid: %s)", c, name, strings.Join(Names(c), ", "))
}

// Names returns the names of collective c's algorithms, sorted.
func Names(c Collective) []string {
	var names []string
	for n := range registry[c] {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// HostNames is Names less the algorithms that run on CUDA memory only
// (OnHost): what a host benchmark or demo times.
func HostNames(c Collective) []string {
	var names []string
	for _, a := range All(c) {
		if a.OnHost() {
			names = append(names, a.Name)
		}
	}
	return names
}

// All returns every algorithm of collective c, sorted by name. The slice
// is shared (steady-state calls allocate nothing): do not modify it.
func All(c Collective) []*Algorithm {
	return sorted[c]
}
