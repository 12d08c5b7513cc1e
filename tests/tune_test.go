package tests

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/tests/internal/harness"
	"github.com/gocoll/gocoll/tuner"
)

// gocoll-tune -machine-only on 4 ranks of emulated hosts: it learns the
// node map from the job and fits the network from two ranks of different
// hosts and the node from two ranks of one, whatever the placement; on
// one host it fits the node only and says so. The file holds the machine
// and no rules. Nothing here depends on the times measured.
func TestTuneFitsBothLevels(t *testing.T) {
	for _, tc := range []struct {
		spec  string
		wants []string
	}{
		{"h1:2,h2:2", []string{"4 ranks, 2 nodes x 2, in ", "between nodes (rank 0 <-> rank 2): alpha", "within a node (rank 0 <-> rank 1): node_alpha", "shm step (8 B shm allreduce on node 0's 2 ranks)"}},
		{"h1:1,h2:1,h1:1,h2:1", []string{"between nodes (rank 0 <-> rank 1): alpha", "within a node (rank 0 <-> rank 2): node_alpha"}},
		{"h1:3,h2:1", []string{"2 nodes (3,1), in ", "between nodes (rank 0 <-> rank 3): alpha", "within a node (rank 0 <-> rank 1): node_alpha"}},
		{"", []string{"4 ranks, one node, in ", "between nodes: not measured (one node); alpha 2.00 µs", "within a node (rank 0 <-> rank 1): node_alpha"}},
	} {
		file := filepath.Join(t.TempDir(), "machine.json")
		out, code := run(t, 2*time.Minute, nil, onHosts(tc.spec, filepath.Join(harness.Bin, "gocoll-tune"), "-machine-only", "-reps", "1", "-o", file)...)
		if code != 0 {
			t.Errorf("gocoll-tune on hosts %q: exit %d\n%s", tc.spec, code, out)
			continue
		}
		for _, want := range tc.wants {
			if !strings.Contains(out, want) {
				t.Errorf("hosts %q: no %q in:\n%s", tc.spec, want, out)
			}
		}
		f, err := tuner.ReadTuningFile(file)
		if err != nil || f.Machine == nil || len(f.Rules) != 0 {
			t.Errorf("hosts %q: tuning file %+v (%v): want a machine and no rules", tc.spec, f, err)
		}
	}
}
