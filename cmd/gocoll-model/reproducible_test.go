package main

import (
	"io"
	"testing"
)

// Reproducible mode's cost target in the model: the best canonical
// algorithm within 1.5x of the best at every size, on 64 ranks in nodes
// of 8 and on 2..8 ranks one a node (the p = 1024 table is docs/reproducible.md's,
// too long for the suite).
func TestReproducibleCost(t *testing.T) {
	for _, c := range []struct{ p, k int }{{64, 8}, {2, 1}, {3, 1}, {5, 1}, {7, 1}, {8, 1}} {
		if worst := reproducibleTable(io.Discard, c.p, c.k); worst > 1.5 || worst < 1 {
			t.Errorf("p=%d, %d a node: canonical/best up to %.2f, want 1..1.5", c.p, c.k, worst)
		}
	}
}
