package algorithms

import "fmt"

// NodeMap says which ranks of a communicator share a node (a host whose
// ranks can map one shared segment). Nodes are numbered 0..NumNodes()-1 in
// the order of their lowest rank, and a node's ranks are numbered
// 0..Size(n)-1 in rank order (their local ranks), so every rank that sees
// the same host names builds the same map. A nil *NodeMap means the map is
// unknown: algorithms treat every rank as its own node.
type NodeMap struct {
	node  []int   // node of each rank
	local []int   // local rank of each rank on its node
	ranks [][]int // the ranks of each node, in rank order
}

// NewNodeMap builds the map of a communicator whose rank r runs on
// hosts[r] (any names; equal names share a node).
func NewNodeMap(hosts []string) *NodeMap {
	m := &NodeMap{node: make([]int, len(hosts)), local: make([]int, len(hosts))}
	ids := map[string]int{}
	for r, h := range hosts {
		n, ok := ids[h]
		if !ok {
			n = len(m.ranks)
			ids[h] = n
			m.ranks = append(m.ranks, nil)
		}
		m.node[r], m.local[r] = n, len(m.ranks[n])
		m.ranks[n] = append(m.ranks[n], r)
	}
	return m
}

// NodeMapOf builds the map from each rank's node number (any integers;
// equal ones share a node), as tests and the model describe machines.
func NodeMapOf(nodes []int) *NodeMap {
	hosts := make([]string, len(nodes))
	for r, n := range nodes {
		hosts[r] = fmt.Sprint(n)
	}
	return NewNodeMap(hosts)
}

// BlockNodeMap is the map of p ranks placed by node: nodes of k
// consecutive ranks, the last one short where k does not divide p (k < 1
// counts as 1), as the model and the tuning tools lay out a shape.
func BlockNodeMap(p, k int) *NodeMap {
	nodes := make([]int, p)
	for r := range nodes {
		nodes[r] = r / max(k, 1)
	}
	return NodeMapOf(nodes)
}

// P returns the number of ranks the map covers.
func (m *NodeMap) P() int { return len(m.node) }

// NumNodes returns the number of nodes.
func (m *NodeMap) NumNodes() int { return len(m.ranks) }

// Node returns the node of rank r.
func (m *NodeMap) Node(r int) int { return m.node[r] }

// Local returns rank r's local rank on its node.
func (m *NodeMap) Local(r int) int { return m.local[r] }

// Ranks returns the ranks of node n in rank order (the caller must not
// modify it).
func (m *NodeMap) Ranks(n int) []int { return m.ranks[n] }

// Size returns the number of ranks on node n.
func (m *NodeMap) Size(n int) int { return len(m.ranks[n]) }

// MaxPerNode returns the largest number of ranks on one node.
func (m *NodeMap) MaxPerNode() int {
	k := 0
	for _, rs := range m.ranks {
		k = max(k, len(rs))
	}
	return k
}

// OneNode reports whether every rank shares one node.
func (m *NodeMap) OneNode() bool { return len(m.ranks) == 1 }

// Uniform reports whether every node has the same number of ranks.
func (m *NodeMap) Uniform() bool {
	for _, rs := range m.ranks {
		if len(rs) != len(m.ranks[0]) {
			return false
		}
	}
	return true
}

// String describes the map briefly: "4 nodes x 2" or "3 nodes (2,3,1)".
func (m *NodeMap) String() string {
	if m == nil {
		return "unknown"
	}
	if m.Uniform() {
		return fmt.Sprintf("%d nodes x %d", m.NumNodes(), m.MaxPerNode())
	}
	s := fmt.Sprintf("%d nodes (", m.NumNodes())
	for n, rs := range m.ranks {
		if n > 0 {
			s += ","
		}
		s += fmt.Sprint(len(rs))
	}
	return s + ")"
}
