package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/internal/figure"
	"github.com/gocoll/gocoll/internal/provenance"
)

// The plot's right panel has the ratios the table prints: gocoll over the
// faster host and each preload over its host, and the line at 1.0.
func TestCompareFigure(t *testing.T) {
	rs := fed(t, 8, five, map[string][2][3]float64{
		"gocoll":          {{0.60, 5.0, 0.40}, {0.50, 6.0, 0.45}},
		"openmpi":         {{0.40, 4.0, 0.30}, {0.45, 4.5, 0.20}},
		"mpich":           {{0.80, 2.0, 0.35}, {0.90, 2.5, 0.25}},
		"openmpi+preload": {{0.44, 4.4, 0.22}, {0.50, 4.0, 0.30}},
		"mpich+preload":   {{1.60, 2.2, 0.25}, {1.70, 3.0, 0.50}},
	})
	f := compareFigure(rs, "allreduce")
	if f.Title != "MPI_Allreduce, MPI_FLOAT, 8 ranks" || len(f.Panels) != 2 {
		t.Fatalf("title %q, %d panels", f.Title, len(f.Panels))
	}
	times, ratios := f.Panels[0], f.Panels[1]
	if len(times.Series) != 5 || !times.LogY {
		t.Errorf("time panel: %d series, log %v", len(times.Series), times.LogY)
	}
	if ratios.Ref != 1 || !strings.HasPrefix(ratios.RefName, "1.0 = the faster host") {
		t.Errorf("reference %v %q", ratios.Ref, ratios.RefName)
	}
	got := map[string][]figure.Point{}
	for _, s := range ratios.Series {
		got[s.Name] = s.Points
	}
	// The table's rows (TestReport): allreduce 4 B 1.25 1.10 2.00, 8 KiB 2.50 1.00 1.10.
	for name, want := range map[string][]figure.Point{
		"gocoll / the faster host":  {{X: 4, Y: 1.25}, {X: 8192, Y: 2.5}},
		"openmpi+preload / openmpi": {{X: 4, Y: 1.1}, {X: 8192, Y: 1}},
		"mpich+preload / mpich":     {{X: 4, Y: 2}, {X: 8192, Y: 1.1}},
	} {
		p := got[name]
		if len(p) != len(want) {
			t.Errorf("%s: %v, want %v", name, p, want)
			continue
		}
		for i := range p {
			if p[i].X != want[i].X || p[i].Y < want[i].Y-1e-9 || p[i].Y > want[i].Y+1e-9 {
				t.Errorf("%s: %v, want %v", name, p, want)
			}
		}
	}
}

// The emulated cluster's plot sets auto and auto-tuned against the
// fastest algorithm.
func TestClusterFigure(t *testing.T) {
	rs := fed(t, 8, configsNamed("auto", "auto-tuned", "ring", "rabenseifner"), map[string][2][3]float64{
		"auto":         {{2, 20, 2}, {2, 20, 2}},
		"auto-tuned":   {{1, 10, 1}, {1, 10, 1}},
		"ring":         {{1, 10, 1}, {1, 10, 1}},
		"rabenseifner": {{4, 5, 4}, {4, 5, 4}},
	})
	ratios := compareFigure(rs, "allreduce").Panels[1]
	var names []string
	for _, s := range ratios.Series {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != "auto / the fastest algorithm,auto-tuned / the fastest algorithm" {
		t.Errorf("series %q", names)
	}
	if p := ratios.Series[0].Points; len(p) != 2 || p[0].Y != 2 || p[1].Y != 4 {
		t.Errorf("auto / best: %v, want 2 at 4 B, 4 at 8 KiB", p)
	}
}

// -replot draws from the CSV -csv wrote, its # lines skipped, and heads
// each SVG with this command and the CSV's header.
func TestReplot(t *testing.T) {
	rs := fed(t, 2, five, map[string][2][3]float64{
		"gocoll":          {{0.60, 5.0, 0.40}, {0.50, 6.0, 0.45}},
		"openmpi":         {{0.40, 4.0, 0.30}, {0.45, 4.5, 0.20}},
		"mpich":           {{0.80, 2.0, 0.35}, {0.90, 2.5, 0.25}},
		"openmpi+preload": {{0.44, 4.4, 0.22}, {0.50, 4.0, 0.30}},
		"mpich+preload":   {{1.60, 2.2, 0.25}, {1.70, 3.0, 0.50}},
	})
	dir := t.TempDir()
	h := provenance.Header{Command: "gocoll-compare -np 2 -csv x.csv", Commit: "abc1234", Machine: "a machine"}
	var csv bytes.Buffer
	csv.WriteString(h.Comment())
	csv.WriteString("np,config,collective,datatype,size,bytes,min_us,median_us\n")
	csvRows(&csv, rs, nil)
	path := filepath.Join(dir, "compare-np2.csv")
	if err := os.WriteFile(path, csv.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	back, from, err := readCSV(path)
	if err != nil {
		t.Fatal(err)
	}
	if from != h || len(back) != 1 || back[0].np != 2 || strings.Join(back[0].configs, " ") != strings.Join(rs.configs, " ") {
		t.Fatalf("read back %+v, header %+v", back, from)
	}
	for _, coll := range rs.first.colls {
		if back[0].first.heads[coll] != rs.first.heads[coll] {
			t.Errorf("%s: head %+v, want %+v", coll, back[0].first.heads[coll], rs.first.heads[coll])
		}
		for _, c := range rs.configs {
			for _, b := range rs.keys(coll) {
				want, _ := rs.best(c, key{coll, b})
				if got, _ := back[0].best(c, key{coll, b}); got != want {
					t.Errorf("%s %s %d: %v, want %v", coll, c, b, got, want)
				}
			}
		}
	}
	if err := replot(path, filepath.Join(dir, "compare")); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "compare-np2-allreduce.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(svg, []byte("<?xml")) || !bytes.Contains(svg, []byte("data: "+path+", made by: command: gocoll-compare -np 2 -csv x.csv; commit: abc1234")) {
		t.Errorf("SVG head:\n%s", svg[:min(len(svg), 600)])
	}
	if err := replot(path, ""); err == nil {
		t.Error("-replot without -plot: no error")
	}
}
