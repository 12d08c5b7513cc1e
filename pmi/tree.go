package pmi

import (
	"sync"

	"github.com/gocoll/gocoll/bootstrap"
)

// treeMinRanks is the smallest job whose Allgather goes over a
// bootstrap.Tree where the server has no bulk get (hydra, Slurm). Below
// it, KVSAllgather's p-1 gets to the local daemon cost less than the
// tree's TCP connections; at 16 ranks the first (start-up) call costs
// the same both ways, under hydra and under Slurm, and from 32 on the
// tree is 2 to 4 times faster (measured on 2 cores; the numbers are in
// results/startup-tree.md). Later calls over the tree cost no launcher
// traffic at all and win from 4 ranks on.
const treeMinRanks = 16

// treeHook is the Tree a client's Allgather uses, once UseTree set one.
type treeHook struct {
	mu   sync.Mutex
	tree *bootstrap.Tree
}

// use starts a Tree over kvs where worth it, unless one is in use.
func (h *treeHook) use(kvs bootstrap.KVS, worth bool, opts bootstrap.TreeOptions) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if worth && h.tree == nil {
		h.tree = bootstrap.NewTree(kvs, opts)
	}
}

func (h *treeHook) get() *bootstrap.Tree {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.tree
}

// end closes the Tree, if any; Allgather then goes through the KVS.
func (h *treeHook) end() error {
	h.mu.Lock()
	t := h.tree
	h.tree = nil
	h.mu.Unlock()
	if t == nil {
		return nil
	}
	return t.Close()
}

var (
	_ bootstrap.TreeUser = (*Client)(nil)
	_ bootstrap.TreeUser = (*Client2)(nil)
)

// UseTree makes Allgather exchange over TCP (bootstrap.Tree, listening on
// opts.Addr) where the server has no bulk get and the job has at least
// treeMinRanks ranks; elsewhere it changes nothing. Every rank must call
// it alike, before its first Allgather.
func (c *Client) UseTree(opts bootstrap.TreeOptions) {
	c.tree.use(c, !c.bulk && c.size >= treeMinRanks, opts)
}

// EndTree closes the tree's listener; later Allgathers go through the KVS.
func (c *Client) EndTree() error { return c.tree.end() }

// UseTree makes Allgather exchange over TCP (bootstrap.Tree, listening on
// opts.Addr) where the job has at least treeMinRanks ranks (PMI-2 has no
// bulk get). Every rank must call it alike, before its first Allgather.
func (c *Client2) UseTree(opts bootstrap.TreeOptions) {
	c.tree.use(c, c.size >= treeMinRanks, opts)
}

// EndTree closes the tree's listener; later Allgathers go through the KVS.
func (c *Client2) EndTree() error { return c.tree.end() }
