package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/model"
	"github.com/gocoll/gocoll/mpi"
	"github.com/gocoll/gocoll/tuner"
	"github.com/gocoll/gocoll/tuner/fit"
)

// Measured winners become rules for exactly the measured shape: its rank
// count, node count and ranks per node, split between sizes.
func TestRulesCarryShape(t *testing.T) {
	res := []measured{{bytes: 8, best: "recursive_doubling"}, {bytes: 32, best: "recursive_doubling"}, {bytes: 128, best: "ring"}}
	sh := tuner.Shape{P: 8, Nodes: 4, PerNode: 2}
	rules := rulesFromWinners(algorithms.Allreduce, sh, res)
	want := []tuner.Rule{
		{Collective: "allreduce", MaxBytes: 80, Algorithm: "recursive_doubling"},
		{Collective: "allreduce", MinBytes: 80, Algorithm: "ring"},
	}
	if len(rules) != len(want) {
		t.Fatalf("rules %+v, want %+v", rules, want)
	}
	for i, w := range want {
		w.MinRanks, w.MaxRanks, w.MinNodes, w.MaxNodes, w.MinPerNode, w.MaxPerNode = 8, 8, 4, 4, 2, 2
		if rules[i] != w {
			t.Errorf("rule %d: %+v, want %+v", i, rules[i], w)
		}
	}
}

// The model's rules are for the shapes of -model: p ranks on nodes of
// the measured job's ranks per node; hierarchical is priced only on
// several nodes of more than one rank, the shm algorithms only on one.
func TestModelRulesShapes(t *testing.T) {
	o := options{min: 8, max: 8 << 20, model: []int{2, 8, 12, 64}}
	job := tuner.Shape{P: 8, Nodes: 4, PerNode: 2}
	shapes := map[int]tuner.Shape{2: {P: 2, Nodes: 1, PerNode: 2}, 12: {P: 12, Nodes: 6, PerNode: 2}, 64: {P: 64, Nodes: 32, PerNode: 2}}
	for _, coll := range []algorithms.Collective{algorithms.Allreduce, algorithms.Allgather} {
		seen := map[int]bool{}
		for _, r := range modelRules(coll, model.Default, o, job) {
			sh, ok := shapes[r.MinRanks]
			if !ok || r.MaxRanks != sh.P || r.MinNodes != sh.Nodes || r.MaxNodes != sh.Nodes || r.MinPerNode != sh.PerNode || r.MaxPerNode != sh.PerNode {
				t.Errorf("%v: rule %+v: not one of the shapes %v (p=8 is measured)", coll, r, shapes)
			}
			seen[r.MinRanks] = true
			if r.Algorithm == "hierarchical" && !sh.Composes() || r.Algorithm == "shm" && sh.Nodes != 1 {
				t.Errorf("%v: rule %+v: %s on %d nodes", coll, r, r.Algorithm, sh.Nodes)
			}
		}
		if len(seen) != len(shapes) {
			t.Errorf("%v: rules for p in %v, want %v", coll, seen, shapes)
		}
	}
}

// A job of one rank a node gives the model's shapes one rank a node too,
// where hierarchical is a flat algorithm under another name: it is not a
// candidate there, as in the tuner, so it names no rule.
func TestModelRulesOneRankANode(t *testing.T) {
	o := options{min: 8, max: 8 << 20, model: []int{2, 8, 64}}
	job := tuner.Shape{P: 4, Nodes: 4, PerNode: 1}
	for _, coll := range algorithms.Collectives {
		rules := modelRules(coll, model.Default, o, job)
		if len(rules) == 0 {
			t.Fatalf("%v: no rules", coll)
		}
		for _, r := range rules {
			if r.Algorithm == "hierarchical" {
				t.Errorf("%v: rule %+v names hierarchical on one rank a node", coll, r)
			}
		}
	}
}

// On one node (in-process ranks) the machine is fitted from the pair
// within the node and the shm step; the network keeps model.Default's
// values and says so; every rank gets the same machine. Nothing here
// depends on the times.
func TestMeasureMachineOneNode(t *testing.T) {
	got := make([]fit.Result, 3)
	err := mpi.RunLocal(3, func(c *mpi.Comm) error {
		r, err := measureMachine(c, 2)
		got[c.Rank()] = r
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	r := got[0]
	if r.Nodes.NumNodes() != 1 || r.Nodes.P() != 3 {
		t.Errorf("node map %v, want one node of 3", r.Nodes)
	}
	if !r.Pairs.HasIntra || r.Pairs.Intra != [2]int{0, 1} || r.Pairs.HasInter || r.Inter != nil {
		t.Errorf("pairs %+v, inter points %v: want 0 <-> 1 within the node only", r.Pairs, r.Inter)
	}
	if len(r.Intra) != 11 || r.Intra[0].Bytes != 4 || r.Intra[10].Bytes != 4<<20 || !r.SyncMeasured {
		t.Errorf("intra points %v, sync measured %v: want 4 B..4 MiB and the shm step", r.Intra, r.SyncMeasured)
	}
	if r.Machine.Alpha != model.Default.Alpha || r.Machine.Beta != model.Default.Beta {
		t.Errorf("network %g %g, want model.Default's (not measured)", r.Machine.Alpha, r.Machine.Beta)
	}
	for i := range got {
		if got[i].Machine != r.Machine {
			t.Errorf("rank %d fitted %+v, rank 0 %+v", i, got[i].Machine, r.Machine)
		}
	}
	d := r.Describe()
	for _, want := range []string{"3 ranks, one node, in", "between nodes: not measured (one node)", "within a node (rank 0 <-> rank 1)", "shm step (8 B shm allreduce on node 0's 3 ranks)", "rank 0, 16 MiB: gamma"} {
		if !strings.Contains(d, want) {
			t.Errorf("Describe lacks %q:\n%s", want, d)
		}
	}
}

// measureCollective times every host algorithm at every size, below
// smallMax interleaved (smallCalls calls a round) and above as before;
// the CUDA-only algorithms are not candidates (forced on host memory
// they would run shm under their own name); every rank sees the same
// times and winner. Nothing here depends on which algorithm wins.
func TestMeasureCollectiveBothRegimes(t *testing.T) {
	got := make([][]measured, 2)
	err := mpi.RunLocal(2, func(c *mpi.Comm) error {
		res, err := measureCollective(c, algorithms.Allreduce, tuner.Shape{P: 2, Nodes: 1, PerNode: 2},
			options{min: 4 << 10, max: 16 << 10, reps: 1})
		got[c.Rank()] = res
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	res := got[0]
	if len(res) != 2 || res[0].bytes != 4<<10 || res[1].bytes != 16<<10 {
		t.Fatalf("sizes %+v, want 4 KiB (interleaved) and 16 KiB (back to back)", res)
	}
	for i, r := range res {
		if !slices.Contains(r.algs, "shm") || !slices.Contains(r.algs, "ring") {
			t.Errorf("%d B: measured %v, want shm and ring among them", r.bytes, r.algs)
		}
		for _, alg := range r.algs {
			if a, _ := algorithms.Lookup(algorithms.Allreduce, alg); !a.OnHost() {
				t.Errorf("%d B: measured %s, which runs on CUDA memory only", r.bytes, alg)
			}
			if r.us[alg] <= 0 || r.us[alg] < r.us[r.best] {
				t.Errorf("%d B: %s %g µs, best %s %g", r.bytes, alg, r.us[alg], r.best, r.us[r.best])
			}
		}
		if o := got[1][i]; o.best != r.best || o.us[r.best] != r.us[r.best] {
			t.Errorf("%d B: rank 1 chose %s (%g µs), rank 0 %s (%g)", r.bytes, o.best, o.us[o.best], r.best, r.us[r.best])
		}
	}
}
