package coll

import (
	"fmt"

	"github.com/gocoll/gocoll/algorithms"
)

// SetNodes gives the communicator its node map (which of its ranks share a
// node), built from the host ids the bootstrap exchanged: every collective
// then passes it to the tuner and the algorithms in Params.Nodes, and
// communicators made from this one derive theirs from it. Call it once,
// right after NewComm and before any collective, with the same map on
// every rank. Without it the map is unknown (nil). The schedule cache
// does not key on the map, which is fixed per communicator: SetNodes
// empties it.
func (c *Comm) SetNodes(m *algorithms.NodeMap) error {
	if m != nil && m.P() != c.Size() {
		return fmt.Errorf("coll: node map of %d ranks for %s, which has %d", m.P(), c.name, c.Size())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cache.m = nil
	c.setNodes(m)
	return nil
}

// setNodes stores the map and says so under GOCOLL_DEBUG=info.
func (c *Comm) setNodes(m *algorithms.NodeMap) {
	c.nodes = m
	if c.cfg.Debug != nil && m != nil {
		fmt.Fprintf(c.cfg.Debug, "gocoll: rank %d: %s: p=%d on %s (this rank: node %d, local rank %d)\n",
			c.rank, c.name, c.Size(), m, m.Node(c.rank), m.Local(c.rank))
	}
}

// Nodes returns the communicator's node map, nil when unknown. The map is
// shared: the caller must not change it.
func (c *Comm) Nodes() *algorithms.NodeMap { return c.nodes }

// OneNode reports whether the communicator's ranks are known to share one
// node, so that a shared segment can serve them all.
func (c *Comm) OneNode() bool { return c.nodes != nil && c.nodes.OneNode() }

// subNodes is the node map of a communicator whose rank i is rank
// members[i] of a communicator with map parent (nil: unknown).
func subNodes(parent *algorithms.NodeMap, members []int) *algorithms.NodeMap {
	if parent == nil {
		return nil
	}
	nodes := make([]int, len(members))
	for i, r := range members {
		nodes[i] = parent.Node(r)
	}
	return algorithms.NodeMapOf(nodes)
}

// SplitShared partitions c into one communicator per node
// (MPI_Comm_split_type with MPI_COMM_TYPE_SHARED): the ranks of c that
// share a node, ordered by key then by rank in c. The new communicator
// gets a shared segment, so that the shm algorithms serve it even when c
// spans several nodes. Where c's map is unknown every rank counts as a
// node of its own. Collective over c.
func (c *Comm) SplitShared(key int, name string) (*Comm, error) {
	return c.SplitType(true, key, name)
}

// SplitType is SplitShared where shared is true; where it is false (a
// split_type of MPI_UNDEFINED) this rank joins no communicator and gets
// nil, while taking its part in the collective.
func (c *Comm) SplitType(shared bool, key int, name string) (*Comm, error) {
	color := Undefined
	switch {
	case !shared:
	case c.nodes != nil:
		color = c.nodes.Node(c.rank)
	default:
		color = c.rank
	}
	return c.split("MPI_Comm_split_type", color, key, name)
}
