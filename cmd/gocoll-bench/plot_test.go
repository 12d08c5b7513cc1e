package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/internal/provenance"
)

// -replot reads what -csv writes (its header skipped) and the CSVs
// written before the size and barrier columns, and draws from them.
func TestReplot(t *testing.T) {
	dir := t.TempDir()
	results := []Result{
		{Collective: "MPI_Allgather", Algorithm: "ring", Datatype: "float32", Ranks: 2, Bytes: 8, MinUs: 1, MedianUs: 1.5, MaxUs: 2, AlgBW: 0.01, BusBW: 0.005, Check: "ok", Size: "per-rank", Barrier: true},
		{Collective: "MPI_Allgather", Algorithm: "ring", Datatype: "float32", Ranks: 2, Bytes: 64, MinUs: 2, MedianUs: 2.5, MaxUs: 3, AlgBW: 0.05, BusBW: 0.025, Check: "ok", Size: "per-rank", Barrier: true},
		{Collective: "MPI_Allgather", Algorithm: "shm", Datatype: "float32", Ranks: 2, Bytes: 8, MinUs: 0.5, MedianUs: 0.75, MaxUs: 1, AlgBW: 0.02, BusBW: 0.01, Check: "ok", Size: "per-rank", Barrier: true},
	}
	h := provenance.Header{Command: "gocoll-bench -csv x.csv", Commit: "abc1234", Machine: "m"}
	csv := filepath.Join(dir, "sweep.csv")
	if err := writeOutputs(results, options{csv: csv}, h); err != nil {
		t.Fatal(err)
	}
	back, from, err := readCSV(csv)
	if err != nil {
		t.Fatal(err)
	}
	if from != h {
		t.Errorf("header %+v, want %+v", from, h)
	}
	if len(back) != len(results) {
		t.Fatalf("%d results back, want %d", len(back), len(results))
	}
	for i := range back {
		if back[i] != results[i] {
			t.Errorf("result %d: %+v, want %+v", i, back[i], results[i])
		}
	}
	old := filepath.Join(dir, "old.csv")
	os.WriteFile(old, []byte("collective,algorithm,datatype,ranks,bytes,min_us,median_us,max_us,algbw_gbs,busbw_gbs,check\n"+
		"MPI_Allreduce,ring,float32,2,8,0.785,1.470,3.779,0.0054,0.0054,ok\n"), 0o644)
	if r, _, err := readCSV(old); err != nil || len(r) != 1 || r[0].Size != "total" || r[0].Barrier || r[0].MedianUs != 1.47 {
		t.Errorf("old CSV: %+v, %v", r, err)
	}
	if err := replot(csv, filepath.Join(dir, "sweep")); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "sweep-allgather-float32.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(svg, []byte("data: "+csv+", made by: command: gocoll-bench -csv x.csv")) {
		t.Errorf("SVG head:\n%s", svg[:min(len(svg), 600)])
	}
	f := sweepFigure(back)
	if !strings.Contains(f.Subtitle, "a barrier before every call") || !strings.Contains(f.Subtitle, "what each rank sends") {
		t.Errorf("subtitle %q", f.Subtitle)
	}
}
