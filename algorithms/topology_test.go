package algorithms

import (
	"slices"
	"testing"
)

func TestNodeMap(t *testing.T) {
	// Round-robin placement over three hosts, uneven.
	m := NewNodeMap([]string{"b", "a", "c", "b", "a", "b"})
	if m.P() != 6 || m.NumNodes() != 3 {
		t.Fatalf("P %d, nodes %d; want 6, 3", m.P(), m.NumNodes())
	}
	wantNode := []int{0, 1, 2, 0, 1, 0}
	wantLocal := []int{0, 0, 0, 1, 1, 2}
	for r := range 6 {
		if m.Node(r) != wantNode[r] || m.Local(r) != wantLocal[r] {
			t.Errorf("rank %d: node %d local %d; want %d %d", r, m.Node(r), m.Local(r), wantNode[r], wantLocal[r])
		}
	}
	if !slices.Equal(m.Ranks(0), []int{0, 3, 5}) || m.Size(2) != 1 || m.MaxPerNode() != 3 {
		t.Errorf("ranks of node 0 %v, size of node 2 %d, max %d", m.Ranks(0), m.Size(2), m.MaxPerNode())
	}
	if m.Uniform() || m.OneNode() || m.String() != "3 nodes (3,2,1)" {
		t.Errorf("uniform %v, one node %v, %q", m.Uniform(), m.OneNode(), m.String())
	}
	u := NodeMapOf([]int{7, 7, 9, 9})
	if !u.Uniform() || u.String() != "2 nodes x 2" || u.Node(2) != 1 {
		t.Errorf("%q, node of rank 2 %d", u.String(), u.Node(2))
	}
	if !NodeMapOf([]int{0, 0, 0}).OneNode() {
		t.Error("one node not recognized")
	}
	if b := BlockNodeMap(7, 3); b.NumNodes() != 3 || b.Size(2) != 1 || b.Node(3) != 1 || b.Local(5) != 2 {
		t.Errorf("BlockNodeMap(7, 3) = %v", b)
	}
	if b := BlockNodeMap(3, 0); b.NumNodes() != 3 {
		t.Errorf("BlockNodeMap(3, 0) = %v, want a rank a node", b)
	}
	var none *NodeMap
	if none.String() != "unknown" {
		t.Errorf("nil map: %q", none.String())
	}
}
