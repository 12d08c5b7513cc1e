package pmi

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/bootstrap"
)

// UseTree takes the tree only without a bulk get and from treeMinRanks
// ranks on; its Allgathers then cost one put (rank 0's), one fence and
// one get (the others') in all, and after EndTree they go through the KVS
// again.
func TestUseTree(t *testing.T) {
	for _, tc := range []struct {
		n    int
		bulk bool
		tree bool
	}{
		{treeMinRanks - 1, false, false},
		{treeMinRanks, true, false},
		{treeMinRanks, false, true},
		{treeMinRanks + 3, false, true},
	} {
		t.Run(fmt.Sprintf("n=%d,bulk=%v", tc.n, tc.bulk), func(t *testing.T) {
			_, clients := startJob(t, tc.n)
			blob := func(call, r int) []byte { return bytes.Repeat([]byte{byte(call), byte(r)}, 60+r) }
			errs := make([]error, tc.n)
			within(t, 20*time.Second, "the allgathers", func() {
				var wg sync.WaitGroup
				for _, c := range clients {
					c.bulk = tc.bulk
					c.UseTree(bootstrap.TreeOptions{Addr: "127.0.0.1", Timeout: 10 * time.Second})
					wg.Go(func() {
						for call := range 3 {
							if call == 2 {
								if err := c.EndTree(); err != nil {
									errs[c.Rank()] = err
									return
								}
							}
							all, err := c.Allgather(blob(call, c.Rank()))
							if err != nil {
								errs[c.Rank()] = fmt.Errorf("call %d: %w", call, err)
								return
							}
							for q := range tc.n {
								if !bytes.Equal(all[q], blob(call, q)) {
									errs[c.Rank()] = fmt.Errorf("call %d: rank %d's blob differs", call, q)
									return
								}
							}
							if call == 1 {
								c.mu.Lock()
								tr := c.traffic
								c.mu.Unlock()
								want := fmt.Sprintf("%d %d %d %d", max(0, 1-c.Rank()), 1, min(1, c.Rank()), 0)
								got := fmt.Sprintf("%d %d %d %d", tr.Puts, tr.Fences, tr.Gets, tr.Bulk)
								if tc.tree && got != want {
									errs[c.Rank()] = fmt.Errorf("after 2 tree Allgathers: puts, fences, gets, bulk %s, want %s", got, want)
								}
								if !tc.tree && tr.Puts != 2 {
									errs[c.Rank()] = fmt.Errorf("after 2 KVS Allgathers: %v", tr)
								}
							}
						}
					})
				}
				wg.Wait()
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
			for _, c := range clients {
				c.Finalize()
			}
		})
	}
}

// TestTreeUnderHydra runs bootstrap.Tree over the PMI-1 and PMI-2
// clients under MPICH's hydra at 2 to 16 ranks, and the clients' own
// Allgather after UseTree on both sides of treeMinRanks: the launcher
// sees one put (rank 0's), one fence and one get (the others') for three
// Allgathers over the tree.
func TestTreeUnderHydra(t *testing.T) {
	mpiexec, err := exec.LookPath("mpiexec.mpich")
	if err != nil {
		t.Skip("mpiexec.mpich (MPICH's hydra) is not installed: apt-get install mpich")
	}
	bin := buildTreeProg(t)
	for _, version := range []string{"1", "2"} {
		name := map[string]string{"1": "PMI-1", "2": "PMI-2 (hydra)"}[version]
		for _, run := range []struct {
			mode string
			n    int
		}{
			{"tree", 2}, {"tree", 3}, {"tree", 5}, {"tree", 16},
			{"hook", treeMinRanks - 1}, {"hook", treeMinRanks},
		} {
			t.Run(fmt.Sprintf("PMI-%s/%s/n=%d", version, run.mode, run.n), func(t *testing.T) {
				out, code := runBounded(t, cleanEnv("GOCOLL_PMI="+version), mpiexec, "-n", fmt.Sprint(run.n), bin, "-mode", run.mode, "-bytes", "3000")
				if code != 0 {
					t.Fatalf("exit %d:\n%s", code, out)
				}
				tree := run.mode == "tree" || run.n >= treeMinRanks
				for r := range run.n {
					want := fmt.Sprintf("PASS rank %d of %d via %s: ", r, run.n, name)
					traffic := fmt.Sprintf("traffic (%d puts, 1 fences, %d gets)", max(0, 1-r), min(1, r))
					if !tree {
						// 3 Allgathers of one value (4 KB of base64 in 4
						// values of PMI-2, 5 of PMI-1's) per rank.
						values := map[string]int{"1": 5, "2": 4}[version]
						traffic = fmt.Sprintf("traffic (%d puts, 3 fences, %d gets)", 3*values, 3*values*(run.n-1))
					}
					line := ""
					for _, l := range strings.Split(out, "\n") {
						if strings.HasPrefix(l, want) {
							line = l
						}
					}
					if !strings.Contains(line, traffic) {
						t.Errorf("rank %d: want %q ... %q in:\n%s", r, want, traffic, out)
					}
				}
			})
		}
	}
}

// buildTreeProg builds testdata/treeprog.
func buildTreeProg(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "treeprog")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/treeprog").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
