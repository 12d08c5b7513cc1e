package main

import (
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/model"
	"github.com/gocoll/gocoll/tuner"
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
