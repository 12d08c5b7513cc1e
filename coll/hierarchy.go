package coll

import (
	"fmt"

	"github.com/gocoll/gocoll/algorithms"
)

// The hierarchical algorithms' shared-memory form.
//
// A hierarchical algorithm (package algorithms) is one schedule: its
// intra-node phases are messages between the ranks of a node. Where every
// node's ranks share a segment, those phases run faster on the shm engine
// (one synchronisation per step instead of a message per peer), which is
// not a schedule. So on host memory the call runs in
// three steps instead: the shm collective on the rank's node communicator,
// the collective's inter-node part on its slice communicator (the ranks of
// one local rank, one per node, in node order), and the shm collective
// back; the vector is cut exactly as the schedule cuts it
// (algorithms.AllreduceSlices, algorithms.NodeSlices).
//
// Both forms keep the one name "hierarchical", not a new algorithm: forcing
// it (GOCOLL_<COLL>_ALGORITHM), tuning rules and the model all mean the
// same cut and phases, and each call takes the form its memory and the
// communicator's nodes allow. The
// schedule stays the reference the check executor proves, the form for
// device memory, and the fallback where some node has no segment.
// GOCOLL_DEBUG=info says which form ran (form=shm or form=schedule).
//
// The inter-node step is a flat call on the slice communicator with the
// tuner's choice for it (not the forced algorithm of the outer call: that
// is the hierarchical one): a communicator of one rank per node is exactly
// the inter-node phase's shape, so rules and the model that know the
// network apply to it.

// hierarchicalName is the algorithm whose calls may take the shm form.
const hierarchicalName = "hierarchical"

// hierarchy is a communicator's node and slice communicators.
type hierarchy struct {
	m     *algorithms.NodeMap
	node  *Comm // this rank's node, with a shared segment unless it is one rank
	slice *Comm // local rank l < L of every node, by node; nil for l >= L
}

// composes reports whether a call of coll with alg is a hierarchical
// algorithm with phases to compose on c's node map: the calls that may
// take the shm form. It depends on c and the call's algorithm alone, so
// every rank of c answers alike.
func (c *Comm) composes(coll algorithms.Collective, alg *algorithms.Algorithm) bool {
	switch coll {
	case algorithms.Allreduce, algorithms.ReduceScatter, algorithms.ReduceScatterBlock, algorithms.Allgather:
		return alg.Name == hierarchicalName && !alg.Direct && algorithms.Composes(c.nodes)
	}
	return false
}

// hierarchyFor returns the node and slice communicators for a call that
// composes, nil where it takes the schedule form (device memory, or no
// segment on some node). The first such call makes them, on every rank
// alike; c.mu is held, and let go meanwhile, since the splits are
// collectives of c.
func (c *Comm) hierarchyFor(onDevice bool) *hierarchy {
	if !c.hierTried {
		c.hierTried = true
		c.mu.Unlock()
		made := c.makeHierarchy()
		c.mu.Lock()
		c.hier = made
	}
	if onDevice {
		return nil
	}
	return c.hier
}

// Form returns what GOCOLL_DEBUG=info adds to the line of a call of coll
// with the algorithm named alg on c, for callers that print their own
// line (the preload): " form=shm" or " form=schedule" for a hierarchical
// call with phases to compose, "" for any other. At the first such call
// it makes the node and slice communicators, as the call would:
// collective, so every rank of c calls it at the same call, or none does.
func (c *Comm) Form(coll algorithms.Collective, alg string, onDevice bool) string {
	a, err := algorithms.Lookup(coll, alg)
	if err != nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || !c.composes(coll, a) {
		return ""
	}
	return formNote(c.hierarchyFor(onDevice))
}

// makeHierarchy splits c into its node and slice communicators and
// returns them where every node's communicator got a shared segment (or
// is one rank), else nil: then every rank keeps the schedule form, since
// the forms' messages cannot meet. Collective over c; c.mu is not held
// (the splits are collectives of c).
func (c *Comm) makeHierarchy() *hierarchy {
	m := c.nodes
	local, L := m.Local(c.rank), algorithms.SliceCount(m)
	h := &hierarchy{m: m}
	var errs [2]error
	// Keyed by local rank: the node's ranks in local order, as the
	// schedules number them.
	h.node, errs[0] = c.SplitShared(local, c.name+"/node")
	color := Undefined
	if local < L {
		color = local
	}
	h.slice, errs[1] = c.Split(color, m.Node(c.rank), c.name+"/slice")
	ok := errs[0] == nil && errs[1] == nil && (h.node.Size() == 1 || h.node.Shared())
	all, err := exchange{c}.AllTrue(ok)
	if err == nil && all {
		if c.cfg.Debug != nil {
			fmt.Fprintf(c.cfg.Debug, "gocoll: rank %d: %s: hierarchical runs its intra-node phases on shared memory (node of %d ranks, %d slices across %d nodes)\n",
				c.rank, c.name, h.node.Size(), L, m.NumNodes())
		}
		return h
	}
	if c.cfg.Debug != nil {
		why := "a node has no shared segment"
		switch {
		case errs[0] != nil:
			why = errs[0].Error()
		case errs[1] != nil:
			why = errs[1].Error()
		case err != nil:
			why = err.Error()
		}
		fmt.Fprintf(c.cfg.Debug, "gocoll: rank %d: %s: hierarchical keeps the schedule form: %s\n", c.rank, c.name, why)
	}
	h.free()
	return nil
}

// free releases the node and slice communicators.
func (h *hierarchy) free() {
	for _, s := range []*Comm{h.node, h.slice} {
		if s != nil {
			s.Free()
		}
	}
}

// formNote is what GOCOLL_DEBUG=info adds to a call that composes.
func formNote(h *hierarchy) string {
	if h != nil {
		return " form=shm"
	}
	return " form=schedule"
}
