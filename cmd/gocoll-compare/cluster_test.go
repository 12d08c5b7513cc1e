package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
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

// The cluster table: every configuration's lowest time, the fastest
// algorithm, auto over it, and hierarchical over the fastest flat one.
func TestReportCluster(t *testing.T) {
	rs := fed(t, 8, configsNamed("auto", "hierarchical", "ring"), map[string][2][3]float64{
		"auto":         {{0.60, 5.0, 0.40}, {0.50, 6.0, 0.45}},
		"hierarchical": {{0.40, 4.0, 0.30}, {0.45, 4.5, 0.20}},
		"ring":         {{0.80, 2.0, 0.35}, {0.90, 2.5, 0.25}},
	})
	var b bytes.Buffer
	reportCluster(&b, rs)
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
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
