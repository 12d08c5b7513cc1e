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
)

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 255}, color.RGBA{0xff, 0x7f, 0x0e, 255}, color.RGBA{0x2c, 0xa0, 0x2c, 255},
	color.RGBA{0xd6, 0x27, 0x28, 255}, color.RGBA{0x94, 0x67, 0xbd, 255},
}

// plotCompare draws the lowest latency against size per collective, one
// line per configuration, titled with what was measured.
func plotCompare(prefix string, rs *runs) error {
	ext := ".svg"
	if filepath.Ext(prefix) == ".png" {
		ext, prefix = ".png", strings.TrimSuffix(prefix, ".png")
	}
	for _, coll := range rs.first.colls {
		h := rs.first.heads[coll]
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s, %s, %d ranks: time per call (barrier between calls)", h.call, h.dtype, rs.np)
		p.X.Label.Text, p.Y.Label.Text = "size ("+sizeWords(h)+")", "µs"
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = true, true
		for i, c := range rs.configs {
			var pts plotter.XYs
			for _, b := range rs.keys(coll) {
				if us, ok := rs.best(c, key{coll, b}); ok {
					pts = append(pts, plotter.XY{X: float64(b), Y: us})
				}
			}
			if len(pts) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			line.Color, points.Color = palette[i%len(palette)], palette[i%len(palette)]
			points.Shape = draw.CircleGlyph{}
			p.Add(line, points)
			p.Legend.Add(c, line, points)
		}
		if err := p.Save(7*vg.Inch, 4.5*vg.Inch, fmt.Sprintf("%s-np%d-%s%s", prefix, rs.np, coll, ext)); err != nil {
			return err
		}
	}
	return nil
}
