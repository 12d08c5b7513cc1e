package main

import (
	"fmt"
	"image/color"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 255}, color.RGBA{0xff, 0x7f, 0x0e, 255}, color.RGBA{0x2c, 0xa0, 0x2c, 255},
	color.RGBA{0xd6, 0x27, 0x28, 255}, color.RGBA{0x94, 0x67, 0xbd, 255},
}

// plotCompare draws latency against size per collective, one line per
// configuration.
func plotCompare(prefix string, np int, configs []config, best map[string]map[key]float64) error {
	ext := ".svg"
	if filepath.Ext(prefix) == ".png" {
		ext, prefix = ".png", strings.TrimSuffix(prefix, ".png")
	}
	colls := map[string]bool{}
	for k := range best["gocoll"] {
		colls[k.coll] = true
	}
	for coll := range colls {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("MPI_%s, %d ranks: time per call", coll, np)
		p.X.Label.Text, p.Y.Label.Text = "message size (bytes)", "µs"
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = true, true
		for i, c := range configs {
			var pts plotter.XYs
			for k, us := range best[c.name] {
				if k.coll == coll {
					pts = append(pts, plotter.XY{X: float64(k.bytes), Y: us})
				}
			}
			slices.SortFunc(pts, func(a, b plotter.XY) int { return int(a.X - b.X) })
			line, points, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			line.Color, points.Color = palette[i%len(palette)], palette[i%len(palette)]
			points.Shape = draw.CircleGlyph{}
			p.Add(line, points)
			p.Legend.Add(c.name, line, points)
		}
		if err := p.Save(7*vg.Inch, 4.5*vg.Inch, fmt.Sprintf("%s-np%d-%s%s", prefix, np, coll, ext)); err != nil {
			return err
		}
	}
	return nil
}
