package main

import (
	"bytes"
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
// instead of quietly measuring another), and auto first; never the shm
// family, which needs one host.
func TestClusterConfigs(t *testing.T) {
	for _, c := range algorithms.Collectives {
		cs := clusterConfigs(c, nil, "bench")
		if cs[0].name != "auto" || len(cs[0].env) != 0 {
			t.Errorf("%v: first configuration %+v, want auto without variables", c, cs[0])
		}
		n := 0
		for _, a := range algorithms.All(c) {
			if !a.Direct {
				n++
			}
		}
		if len(cs) != n+1 {
			t.Errorf("%v: %d configurations, want auto and %d algorithms", c, len(cs), n)
		}
		for _, cfg := range cs[1:] {
			a, err := algorithms.Lookup(c, cfg.name)
			if err != nil || a.Direct {
				t.Errorf("%v: configuration %q: %v", c, cfg.name, err)
			}
			want := "GOCOLL_" + c.EnvName() + "_ALGORITHM=" + cfg.name
			if len(cfg.env) != 2 || cfg.env[0] != want || cfg.env[1] != "GOCOLL_FALLBACK=error" {
				t.Errorf("%v: %s: env %v", c, cfg.name, cfg.env)
			}
		}
	}
}

// fakeModel prices a configuration at a size from us[config][bytes] (the
// same for every collective), auto as the algorithm chose[bytes].
func fakeModel(us map[string]map[int64]float64, chose map[int64]string) modelFunc {
	return func(config string, k key) (float64, string, bool) {
		name := config
		if config == "auto" {
			name = chose[k.bytes]
		}
		v, ok := us[name][k.bytes]
		if config != "auto" {
			name = ""
		}
		return v, name, ok
	}
}

// The cluster table: every configuration's lowest time, the fastest
// algorithm, auto over it, and hierarchical over the fastest flat one;
// then the model's price of each, auto priced as what it chose, and
// measured/model.
func TestReportCluster(t *testing.T) {
	rs := fed(t, 8, configsNamed("auto", "hierarchical", "ring"), map[string][2][3]float64{
		"auto":         {{0.60, 5.0, 0.40}, {0.50, 6.0, 0.45}},
		"hierarchical": {{0.40, 4.0, 0.30}, {0.45, 4.5, 0.20}},
		"ring":         {{0.80, 2.0, 0.35}, {0.90, 2.5, 0.25}},
	})
	price := fakeModel(map[string]map[int64]float64{
		"hierarchical": {4: 0.50, 8192: 2.00},
		"ring":         {4: 1.00, 8192: 2.50},
	}, map[int64]string{4: "ring", 8192: "hierarchical"})
	var b bytes.Buffer
	reportCluster(&b, rs, price)
	out := strings.Join(strings.Fields(b.String()), " ") // the columns' padding aside
	for _, want := range []string{
		"np=8: the lowest of 2 repetitions",
		"bytes auto hierarchical ring best auto/best hierarchical/best-flat",
		// allreduce 4: auto 0.50, hierarchical 0.40 (best), ring 0.80:
		// auto/best 1.25, hierarchical/ring 0.50.
		"4 0.50 0.40 0.80 hierarchical 1.25 0.50",
		// 8 KiB: ring 2.00 is best; auto 5.00 (2.50x); hierarchical 4.00 (2.00x).
		"8192 5.00 4.00 2.00 ring 2.50 2.00",
		// allgather 4: hierarchical 0.20; auto 0.40 (2.00); ring 0.25 (0.80).
		"4 0.40 0.20 0.25 hierarchical 2.00 0.80",
		"MPI_Allreduce, the model: each configuration's price on the fitted machine (auto: of the algorithm it chose)",
		"bytes auto chose auto /model hierarchical /model ring /model",
		// allreduce 4: auto chose ring (1.00; measured 0.50), hierarchical
		// 0.50 (0.40), ring 1.00 (0.80).
		"4 ring 1.00 0.50 0.50 0.80 1.00 0.80",
		// 8 KiB: auto chose hierarchical (2.00; 5.00), hierarchical 2.00
		// (4.00), ring 2.50 (2.00).
		"8192 hierarchical 2.00 2.50 2.00 2.00 2.50 0.80",
		// allgather 4: auto 1.00 (0.40), hierarchical 0.50 (0.20), ring 1.00 (0.25).
		"4 ring 1.00 0.40 0.50 0.40 1.00 0.25",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
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
	price := fakeModel(map[string]map[int64]float64{"ring": {4: 1.00, 8192: 2.50}}, map[int64]string{4: "ring", 8192: "ring"})
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
// emulated node map, with the fitted machine; auto as the algorithm the
// tuner chooses for that call.
func TestPredictor(t *testing.T) {
	nodes := algorithms.NodeMapOf([]int{0, 0, 1, 1, 2, 2, 3, 3})
	m := model.Machine{Alpha: 50e-6, Beta: 8e-9, Gamma: 0.04e-9, Delta: 0.05e-9, NodeAlpha: 5e-6, NodeBeta: 0.2e-9, Sync: 1e-6}
	tn, err := tuner.New(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	pr := newPredictor(m, nodes, tn)
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
			if a.Direct {
				continue
			}
			want := model.Algorithm(a, p, e, m).Time * 1e6
			got, chose, ok := pr.price(tc.h, a.Name, tc.k)
			if !ok || got != want || chose != "" {
				t.Errorf("%v %s: %v µs %q (%v), want the model's %v", tc.k, a.Name, got, chose, ok, want)
			}
		}
		ch, err := tn.Choose(q)
		if err != nil {
			t.Fatal(err)
		}
		want, _, _ := pr.price(tc.h, ch.Alg.Name, tc.k)
		got, chose, ok := pr.price(tc.h, "auto", tc.k)
		if !ok || chose != ch.Alg.Name || got != want {
			t.Errorf("%v auto: %v µs, chose %q; the tuner chooses %s (%v µs)", tc.k, got, chose, ch.Alg.Name, want)
		}
	}
	if _, _, ok := pr.price(head{"MPI_Allreduce", "MPI_MYSTERY", "total"}, "ring", key{"allreduce", 64}); ok {
		t.Error("an unknown datatype was priced")
	}
}
