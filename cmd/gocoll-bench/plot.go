package main

import (
	"fmt"
	"image/color"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// plotResults draws, per collective and datatype, latency and bus
// bandwidth against message size, one line per algorithm, side by side.
// prefix "out/sweep" gives out/sweep-allreduce-float32.svg; a prefix
// ending in .png gives PNG files.
func plotResults(results []Result, prefix string) error {
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
		lat, bw := plot.New(), plot.New()
		name := strings.ToLower(strings.TrimPrefix(k.coll, "MPI_"))
		p := groups[k][0].Ranks
		lat.Title.Text = fmt.Sprintf("%s, %s, %d ranks: latency", k.coll, k.typ, p)
		bw.Title.Text = fmt.Sprintf("%s, %s, %d ranks: bus bandwidth", k.coll, k.typ, p)
		lat.X.Label.Text, bw.X.Label.Text = "message size (bytes)", "message size (bytes)"
		lat.Y.Label.Text, bw.Y.Label.Text = "time per call (µs)", "busbw (GB/s)"
		for _, pl := range []*plot.Plot{lat, bw} {
			pl.X.Scale = plot.LogScale{}
			pl.X.Tick.Marker = plot.LogTicks{Prec: -1}
			pl.Add(plotter.NewGrid())
			pl.Legend.Top, pl.Legend.Left = true, true
		}
		lat.Y.Scale = plot.LogScale{}
		lat.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		byAlg := map[string][2]plotter.XYs{}
		var algs []string
		for _, r := range groups[k] {
			if _, ok := byAlg[r.Algorithm]; !ok {
				algs = append(algs, r.Algorithm)
			}
			v := byAlg[r.Algorithm]
			v[0] = append(v[0], plotter.XY{X: float64(r.Bytes), Y: r.MedianUs})
			v[1] = append(v[1], plotter.XY{X: float64(r.Bytes), Y: r.BusBW})
			byAlg[r.Algorithm] = v
		}
		for i, a := range algs {
			for j, pl := range []*plot.Plot{lat, bw} {
				line, points, err := plotter.NewLinePoints(byAlg[a][j])
				if err != nil {
					return err
				}
				c := palette[i%len(palette)]
				line.Color, points.Color = c, c
				points.Shape = draw.CircleGlyph{}
				pl.Add(line, points)
				if j == 0 {
					lat.Legend.Add(a, line, points)
				} else {
					bw.Legend.Add(a, line, points)
				}
			}
		}
		if err := save([]*plot.Plot{lat, bw}, fmt.Sprintf("%s-%s-%s%s", prefix, name, k.typ, ext)); err != nil {
			return err
		}
	}
	return nil
}

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 255}, color.RGBA{0xff, 0x7f, 0x0e, 255}, color.RGBA{0x2c, 0xa0, 0x2c, 255},
	color.RGBA{0xd6, 0x27, 0x28, 255}, color.RGBA{0x94, 0x67, 0xbd, 255}, color.RGBA{0x8c, 0x56, 0x4b, 255},
}

// save lays the plots out side by side in one file.
func save(plots []*plot.Plot, path string) error {
	w, h := vg.Length(len(plots))*6*vg.Inch, 4.5*vg.Inch
	var c draw.Canvas
	var write func() error
	if strings.HasSuffix(path, ".png") {
		img := vgimg.New(w, h)
		c = draw.New(img)
		write = func() error { return writeTo(path, vgimg.PngCanvas{Canvas: img}) }
	} else {
		svg := vgsvg.New(w, h)
		c = draw.New(svg)
		write = func() error { return writeTo(path, svg) }
	}
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Inch / 4}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, c)
	for i, p := range plots {
		p.Draw(canvases[0][i])
	}
	return write()
}
