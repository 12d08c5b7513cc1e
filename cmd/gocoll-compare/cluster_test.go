package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/model"
	"github.com/gocoll/gocoll/tuner"
)

func TestParseCluster(t *testing.T) {
	if h, p, err := parseCluster("4x2"); err != nil || h != 4 || p != 2 {
		t.Errorf("4x2: %d %d %v", h, p, err)
	}
	for _, bad := range []string{"4", "x2", "4x", "0x2", "4x0", "axb", "4x2x1"} {
		if _, _, err := parseCluster(bad); err == nil || !strings.Contains(err.Error(), "-cluster") {
			t.Errorf("%q: %v, want an error naming -cluster", bad, err)
		}
	}
	if c, err := collectiveOf("reduce_scatter_block"); err != nil || c != algorithms.ReduceScatterBlock {
		t.Errorf("reduce_scatter_block: %v %v", c, err)
	}
	if _, err := collectiveOf("alltoall"); err == nil {
		t.Error("alltoall: no error")
	}
}

// Across hosts every schedule algorithm is measured by name, forced with
// GOCOLL_FALLBACK=error (a forced algorithm that cannot run fails the run
// instead of quietly measuring another), and first auto and auto-tuned,
// the fitted machine its tuning file; never the shm family, which needs
// one host.
func TestClusterConfigs(t *testing.T) {
	for _, c := range algorithms.Collectives {
		cs := clusterConfigs(c, nil, "bench", autoConfigs("/tmp/machine.json"))
		if cs[0].name != "auto" || len(cs[0].env) != 0 {
			t.Errorf("%v: first configuration %+v, want auto without variables", c, cs[0])
		}
		if cs[1].name != "auto-tuned" || !slices.Equal(cs[1].env, []string{"GOCOLL_TUNING_FILE=/tmp/machine.json"}) {
			t.Errorf("%v: second configuration %+v, want auto-tuned with the tuning file", c, cs[1])
		}
		n := 0
		for _, a := range algorithms.All(c) {
			if a.IsSchedule() {
				n++
			}
		}
		if len(cs) != n+2 {
			t.Errorf("%v: %d configurations, want auto, auto-tuned and %d algorithms", c, len(cs), n)
		}
		for _, cfg := range cs[2:] {
			a, err := algorithms.Lookup(c, cfg.name)
			if err != nil || !a.IsSchedule() || isAuto(cfg.name) {
				t.Errorf("%v: configuration %q: %v", c, cfg.name, err)
			}
			want := "GOCOLL_" + c.EnvName() + "_ALGORITHM=" + cfg.name
			if len(cfg.env) != 2 || cfg.env[0] != want || cfg.env[1] != "GOCOLL_FALLBACK=error" {
				t.Errorf("%v: %s: env %v", c, cfg.name, cfg.env)
			}
		}
	}
}

// A run's variables override the environment's, the last of a name
// winning, as exec.Cmd's Env does: the tuner that prices a configuration
// sees what its runs see.
func TestEnvWith(t *testing.T) {
	t.Setenv("GOCOLL_TEST_ENVWITH", "outside")
	env := envWith([]string{"GOCOLL_TUNING_FILE=/a", "GOCOLL_TUNING_FILE=/b", "X=1=2"})
	for name, want := range map[string]string{"GOCOLL_TUNING_FILE": "/b", "X": "1=2", "GOCOLL_TEST_ENVWITH": "outside", "GOCOLL_TEST_ENVWITH_UNSET": ""} {
		if got := env(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if got := envWith(nil)("GOCOLL_TEST_ENVWITH"); got != "outside" {
		t.Errorf("no variables: %q, want the environment's", got)
	}
}

// fakeModel prices a configuration at a size from us[config][bytes] (the
// same for every collective), auto and auto-tuned as the algorithm
// chose[config][bytes].
func fakeModel(us map[string]map[int64]float64, chose map[string]map[int64]string) modelFunc {
	return func(config string, k key) (float64, string, bool) {
		name := config
		if isAuto(config) {
			name = chose[config][k.bytes]
		}
		v, ok := us[name][k.bytes]
		if !isAuto(config) {
			name = ""
		}
		return v, name, ok
	}
}

// The cluster table: every configuration's lowest time, the fastest
// algorithm, auto and auto-tuned over it, and hierarchical over the
// fastest flat one; then the model's price of each, the autos priced as
// what each chose, and measured/model; and the autos' scores against the
// best.
func TestReportCluster(t *testing.T) {
	rs := fed(t, 8, configsNamed("auto", "auto-tuned", "hierarchical", "ring"), map[string][2][3]float64{
		"auto":         {{0.60, 5.0, 0.40}, {0.50, 6.0, 0.45}},
		"auto-tuned":   {{0.42, 2.1, 0.30}, {0.44, 2.4, 0.28}},
		"hierarchical": {{0.40, 4.0, 0.30}, {0.45, 4.5, 0.20}},
		"ring":         {{0.80, 2.0, 0.35}, {0.90, 2.5, 0.25}},
	})
	price := fakeModel(map[string]map[int64]float64{
		"hierarchical": {4: 0.50, 8192: 2.00},
		"ring":         {4: 1.00, 8192: 2.50},
	}, map[string]map[int64]string{
		"auto":       {4: "ring", 8192: "hierarchical"},
		"auto-tuned": {4: "hierarchical", 8192: "ring"},
	})
	var b bytes.Buffer
	reportCluster(&b, rs, price)
	out := strings.Join(strings.Fields(b.String()), " ") // the columns' padding aside
	for _, want := range []string{
		"np=8: the lowest of 2 repetitions",
		"bytes auto auto-tuned hierarchical ring best auto/best auto-tuned/best hierarchical/best-flat",
		// allreduce 4: auto 0.50, auto-tuned 0.42, hierarchical 0.40
		// (best), ring 0.80: auto/best 1.25, auto-tuned/best 1.05,
		// hierarchical/ring 0.50.
		"4 0.50 0.42 0.40 0.80 hierarchical 1.25 1.05 0.50",
		// 8 KiB: ring 2.00 is best; auto 5.00 (2.50x); auto-tuned 2.10
		// (1.05x); hierarchical 4.00 (2.00x).
		"8192 5.00 2.10 4.00 2.00 ring 2.50 1.05 2.00",
		// allgather 4: hierarchical 0.20; auto 0.40 (2.00); auto-tuned
		// 0.28 (1.40); ring 0.25 (0.80).
		"4 0.40 0.28 0.20 0.25 hierarchical 2.00 1.40 0.80",
		"MPI_Allreduce, the model: each configuration's price on the fitted machine (auto, auto-tuned: of the algorithm the tuner chose)",
		"bytes auto chose auto-tuned chose auto /model auto-tuned /model hierarchical /model ring /model",
		// allreduce 4: auto chose ring (1.00; measured 0.50), auto-tuned
		// hierarchical (0.50; 0.42), hierarchical 0.50 (0.40), ring 1.00 (0.80).
		"4 ring hierarchical 1.00 0.50 0.50 0.84 0.50 0.80 1.00 0.80",
		// 8 KiB: auto chose hierarchical (2.00; 5.00), auto-tuned ring
		// (2.50; 2.10), hierarchical 2.00 (4.00), ring 2.50 (2.00).
		"8192 hierarchical ring 2.00 2.50 2.50 0.84 2.00 2.00 2.50 0.80",
		// allgather 4: auto 1.00 (0.40), auto-tuned 0.50 (0.28),
		// hierarchical 0.50 (0.20), ring 1.00 (0.25).
		"4 ring hierarchical 1.00 0.40 0.50 0.56 0.50 0.40 1.00 0.25",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// The summary at the end: per collective, at how many sizes auto and
// auto-tuned are within 1.10 of the fastest algorithm measured, and the
// worst ratio with its size.
func TestAutoScores(t *testing.T) {
	rs := fed(t, 8, configsNamed("auto", "auto-tuned", "hierarchical", "ring"), map[string][2][3]float64{
		"auto":         {{0.60, 5.0, 0.40}, {0.50, 6.0, 0.45}},
		"auto-tuned":   {{0.42, 2.05, 0.30}, {0.44, 2.4, 0.19}},
		"hierarchical": {{0.40, 4.0, 0.30}, {0.45, 4.5, 0.20}},
		"ring":         {{0.80, 2.0, 0.35}, {0.90, 2.5, 0.25}},
	})
	scores := autoScores(rs)
	// allreduce: auto 1.25 (4 B), 2.50 (8 KiB); auto-tuned 1.05, 1.025.
	// reduce_scatter 4 and reduce_scatter_block 8: all alike, 1.00.
	// allgather 4: auto 2.00, auto-tuned 0.95 (faster than the best
	// forced, within).
	want := []autoScore{
		{"MPI_Allreduce", "auto", 0, 2, 2.5, 8192},
		{"MPI_Allreduce", "auto-tuned", 2, 2, 1.05, 4},
		{"MPI_Reduce_scatter", "auto", 1, 1, 1, 4},
		{"MPI_Reduce_scatter", "auto-tuned", 1, 1, 1, 4},
		{"MPI_Reduce_scatter_block", "auto", 1, 1, 1, 8},
		{"MPI_Reduce_scatter_block", "auto-tuned", 1, 1, 1, 8},
		{"MPI_Allgather", "auto", 0, 1, 2, 4},
		{"MPI_Allgather", "auto-tuned", 1, 1, 0.95, 4},
	}
	if len(scores) != len(want) {
		t.Fatalf("scores %+v, want %+v", scores, want)
	}
	for i, s := range scores {
		w := want[i]
		if s.call != w.call || s.config != w.config || s.within != w.within || s.sizes != w.sizes || s.at != w.at || math.Abs(s.worst-w.worst) > 1e-9 {
			t.Errorf("score %d: %+v, want %+v", i, s, w)
		}
	}
	var b bytes.Buffer
	summarizeAuto(&b, scores)
	for _, line := range []string{
		"auto against the best measured algorithm (target: within 1.10 at every size):",
		"  MPI_Allreduce: auto 0 of 2 sizes within 1.10 (worst 2.50 at 8192 B): not met; auto-tuned 2 of 2 sizes within 1.10 (worst 1.05 at 4 B): met",
		"  MPI_Allgather: auto 0 of 1 sizes within 1.10 (worst 2.00 at 4 B): not met; auto-tuned 1 of 1 sizes within 1.10 (worst 0.95 at 4 B): met",
	} {
		if !slices.Contains(strings.Split(b.String(), "\n"), line) {
			t.Errorf("summary lacks the line %q:\n%s", line, b.String())
		}
	}
	if n := strings.Count(b.String(), "\n"); n != 5 {
		t.Errorf("summary has %d lines, want a heading and one per collective:\n%s", n, b.String())
	}
	b.Reset()
	summarizeAuto(&b, []autoScore{{call: "MPI_Allgather", config: "auto"}})
	if !strings.Contains(b.String(), "MPI_Allgather: auto no sizes measured\n") {
		t.Errorf("a collective without sizes: %s", b.String())
	}
}

// A size the model cannot price has "-" in its columns, not a ratio.
func TestModelTableGaps(t *testing.T) {
	rs := fed(t, 8, configsNamed("auto", "ring"), map[string][2][3]float64{
		"auto": {{1, 1, 1}, {1, 1, 1}}, "ring": {{2, 2, 2}, {2, 2, 2}},
	})
	var b bytes.Buffer
	modelTable(&b, rs, fakeModel(map[string]map[int64]float64{"ring": {4: 1}}, nil))
	out := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{"4 - - - 1.00 2.00", "8192 - - - - -"} {
		if !strings.Contains(out, want) {
			t.Errorf("model table lacks %q:\n%s", want, b.String())
		}
	}
}

// The model's error: measured/model of every configuration at every
// size from the threshold, its largest and median deviation from 1, and
// whether the largest is within 25%.
func TestModelErrors(t *testing.T) {
	rs := fed(t, 8, configsNamed("auto", "ring"), map[string][2][3]float64{
		"auto": {{0.50, 5.0, 0.40}, {0.60, 6.0, 0.45}},
		"ring": {{0.80, 2.0, 0.35}, {0.90, 2.5, 0.25}},
	})
	price := fakeModel(map[string]map[int64]float64{"ring": {4: 1.00, 8192: 2.50}}, map[string]map[int64]string{"auto": {4: "ring", 8192: "ring"}})
	errs := modelErrors(rs, price, 8192)
	// allreduce 8192 only: auto 5.00/2.50 = 2.00, ring 2.00/2.50 = 0.80.
	if len(errs) != 2 || errs[0].config != "auto" || errs[0].ratio != 2 || errs[1].config != "ring" || errs[1].ratio != 0.8 {
		t.Fatalf("errors from 8 KiB: %+v", errs)
	}
	var b bytes.Buffer
	summarizeErrors(&b, errs, 8192)
	for _, want := range []string{"over 2 configurations and sizes", "max 100% (allreduce auto 8192 B: measured/model 2.00)", "median 60%", "1 of 2 within 25%: target not met"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q: %s", want, b.String())
		}
	}
	// From 4 B: allreduce 4 (auto 0.50/1.00, ring 0.80/1.00), 8192 (as
	// above), reduce_scatter 4 (both 0.70/1.00), allgather 4 (auto 0.40,
	// ring 0.25): deviations 0.5, 0.2, 1.0, 0.2, 0.3, 0.3, 0.6, 0.75.
	b.Reset()
	summarizeErrors(&b, modelErrors(rs, price, 4), 4)
	if !strings.Contains(b.String(), "model error at >= 4 bytes") || !strings.Contains(b.String(), "over 8 configurations and sizes") || !strings.Contains(b.String(), "median 40%") {
		t.Errorf("summary from 4 B: %s", b.String())
	}
	b.Reset()
	summarizeErrors(&b, []modelError{{"ring", key{"allreduce", 1 << 20}, 1.2}, {"auto", key{"allreduce", 1 << 20}, 0.9}}, modelTargetMin)
	if !strings.Contains(b.String(), "max 20% (allreduce ring 1048576 B") || !strings.Contains(b.String(), "2 of 2 within 25%: target met") {
		t.Errorf("summary within the target: %s", b.String())
	}
	b.Reset()
	summarizeErrors(&b, nil, modelTargetMin)
	if !strings.Contains(b.String(), "model error at >= 65536 bytes: no sizes measured there") {
		t.Errorf("summary of nothing: %s", b.String())
	}
}

// The predictor prices the call collbench makes at each line's size (as
// its header says it measured: datatype, total or per rank) on the
// emulated node map, with the fitted machine; auto and auto-tuned as the
// algorithm each one's tuner chooses for that call: auto's decides
// beyond one node on the machine its jobs fit (no tuning file in the
// environment), for which gocoll-tune's fit stands, or with GOCOLL_FIT=0
// on model.Default; auto-tuned's on the fitted machine, read from the
// tuning file its runs get.
func TestPredictor(t *testing.T) {
	nodes := algorithms.NodeMapOf([]int{0, 0, 1, 1, 2, 2, 3, 3})
	m := model.Machine{Alpha: 50e-6, Beta: 8e-9, Gamma: 0.04e-9, Delta: 0.05e-9, NodeAlpha: 5e-6, NodeBeta: 0.2e-9, Sync: 1e-6}
	file := filepath.Join(t.TempDir(), "machine.json")
	fm := tuner.MachineOf(m)
	js, err := json.Marshal(tuner.File{Machine: &fm})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, js, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOCOLL_TUNING_FILE", "")
	t.Setenv("GOCOLL_FIT", "0")
	tuners, err := autoTuners(autoConfigs(file), m)
	if err != nil {
		t.Fatal(err)
	}
	if len(tuners) != 2 || tuners["auto"].Machine() != model.Default || tuners["auto-tuned"].Machine() != m {
		t.Fatalf("GOCOLL_FIT=0: tuners %v: want auto on model.Default, auto-tuned on the fitted machine", tuners)
	}
	t.Setenv("GOCOLL_FIT", "")
	if tuners, err = autoTuners(autoConfigs(file), m); err != nil {
		t.Fatal(err)
	}
	if len(tuners) != 2 || tuners["auto"].Machine() != m || tuners["auto-tuned"].Machine() != m {
		t.Fatalf("tuners %v: want both on the fitted machine (auto fits its own in the job)", tuners)
	}
	pr := newPredictor(m, nodes, tuners)
	float := head{"MPI_Allreduce", "MPI_FLOAT", "total"}
	for _, tc := range []struct {
		h      head
		k      key
		count  int
		counts []int
		elem   int
	}{
		{float, key{"allreduce", 8192}, 2048, nil, 4},
		{head{"MPI_Reduce_scatter", "MPI_FLOAT", "total"}, key{"reduce_scatter", 36}, 0, []int{2, 1, 1, 1, 1, 1, 1, 1}, 4},
		{head{"MPI_Reduce_scatter_block", "MPI_DOUBLE", "total"}, key{"reduce_scatter_block", 128}, 0, []int{2, 2, 2, 2, 2, 2, 2, 2}, 8},
		{head{"MPI_Allgather", "MPI_CHAR", "per-rank"}, key{"allgather", 4}, 0, []int{4, 4, 4, 4, 4, 4, 4, 4}, 1},
		{head{"MPI_Allgather", "MPI_CHAR", "total"}, key{"allgather", 64}, 0, []int{8, 8, 8, 8, 8, 8, 8, 8}, 1},
	} {
		coll, q, e, err := pr.call(tc.h, tc.k)
		if err != nil {
			t.Fatalf("%v: %v", tc.k, err)
		}
		p := q.Params
		if e != tc.elem || p.P != 8 || p.Nodes != nodes || p.Count != tc.count || !slices.Equal(p.Counts, tc.counts) || !p.Commutative || p.SharedMemory {
			t.Errorf("%v: element %d, params %+v; want count %d, counts %v", tc.k, e, p, tc.count, tc.counts)
		}
		if q.Bytes != int64(p.Total()*e) {
			t.Errorf("%v: the tuner sees %d bytes, want the whole vector or output, %d", tc.k, q.Bytes, p.Total()*e)
		}
		for _, a := range algorithms.All(coll) {
			if !a.IsSchedule() {
				continue
			}
			mm := m
			if a.SizeDependent { // hierarchical: its shm form, as the tuner prices it
				mm = m.ShmForm()
			}
			want := model.Algorithm(a, p, e, mm).Time * 1e6
			got, chose, ok := pr.price(tc.h, a.Name, tc.k)
			if !ok || got != want || chose != "" {
				t.Errorf("%v %s: %v µs %q (%v), want the model's %v", tc.k, a.Name, got, chose, ok, want)
			}
		}
		for name, tn := range tuners {
			ch, err := tn.Choose(q)
			if err != nil {
				t.Fatal(err)
			}
			want, _, _ := pr.price(tc.h, ch.Alg.Name, tc.k)
			got, chose, ok := pr.price(tc.h, name, tc.k)
			if !ok || chose != ch.Alg.Name || got != want {
				t.Errorf("%v %s: %v µs, chose %q; its tuner chooses %s (%v µs)", tc.k, name, got, chose, ch.Alg.Name, want)
			}
		}
	}
	if _, _, ok := pr.price(head{"MPI_Allreduce", "MPI_MYSTERY", "total"}, "ring", key{"allreduce", 64}); ok {
		t.Error("an unknown datatype was priced")
	}
}
