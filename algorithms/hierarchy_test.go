package algorithms

import (
	"slices"
	"testing"
)

// The cuts the shared-memory form (package coll) takes from the
// schedules: which nodes are aligned (each slice a rank's block), which
// maps are consecutive, where each node's part starts, and that the runs
// between rank order and the slice layout cover every element once.
func TestNodeSlicesForTheSharedMemoryForm(t *testing.T) {
	for _, tc := range []struct {
		nodes       []int
		counts      []int
		aligned     []bool
		consecutive bool
		partAt      []int
	}{
		{[]int{0, 0, 1, 1}, []int{3, 3, 3, 3}, []bool{true, true}, true, []int{0, 6}},
		{[]int{0, 0, 1, 1}, []int{2, 3, 3, 3}, []bool{false, true}, true, []int{0, 5}},
		{[]int{0, 0, 1, 1}, []int{3, 2, 3, 3}, []bool{true, true}, true, []int{0, 5}}, // EvenBlocks(5, 2) is 3, 2
		{[]int{0, 0, 0, 1, 1}, []int{2, 2, 0, 2, 2}, []bool{true, true}, true, []int{0, 4}},
		{[]int{0, 0, 0, 1, 1}, []int{2, 2, 1, 2, 2}, []bool{false, true}, true, []int{0, 5}},
		{[]int{0, 1, 0, 1}, []int{1, 1, 1, 1}, []bool{true, true}, false, []int{0, 1}},
		{[]int{0, 0, 1}, []int{4, 0, 5}, []bool{true, true}, true, []int{0, 4}},
		{[]int{0, 0, 1}, []int{4, 1, 5}, []bool{false, true}, true, []int{0, 5}},
	} {
		m := NodeMapOf(tc.nodes)
		ns := NewNodeSlices(m, tc.counts)
		for j, want := range tc.aligned {
			if got := ns.Aligned(j); got != want {
				t.Errorf("%s counts %v: node %d aligned %v, want %v", m, tc.counts, j, got, want)
			}
			if got := ns.PartAt(j); got != tc.partAt[j] {
				t.Errorf("%s counts %v: node %d's part at %d, want %d", m, tc.counts, j, got, tc.partAt[j])
			}
		}
		if got := ns.Consecutive(); got != tc.consecutive {
			t.Errorf("%s: consecutive %v, want %v", m, got, tc.consecutive)
		}
		total := 0
		for _, c := range tc.counts {
			total += c
		}
		nat, lay := make([]int, total), make([]int, total)
		ns.Runs(func(at, sl, n int) {
			for i := range n {
				nat[at+i]++
				lay[sl+i]++
			}
		})
		ones := slices.Repeat([]int{1}, total)
		if !slices.Equal(nat, ones) || !slices.Equal(lay, ones) {
			t.Errorf("%s counts %v: runs cover rank order %v and the layout %v, want each element once", m, tc.counts, nat, lay)
		}
	}
}
