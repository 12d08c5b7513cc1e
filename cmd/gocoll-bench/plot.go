package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gocoll/gocoll/internal/figure"
	"github.com/gocoll/gocoll/internal/provenance"
)

// plotResults draws, per collective and datatype, the time per call and
// the bus bandwidth against message size, one line per algorithm, side
// by side, with one legend below them; h heads each SVG. prefix
// "out/sweep" gives out/sweep-allreduce-float32.svg; a prefix ending in
// .png gives PNG files.
func plotResults(results []Result, prefix string, h provenance.Header) error {
	ext := ".svg"
	if filepath.Ext(prefix) == ".png" {
		ext, prefix = ".png", strings.TrimSuffix(prefix, ".png")
	}
	type key struct{ coll, typ string }
	groups := map[key][]Result{}
	var order []key
	for _, r := range results {
		k := key{r.Collective, r.Datatype}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	for _, k := range order {
		name := strings.ToLower(strings.TrimPrefix(k.coll, "MPI_"))
		if err := sweepFigure(groups[k]).Write(fmt.Sprintf("%s-%s-%s%s", prefix, name, k.typ, ext), h); err != nil {
			return err
		}
	}
	return nil
}

// sweepFigure is the figure of one collective and datatype.
func sweepFigure(rs []Result) figure.Figure {
	r0 := rs[0]
	pattern := "calls back to back, the slowest rank's mean"
	if r0.Barrier {
		pattern = "a barrier before every call, each rank's mean averaged over the ranks"
	}
	size, xlabel := "the whole vector", "message size (the whole vector)"
	if r0.Collective == "MPI_Allgather" {
		size, xlabel = "the whole output", "message size (the whole output)"
		if r0.Size == "per-rank" {
			size, xlabel = "what each rank sends", "message size (what each rank sends)"
		}
	}
	f := figure.Figure{
		Title: fmt.Sprintf("%s, %s, %d ranks: every algorithm", r0.Collective, r0.Datatype, r0.Ranks),
		Subtitle: "gocoll-bench: median µs per call over repetitions, " + pattern + "\n" +
			"size: " + size + "; busbw as nccl-tests counts it",
		SharedLegend: true,
	}
	lat := figure.Panel{Title: "time per call", XLabel: xlabel, YLabel: "µs per call (median)", LogY: true}
	bw := figure.Panel{Title: "bus bandwidth", XLabel: xlabel, YLabel: "busbw (GB/s)"}
	var algs []string
	byAlg := map[string][2][]figure.Point{}
	for _, r := range rs {
		if _, ok := byAlg[r.Algorithm]; !ok {
			algs = append(algs, r.Algorithm)
		}
		v := byAlg[r.Algorithm]
		v[0] = append(v[0], figure.Point{X: float64(r.Bytes), Y: r.MedianUs})
		v[1] = append(v[1], figure.Point{X: float64(r.Bytes), Y: r.BusBW})
		byAlg[r.Algorithm] = v
	}
	for i, a := range algs {
		lat.Series = append(lat.Series, figure.Series{Name: a, Color: i, Points: byAlg[a][0]})
		bw.Series = append(bw.Series, figure.Series{Name: a, Color: i, Points: byAlg[a][1]})
	}
	f.Panels = []figure.Panel{lat, bw}
	return f
}

// readCSV reads what -csv wrote back into results (its # lines skipped:
// the provenance header), with the file's header. Files written before
// the size and barrier columns were added read as back to back, sizes
// the whole vector or output.
func readCSV(path string) ([]Result, provenance.Header, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, provenance.Header{}, err
	}
	h, _, _ := provenance.Parse(string(data))
	var out []Result
	want := []string{"collective", "algorithm", "datatype", "ranks", "bytes", "median_us", "busbw_gbs"}
	err = provenance.Rows(path, string(data), want, func(line int, field func(string) string) error {
		var err error
		num := func(name string) float64 {
			v, e := strconv.ParseFloat(field(name), 64)
			if e != nil && field(name) != "" && err == nil {
				err = fmt.Errorf("%s:%d: %s: %q is not a number", path, line, name, field(name))
			}
			return v
		}
		r := Result{
			Collective: field("collective"), Algorithm: field("algorithm"), Datatype: field("datatype"),
			Ranks: int(num("ranks")), Bytes: int64(num("bytes")),
			MinUs: num("min_us"), MedianUs: num("median_us"), MaxUs: num("max_us"),
			AlgBW: num("algbw_gbs"), BusBW: num("busbw_gbs"), Check: field("check"),
			Size: field("size"), Barrier: field("barrier") == "true",
		}
		if r.Size == "" {
			r.Size = "total"
		}
		out = append(out, r)
		return err
	})
	return out, h, err
}

// replot draws -plot's plots from the CSV at path (-replot), measuring
// nothing: each SVG headed by this command and the CSV's own header.
func replot(path, prefix string) error {
	if prefix == "" {
		return fmt.Errorf("-replot needs -plot PREFIX")
	}
	results, from, err := readCSV(path)
	if err != nil {
		return err
	}
	return plotResults(results, prefix, provenance.New("").From(path, from))
}
