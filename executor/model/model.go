// Package model is the executor that prices schedules instead of running
// them, on a machine of two levels: ranks of one node talk over shared
// memory (NodeAlpha, NodeBeta), ranks of different nodes over the network
// (Alpha, Beta), and the ranks of a node share its network link. A round
// costs, for each rank, the slower of its two kinds of traffic: within the
// node NodeAlpha plus NodeBeta per byte (the larger of what it sends and
// receives there), across nodes Alpha plus Beta per byte of everything its
// node sends (or receives, the larger) across nodes in that round; then
// Gamma per byte reduced and Delta per byte copied locally. A round starts
// only when this rank and every peer it talks to have finished the round
// before.
//
// Without a node map (Params.Nodes nil) every rank is its own node: one
// alpha, one beta, no shared link, which is the flat model of the
// textbooks. With Params.SharedMemory and no map, every rank is on one
// node.
//
// The model never holds p schedules: it builds one rank's schedule at a
// time and keeps a compact trace of it (peers and byte counts per round),
// and where an algorithm is rank-symmetric (the rotation of the ring, the
// exclusive-or of recursive doubling) and the nodes are all alike, it
// builds only one node's ranks, checks the symmetry on sampled other ranks,
// and prices the one node (plan.go). The shm algorithms, which are not
// schedules, are priced by formula (shm.go).
//
// The tuner compares algorithms with it, the tests check that the step and
// byte counts match the textbook formulas, and gocoll-model's regret
// command checks the tuner against it.
package model

import (
	"math"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/schedule"
)

// Machine holds the cost parameters, in seconds.
type Machine struct {
	Alpha float64 // per round with messages between nodes (latency)
	Beta  float64 // per byte a node sends or receives across nodes in a round (the larger of the two)
	Gamma float64 // per byte reduced
	Delta float64 // per byte copied locally

	// Within a node: per round with messages between ranks of one node,
	// and per byte a rank sends or receives there (the larger). Both zero:
	// the same as between nodes.
	NodeAlpha float64
	NodeBeta  float64
	// Sync is the price of one step of the shm algorithms (every rank
	// publishes a flag and waits for the others'); zero: NodeAlpha.
	Sync float64
}

// node returns the within-node alpha and beta.
func (m Machine) node() (alpha, beta float64) {
	if m.NodeAlpha == 0 && m.NodeBeta == 0 {
		return m.Alpha, m.Beta
	}
	return m.NodeAlpha, m.NodeBeta
}

// ShmForm returns the machine the shared-memory form of a hierarchical
// algorithm is priced on (coll/hierarchy.go: on host memory its
// intra-node phases run on the shm engine, not as messages): within a
// node a round costs one synchronisation of the engine (Sync) instead of
// a message (NodeAlpha), and a byte one copy through the segment (Delta)
// instead of the transport's two (NodeBeta), as shm.go prices the
// engine. Between nodes nothing changes.
func (m Machine) ShmForm() Machine {
	m.NodeAlpha, m.NodeBeta = m.sync(), m.Delta
	return m
}

// sync returns the price of one shm step.
func (m Machine) sync() float64 {
	if m.Sync == 0 {
		a, _ := m.node()
		return a
	}
	return m.Sync
}

// The machines of gocoll-model's regret table and the tuner's default.
// The network of Default is the one the numbers were computed with
// (2 µs, 12.5 GB/s: a 100 Gbit/s fabric); Slow is 1 Gbit/s Ethernet over
// TCP (30 µs, 125 MB/s), Fast a 400 Gbit/s RDMA fabric (1 µs, 50 GB/s).
// Within a node all three are the reference machine the built-in rules
// were measured on: a message of gocoll's shared-memory transport costs 2
// µs and 0.13 ns/B (gocoll-tune's fit of its beta there; two copies,
// through the transport's buffer), an shm step 0.3 µs; a copy within a
// rank 0.05 ns/B and a reduction 0.04 ns/B (cache-resident: 20 and 25
// GB/s).
var (
	Default = Machine{Alpha: 2e-6, Beta: 1 / 12.5e9, Gamma: 1 / 25e9, Delta: 1 / 20e9, NodeAlpha: 2e-6, NodeBeta: 0.13e-9, Sync: 0.3e-6}
	Slow    = Machine{Alpha: 30e-6, Beta: 1 / 0.125e9, Gamma: 1 / 25e9, Delta: 1 / 20e9, NodeAlpha: 2e-6, NodeBeta: 0.13e-9, Sync: 0.3e-6}
	Fast    = Machine{Alpha: 1e-6, Beta: 1 / 50e9, Gamma: 1 / 25e9, Delta: 1 / 20e9, NodeAlpha: 2e-6, NodeBeta: 0.13e-9, Sync: 0.3e-6}
)

// Cost is the price of one call on all ranks.
type Cost struct {
	Time float64 // when the last rank finishes, in seconds; +Inf: the algorithm cannot run the call

	// The maxima over ranks of:
	Rounds       int   // rounds that communicate
	Messages     int   // messages sent
	SentBytes    int64 // bytes sent
	ReducedBytes int64 // bytes reduced (the output of reduce steps)
	CopiedBytes  int64 // bytes copied locally
	ScratchBytes int64 // scratch memory
}

// Algorithm prices algorithm a on the call described by base (Rank is
// ignored) with elements of elemSize bytes. An algorithm whose
// restrictions fail (a.Check) costs +Inf.
func Algorithm(a *algorithms.Algorithm, base algorithms.Params, elemSize int, m Machine) Cost {
	pl := Prepare(a, base, elemSize)
	if pl == nil {
		return Cost{Time: math.Inf(1)}
	}
	return pl.Cost(m, 1)
}

// Run prices the schedules of all ranks of one call, every rank its own
// node.
func Run(scheds []*schedule.Schedule, elemSize int, m Machine) Cost {
	return RunNodes(scheds, nil, elemSize, m)
}

// RunNodes prices the schedules of all ranks of one call on the nodes of
// nodes (nil: every rank its own node).
func RunNodes(scheds []*schedule.Schedule, nodes *algorithms.NodeMap, elemSize int, m Machine) Cost {
	pl := &Plan{p: len(scheds)}
	pl.states = make([]state, len(scheds))
	pl.setNodes(nodes, len(scheds))
	for r, s := range scheds {
		pl.states[r] = pl.trace(s, r, elemSize, identity)
	}
	return pl.Cost(m, 1)
}
