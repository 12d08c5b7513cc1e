package tuner_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/executor/model"
	"github.com/gocoll/gocoll/tuner"
)

// A tuner with another machine decides as its root does inside the rules
// and by its own machine outside them: on 2 nodes of 4, a 1 MiB
// reduce-scatter is ring on model.Default (100 Gbit/s) and hierarchical
// on a 1 Gbit/s network (model.Slow). One tuner per machine, shared.
func TestWithMachine(t *testing.T) {
	root, err := tuner.New(envvar.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if root.MachineGiven() {
		t.Error("the built-in tuner says its machine was given")
	}
	slow := model.Slow
	d := root.WithMachine(slow)
	if d != root.WithMachine(slow) || d != d.WithMachine(slow) || d == root.WithMachine(model.Fast) {
		t.Error("WithMachine does not return one tuner per machine")
	}
	if !d.MachineGiven() || d.Machine() != slow || root.Machine() != model.Default {
		t.Errorf("machines: derived %+v (given %v), root %+v", d.Machine(), d.MachineGiven(), root.Machine())
	}
	nodes := algorithms.BlockNodeMap(8, 4)
	q := tuner.Query{Collective: algorithms.ReduceScatterBlock, Bytes: 1 << 20,
		Params: algorithms.Params{P: 8, Counts: []int{1 << 15, 1 << 15, 1 << 15, 1 << 15, 1 << 15, 1 << 15, 1 << 15, 1 << 15}, Commutative: true, Nodes: nodes}}
	a, err := root.Choose(q)
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Choose(q)
	if err != nil {
		t.Fatal(err)
	}
	if a.Source != tuner.FromModel || b.Source != tuner.FromModel || a.Alg.Name != "ring" || b.Alg.Name != "hierarchical" ||
		!strings.HasPrefix(a.Why, "model (") || !strings.HasPrefix(b.Why, "model on the fitted machine (") {
		t.Errorf("1 MiB on 2x4: default machine %s (%s), 1 Gbit/s %s (%s); want ring, then hierarchical", a.Alg.Name, a.Why, b.Alg.Name, b.Why)
	}
	// Inside the rules (one node of 4) both take the rule.
	one := algorithms.Params{P: 4, Count: 1 << 18, Commutative: true, SharedMemory: true, Nodes: algorithms.BlockNodeMap(4, 4)}
	for _, tu := range []*tuner.Tuner{root, d} {
		c, err := tu.Choose(tuner.Query{Collective: algorithms.Allreduce, Bytes: 1 << 20, Params: one})
		if err != nil || c.Source != tuner.FromRule || !strings.Contains(c.Why, "defaults") {
			t.Errorf("one node: %+v (%v), want a rule of the defaults", c, err)
		}
	}
}

// A tuning file's machine is given; one without is not.
func TestMachineGivenByFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		text  string
		given bool
	}{{`{"rules": []}`, false}, {`{"machine": {"alpha": 3e-5, "beta": 8e-9, "gamma": 4e-11, "delta": 5e-11}, "rules": []}`, true}} {
		path := filepath.Join(dir, "t.json")
		if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		tu, err := tuner.New(envvar.Settings{TuningFile: path})
		if err != nil {
			t.Fatal(err)
		}
		if tu.MachineGiven() != tc.given {
			t.Errorf("%s: MachineGiven %v", tc.text, tu.MachineGiven())
		}
	}
}

// SaveMachine writes a machine a tuner reads back as given; into an
// existing tuning file it replaces the machine and keeps the rules, even
// ones this tuner cannot check (the preload's native); a file that is
// not a tuning file stays as it was.
func TestSaveMachine(t *testing.T) {
	dir := t.TempDir()
	m := tuner.MachineOf(model.Slow)
	path := filepath.Join(dir, "machine.json")
	if err := tuner.SaveMachine(path, m, &tuner.Provenance{Command: "test"}); err != nil {
		t.Fatal(err)
	}
	tu, err := tuner.New(envvar.Settings{TuningFile: path})
	if err != nil || !tu.MachineGiven() || tu.Machine() != model.Slow {
		t.Fatalf("read back: %v, given %v", err, tu != nil && tu.MachineGiven())
	}
	rt := filepath.Join(dir, "runtime.json")
	os.WriteFile(rt, []byte(`{"rules": [{"collective": "allreduce", "max_bytes": 4096, "algorithm": "native"}]}`), 0o644)
	if err := tuner.SaveMachine(rt, m, nil); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(rt)
	if !strings.Contains(string(data), `"algorithm": "native"`) || !strings.Contains(string(data), `"machine"`) {
		t.Errorf("rules or machine lost:\n%s", data)
	}
	junk := filepath.Join(dir, "junk.json")
	os.WriteFile(junk, []byte("not json"), 0o644)
	if err := tuner.SaveMachine(junk, m, nil); err == nil {
		t.Error("a file that is not a tuning file: no error")
	}
	if data, _ := os.ReadFile(junk); string(data) != "not json" {
		t.Errorf("junk rewritten: %q", data)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("files left: %v", entries)
	}
}

// A tuner made for a fitted machine answers as its root does outside the
// model: a forced algorithm that cannot run falls back, with the root's
// warning; and it compiles its rules with where each came from (the
// merge of the fit and the preload's Choice.File once left that out,
// and the first Choose panicked).
func TestWithMachineFallsBackAndWarns(t *testing.T) {
	root, err := tuner.New(envvar.Settings{Forced: map[algorithms.Collective]string{algorithms.Allreduce: "ring"}})
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	root.SetLog(&log)
	d := root.WithMachine(model.Slow)
	q := tuner.Query{Collective: algorithms.Allreduce, Bytes: 64, Params: algorithms.Params{P: 4, Commutative: false}}
	c, err := d.Choose(q)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Fallback || c.Alg == nil || c.Alg.Name == "ring" {
		t.Errorf("forced ring, non-commutative op, fitted tuner: %+v", c)
	}
	if !strings.Contains(log.String(), "ring") {
		t.Errorf("no warning: %q", log.String())
	}
}
