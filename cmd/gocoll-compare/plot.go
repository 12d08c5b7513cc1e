package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gocoll/gocoll/internal/figure"
	"github.com/gocoll/gocoll/internal/provenance"
)

// plotCompare draws, per collective, PREFIX-npN-COLLECTIVE.svg (.png
// with a prefix ending in .png): on the left each configuration's lowest
// time per call against the size; on the right the ratios users compare,
// gocoll over the faster host MPI and each host under the preload over
// the same host alone (on the emulated cluster: auto and auto-tuned over
// the fastest algorithm), with the line at 1.0. h heads the SVG.
func plotCompare(prefix string, rs *runs, h provenance.Header) error {
	ext := ".svg"
	if filepath.Ext(prefix) == ".png" {
		ext, prefix = ".png", strings.TrimSuffix(prefix, ".png")
	}
	for _, coll := range rs.first.colls {
		if err := compareFigure(rs, coll).Write(fmt.Sprintf("%s-np%d-%s%s", prefix, rs.np, coll, ext), h); err != nil {
			return err
		}
	}
	return nil
}

// compareFigure is the figure of one collective of rs.
func compareFigure(rs *runs, coll string) figure.Figure {
	h := rs.first.heads[coll]
	cluster := len(autosOf(rs.configs)) > 0
	where := fmt.Sprintf("%d ranks", rs.np)
	if cluster {
		where += " on an emulated cluster"
	}
	f := figure.Figure{
		Title: fmt.Sprintf("%s, %s, %s", h.call, h.dtype, where),
		Subtitle: "µs per call, the lowest of interleaved repetitions, an MPI_Barrier before every call (bench/collbench.c)\n" +
			"size: " + sizeWords(h),
	}
	xlabel := "message size (the whole vector)"
	if h.size == "per-rank" {
		xlabel = "message size (what each rank sends)"
	}
	times := figure.Panel{Title: "time per call", XLabel: xlabel, YLabel: "µs per call", LogY: true}
	colors := configColors(rs.configs)
	for _, c := range rs.configs {
		s := figure.Series{Name: c, Color: colors[c], Dashed: strings.HasSuffix(c, "+preload")}
		for _, b := range rs.keys(coll) {
			if us, ok := rs.best(c, key{coll, b}); ok {
				s.Points = append(s.Points, figure.Point{X: float64(b), Y: us})
			}
		}
		times.Series = append(times.Series, s)
	}
	ratios := figure.Panel{XLabel: xlabel, LogY: true, Ref: 1}
	ratio := func(name string, color int, dashed bool, r func(key) (float64, bool)) {
		s := figure.Series{Name: name, Color: color, Dashed: dashed}
		for _, b := range rs.keys(coll) {
			if v, ok := r(key{coll, b}); ok {
				s.Points = append(s.Points, figure.Point{X: float64(b), Y: v})
			}
		}
		if len(s.Points) > 0 {
			ratios.Series = append(ratios.Series, s)
		}
	}
	if cluster {
		algs := slices.DeleteFunc(slices.Clone(rs.configs), isAuto)
		ratios.Title, ratios.YLabel = "against the fastest algorithm", "ratio (below 1: faster)"
		ratios.RefName = "1.0 = the fastest algorithm at that size"
		for _, a := range autosOf(rs.configs) {
			ratio(a+" / the fastest algorithm", colors[a], false, func(k key) (float64, bool) { return rs.overBest(a, algs, k) })
		}
	} else {
		var hosts []string
		for _, n := range []string{"openmpi", "mpich"} {
			if slices.Contains(rs.configs, n) {
				hosts = append(hosts, n)
			}
		}
		faster := "the faster host"
		if len(hosts) == 1 {
			faster = hosts[0]
		}
		ratios.Title, ratios.YLabel = "against "+faster, "ratio (below 1: faster)"
		ratios.RefName = "1.0 = " + faster
		if len(hosts) > 0 && slices.Contains(rs.configs, "gocoll") {
			ratio("gocoll / "+faster, colors["gocoll"], false, func(k key) (float64, bool) { return rs.overBest("gocoll", hosts, k) })
		}
		for _, host := range hosts {
			pre := host + "+preload"
			if slices.Contains(rs.configs, pre) && len(hosts) > 1 {
				ratios.RefName = "1.0 = " + faster + " (+preload: its host alone)"
			}
			if slices.Contains(rs.configs, pre) {
				ratio(pre+" / "+host, colors[pre], true, func(k key) (float64, bool) { return rs.ratio(pre, host, k) })
			}
		}
	}
	f.Panels = []figure.Panel{times, ratios}
	return f
}

// configColors gives each configuration its colour: a host and the
// same host under the preload share one (the preload's line dashed),
// gocoll and auto the first; the others follow in turn.
func configColors(configs []string) map[string]int {
	fixed := map[string]int{"gocoll": 0, "auto": 0, "openmpi": 1, "mpich": 2, "auto-tuned": 3}
	out := map[string]int{}
	next := 4
	for _, c := range configs {
		base := strings.TrimSuffix(c, "+preload")
		if i, ok := fixed[base]; ok {
			out[c] = i
			continue
		}
		if _, ok := out[base]; !ok {
			out[base] = next
			next++
		}
		out[c] = out[base]
	}
	return out
}

// readCSV reads what -csv wrote (its # lines skipped: the provenance
// header) back into one runs per rank count, in the file's order, each
// configuration's lowest time as its one sample, and returns the file's
// header. A file without one gets the zero Header.
func readCSV(path string) ([]*runs, provenance.Header, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, provenance.Header{}, err
	}
	h, _, _ := provenance.Parse(string(data))
	var out []*runs
	byNP := map[int]*runs{}
	want := []string{"np", "config", "collective", "datatype", "size", "bytes", "min_us"}
	err = provenance.Rows(path, string(data), want, func(line int, field func(string) string) error {
		np, err1 := strconv.Atoi(field("np"))
		b, err2 := strconv.ParseInt(field("bytes"), 10, 64)
		us, err3 := strconv.ParseFloat(field("min_us"), 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return fmt.Errorf("%s:%d: bad number", path, line)
		}
		c, coll := field("config"), field("collective")
		call, err := collectiveOf(coll)
		if err != nil {
			return fmt.Errorf("%s:%d: %v", path, line, err)
		}
		rs := byNP[np]
		if rs == nil {
			rs = &runs{np: np, reps: 1, samples: map[string]map[key][]float64{}}
			rs.first.heads = map[string]head{}
			byNP[np] = rs
			out = append(out, rs)
		}
		if _, ok := rs.samples[c]; !ok {
			rs.configs = append(rs.configs, c)
			rs.samples[c] = map[key][]float64{}
		}
		if _, ok := rs.first.heads[coll]; !ok {
			rs.first.colls = append(rs.first.colls, coll)
			rs.first.heads[coll] = head{call: call.String(), dtype: field("datatype"), size: field("size")}
		}
		rs.samples[c][key{coll, b}] = append(rs.samples[c][key{coll, b}], us)
		return nil
	})
	return out, h, err
}

// replot draws the plots of the CSV at path (-replot) into -plot's
// prefix, without measuring: each SVG headed by this command and the
// CSV's own header.
func replot(path, prefix string) error {
	if prefix == "" {
		return fmt.Errorf("-replot needs -plot PREFIX")
	}
	all, from, err := readCSV(path)
	if err != nil {
		return err
	}
	h := provenance.New("").From(path, from)
	for _, rs := range all {
		if err := plotCompare(prefix, rs, h); err != nil {
			return err
		}
	}
	return nil
}
