// Package figure draws the plots of results/ (gocoll-compare's and
// gocoll-bench's) in one layout, made to be read by people who would
// rather look than read a table: a title and a subtitle above, panels
// side by side sharing the message-size axis (log2, in B, KiB, MiB),
// and the legends below the panels, never over the data. A panel may
// draw a reference line (the ratio 1.0), named in its legend. An SVG is
// headed by its provenance (internal/provenance); a path ending in .png
// gives a PNG of the same drawing.
package figure

import (
	"bytes"
	"cmp"
	"image/color"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/gocoll/gocoll/internal/provenance"
)

// Palette are the series' colours by index (Tableau's ten, which stay
// apart for most readers and in print).
var Palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 255}, color.RGBA{0xff, 0x7f, 0x0e, 255}, color.RGBA{0x2c, 0xa0, 0x2c, 255},
	color.RGBA{0xd6, 0x27, 0x28, 255}, color.RGBA{0x94, 0x67, 0xbd, 255}, color.RGBA{0x8c, 0x56, 0x4b, 255},
	color.RGBA{0xe3, 0x77, 0xc2, 255}, color.RGBA{0x7f, 0x7f, 0x7f, 255}, color.RGBA{0xbc, 0xbd, 0x22, 255},
	color.RGBA{0x17, 0xbe, 0xcf, 255},
}

// Point is one measurement: X the message size in bytes, Y the value.
type Point struct{ X, Y float64 }

// Series is one line of a panel.
type Series struct {
	Name   string
	Color  int  // index into Palette
	Dashed bool // e.g. a host MPI under the preload, beside the host alone
	Points []Point
}

// Panel is one plot of the figure.
type Panel struct {
	Title  string // above the panel, short
	XLabel string
	YLabel string
	LogY   bool
	Series []Series
	// Ref, if RefName is not "", is drawn as a horizontal grey line at
	// y = Ref and named in the legend: "1.0 = the faster host".
	Ref     float64
	RefName string
}

// Figure is what is drawn into one file.
type Figure struct {
	Title    string // one line, short enough to fit
	Subtitle string // the details, on one or more lines ("\n")
	Panels   []Panel
	// SharedLegend draws one legend for all panels, from the first
	// panel's series (panels that show the same series in the same
	// colours); otherwise each panel has its own below it.
	SharedLegend bool
}

// Size of one panel; the figure is as wide as its panels.
const (
	panelWidth  = 5.2 * vg.Inch
	panelHeight = 3.6 * vg.Inch
	margin      = 0.15 * vg.Inch
)

func textStyle(size vg.Length) text.Style {
	return text.Style{Color: color.Black, Font: font.From(plot.DefaultFont, size), Handler: plot.DefaultTextHandler}
}

// Write draws f into path (.svg, or .png), an SVG headed by h.
func (f Figure) Write(path string, h provenance.Header) error {
	title, sub, leg := textStyle(15), textStyle(10.5), textStyle(10)
	subLines := strings.Split(f.Subtitle, "\n")
	if f.Subtitle == "" {
		subLines = nil
	}
	titleH := title.Height(f.Title) + margin + vg.Length(len(subLines))*sub.Height("M")*1.25 + margin/2

	plots := make([]*plot.Plot, len(f.Panels))
	legends := make([][]legendEntry, len(f.Panels))
	for i, pn := range f.Panels {
		p, entries, err := pn.plot()
		if err != nil {
			return err
		}
		plots[i], legends[i] = p, entries
	}
	if f.SharedLegend && len(legends) > 0 {
		legends = [][]legendEntry{legends[0]}
	}
	w := vg.Length(len(f.Panels))*panelWidth + 2*margin
	legendW := w - 2*margin
	if !f.SharedLegend && len(f.Panels) > 0 {
		legendW = panelWidth - margin
	}
	legendH := vg.Length(0)
	for _, es := range legends {
		legendH = max(legendH, legendHeight(es, leg, legendW, f.SharedLegend))
	}
	hgt := titleH + panelHeight + legendH + 2*margin

	var c draw.Canvas
	var write func() error
	if strings.HasSuffix(path, ".png") {
		img := vgimg.NewWith(vgimg.UseWH(w, hgt), vgimg.UseDPI(120))
		c = draw.New(img)
		write = func() error { return writeTo(path, vgimg.PngCanvas{Canvas: img}, nil) }
	} else {
		svg := vgsvg.New(w, hgt)
		c = draw.New(svg)
		write = func() error {
			return writeTo(path, svg, func(b []byte) []byte { return provenance.SVG(b, h) })
		}
	}
	c.SetColor(color.White)
	c.Fill(c.Rectangle.Path())

	// The title and subtitle, centred above the panels.
	y := c.Max.Y - margin - title.Height(f.Title)
	title.XAlign = draw.XCenter
	c.FillText(title, vg.Point{X: c.Center().X, Y: y}, f.Title)
	sub.XAlign = draw.XCenter
	for _, l := range subLines {
		y -= sub.Height("M") * 1.25
		c.FillText(sub, vg.Point{X: c.Center().X, Y: y}, l)
	}

	// The panels, their data areas aligned, each titled above its data.
	ptitle := textStyle(12)
	ptitle.XAlign = draw.XCenter
	ptitleH := ptitle.Height("M") + margin
	area := draw.Crop(c, margin, -margin, margin+legendH, -titleH-ptitleH)
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: 0.35 * vg.Inch}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, area)
	for i, p := range plots {
		p.Draw(canvases[0][i])
		data := p.DataCanvas(canvases[0][i])
		c.FillText(ptitle, vg.Point{X: data.Center().X, Y: area.Max.Y + margin/2}, f.Panels[i].Title)
		yLabel(c, p, canvases[0][i].Min.X, data.Center().Y, f.Panels[i].YLabel)
	}

	// The legends below.
	for i, es := range legends {
		// Under its panel's data, or from the first panel's data across.
		lc := draw.Crop(c, margin, -margin, margin, 0)
		data := plots[i].DataCanvas(canvases[0][i])
		lc.Min.X = data.Min.X
		if !f.SharedLegend {
			lc.Max.X = max(data.Max.X, data.Min.X+legendW)
		}
		lc.Max.Y = lc.Min.Y + legendH
		drawLegend(lc, es, leg, f.SharedLegend)
	}
	return write()
}

// plot makes the gonum plot of a panel (no legend of its own) and its
// legend's entries.
func (pn Panel) plot() (*plot.Plot, []legendEntry, error) {
	p := plot.New()
	p.X.Label.Text = pn.XLabel
	p.X.Label.TextStyle.Font.Size, p.Y.Label.TextStyle.Font.Size = 11, 11
	// gonum/plot places a centred y label's glyph box at the middle of
	// the data values, not of the axis: on a log axis near its top, where
	// it shrinks the data area to make room. A blank label of the same
	// font keeps the label's room; Write draws the text (yLabel).
	p.Y.Label.Text = " "
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = byteTicks{}
	if pn.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
		if pn.RefName != "" {
			p.Y.Tick.Marker = ratioTicks{}
		}
	}
	p.Add(plotter.NewGrid())
	var entries []legendEntry
	lo, hi := math.Inf(1), math.Inf(-1)
	xlo, xhi := math.Inf(1), math.Inf(-1)
	for _, s := range pn.Series {
		var pts plotter.XYs
		for _, q := range s.Points {
			if q.X > 0 && (q.Y > 0 || !pn.LogY) && !math.IsInf(q.Y, 0) && !math.IsNaN(q.Y) {
				pts = append(pts, plotter.XY{X: q.X, Y: q.Y})
				lo, hi = min(lo, q.Y), max(hi, q.Y)
				xlo, xhi = min(xlo, q.X), max(xhi, q.X)
			}
		}
		if len(pts) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, nil, err
		}
		col := Palette[s.Color%len(Palette)]
		line.Color, points.Color = col, col
		line.Width = vg.Points(1.5)
		if s.Dashed {
			line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			points.Shape = draw.RingGlyph{}
		} else {
			points.Shape = draw.CircleGlyph{}
		}
		points.Radius = vg.Points(2.5)
		p.Add(line, points)
		entries = append(entries, legendEntry{s.Name, []plot.Thumbnailer{line, points}})
	}
	if xlo == xhi {
		// One size: a log axis needs a range around it.
		p.X.Min, p.X.Max = xlo/2, xhi*2
	}
	if !pn.LogY && pn.RefName == "" {
		p.Y.Min = 0 // a bandwidth from nothing
	}
	if pn.LogY && pn.RefName == "" && lo > 0 && !math.IsInf(lo, 0) {
		// Down to the decade below the data, so that the lowest values
		// have a labelled tick under them.
		p.Y.Min = math.Pow10(int(math.Floor(math.Log10(lo))))
		if p.Y.Min >= hi {
			p.Y.Max = hi * 2
		}
	}
	if pn.RefName != "" {
		// The reference, drawn across the data's whole width, and the
		// y range opened to show it with the data around it.
		lo, hi = min(lo, pn.Ref), max(hi, pn.Ref)
		if pn.LogY {
			// A little room around the data; to the power of 2 beyond it
			// where that is near, so that both ends have a label.
			p.Y.Min, p.Y.Max = lo/1.1, hi*1.1
			if e := math.Exp2(math.Floor(math.Log2(lo))); e >= lo/1.35 {
				p.Y.Min = e
			}
			if e := math.Exp2(math.Ceil(math.Log2(hi))); e <= hi*1.35 && e > p.Y.Min {
				p.Y.Max = e
			}
		} else {
			pad := (hi - lo) * 0.08
			p.Y.Min, p.Y.Max = lo-pad, hi+pad
		}
		ref := &refLine{y: pn.Ref}
		ref.LineStyle = draw.LineStyle{Color: color.Gray{0x40}, Width: vg.Points(1.2), Dashes: []vg.Length{vg.Points(2), vg.Points(2)}}
		p.Add(ref)
		entries = append(entries, legendEntry{pn.RefName, []plot.Thumbnailer{ref}})
	}
	return p, entries, nil
}

// yLabel draws a panel's y label as gonum/plot would have, at the left
// edge x of its canvas, centred on y.
func yLabel(c draw.Canvas, p *plot.Plot, x, y vg.Length, label string) {
	sty := p.Y.Label.TextStyle
	sty.Rotation += math.Pi / 2
	sty.XAlign = draw.XCenter
	x += sty.Height(label) - sty.FontExtents().Descent
	c.FillText(sty, vg.Point{X: x, Y: y}, label)
}

// refLine is a horizontal line across the data area.
type refLine struct {
	draw.LineStyle
	y float64
}

func (r *refLine) Plot(c draw.Canvas, p *plot.Plot) {
	_, ty := p.Transforms(&c)
	y := ty(r.y)
	c.StrokeLine2(r.LineStyle, c.Min.X, y, c.Max.X, y)
}

func (r *refLine) Thumbnail(c *draw.Canvas) {
	y := c.Center().Y
	c.StrokeLine2(r.LineStyle, c.Min.X, y, c.Max.X, y)
}

type legendEntry struct {
	name   string
	thumbs []plot.Thumbnailer
}

const thumbWidth = 22

// maxRows is the most entries a panel's legend puts in one column
// before it starts another, where the width allows.
const maxRows = 5

// legendLayout returns the columns and rows that fit entries into
// width, and the width of a column: a panel's legend (wide false) in one
// column up to maxRows entries, then as few columns as hold them; a
// legend below all panels (wide) in as many columns as fit.
func legendLayout(es []legendEntry, sty text.Style, width vg.Length, wide bool) (cols, rows int, colW vg.Length) {
	if len(es) == 0 {
		return 0, 0, 0
	}
	for _, e := range es {
		colW = max(colW, entryWidth(e, sty))
	}
	cols = (len(es) + maxRows - 1) / maxRows
	if wide {
		cols = len(es)
	}
	cols = max(1, min(cols, int(width/colW)))
	rows = (len(es) + cols - 1) / cols
	return cols, rows, colW
}

// entryWidth is the room a legend entry takes: its thumbnail, its text
// and a gap, with a fifth more for the text, since an SVG viewer without
// the font measured here (Liberation Serif) draws with a wider one.
func entryWidth(e legendEntry, sty text.Style) vg.Length {
	return vg.Points(thumbWidth) + sty.Width(" "+e.name)*1.2 + sty.Width("    ")
}

func rowHeight(sty text.Style) vg.Length { return sty.Height("M") * 1.45 }

func legendHeight(es []legendEntry, sty text.Style, width vg.Length, wide bool) vg.Length {
	_, rows, _ := legendLayout(es, sty, width, wide)
	if rows == 0 {
		return 0
	}
	return vg.Length(rows)*rowHeight(sty) + margin
}

// drawLegend draws es in columns, filled down then across, from the top
// left of c; a legend of one row takes each entry's own width.
func drawLegend(c draw.Canvas, es []legendEntry, sty text.Style, wide bool) {
	cols, rows, colW := legendLayout(es, sty, c.Max.X-c.Min.X, wide)
	x := c.Min.X
	for col := range cols {
		l := plot.NewLegend()
		l.TextStyle = sty
		l.Top, l.Left = true, true // from the top left, thumbnail first
		l.ThumbnailWidth = vg.Points(thumbWidth)
		l.Padding = rowHeight(sty) - sty.Height("M")
		column := es[col*rows : min(len(es), (col+1)*rows)]
		for _, e := range column {
			l.Add(e.name, e.thumbs...)
		}
		lc := c
		lc.Min.X = x
		l.Draw(lc)
		if rows == 1 {
			x += entryWidth(column[0], sty)
		} else {
			x += colW
		}
	}
}

// byteTicks marks message sizes at powers of 2, labelled in B, KiB,
// MiB, GiB: every power of 4 or 16 or 64 labelled, as the range allows.
type byteTicks struct{}

func (byteTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0 && hi >= lo && !math.IsInf(hi, 0)) {
		return nil
	}
	a, b := int(math.Floor(math.Log2(lo))), int(math.Ceil(math.Log2(hi)))
	step := 2
	for (b-a)/step > 8 {
		step *= 2
	}
	var ts []plot.Tick
	for e := a; e <= b; e++ {
		v := math.Exp2(float64(e))
		if v < lo*0.999 || v > hi*1.001 {
			continue
		}
		t := plot.Tick{Value: v}
		if e%step == 0 {
			t.Label = Bytes(int64(v))
		}
		ts = append(ts, t)
	}
	return ts
}

// Bytes writes n as 4 B, 16 KiB, 1 MiB.
func Bytes(n int64) string {
	for _, u := range []struct {
		shift int
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + " " + u.name
		}
	}
	return strconv.FormatInt(n, 10) + " B"
}

// logTicks marks a log axis: decades labelled (0.1, 1, 10, ..., 10k),
// and 2 and 5 times them too where the range spans less than three
// decades.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0 && hi >= lo && !math.IsInf(hi, 0)) {
		return nil
	}
	a, b := int(math.Floor(math.Log10(lo))), int(math.Ceil(math.Log10(hi)))
	few := b-a <= 2
	var ts []plot.Tick
	for e := a; e <= b; e++ {
		d := math.Pow10(e)
		for m := 1; m < 10; m++ {
			v := float64(m) * d
			if v < lo*0.999 || v > hi*1.001 {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || (few && (m == 2 || m == 5)) {
				t.Label = number(v)
			}
			ts = append(ts, t)
		}
	}
	if labelled(ts) < 2 {
		// A narrow range (a ratio between 0.7 and 1.4): label what
		// there is.
		for i := range ts {
			ts[i].Label = number(ts[i].Value)
		}
	}
	return ts
}

// ratioTicks marks a log axis of ratios: the powers of 2 labelled (0.25,
// 0.5, 1, 2, 4), with 1.5 times them between; a range too narrow for
// three of them gets labels every 0.1 or 0.2.
type ratioTicks struct{}

func (ratioTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0 && hi >= lo && !math.IsInf(hi, 0)) {
		return nil
	}
	var ts []plot.Tick
	for e := int(math.Floor(math.Log2(lo))); e <= int(math.Ceil(math.Log2(hi))); e++ {
		for _, v := range []float64{math.Exp2(float64(e)), 1.5 * math.Exp2(float64(e))} {
			if v >= lo*0.999 && v <= hi*1.001 {
				t := plot.Tick{Value: v}
				if v == math.Exp2(float64(e)) {
					t.Label = number(v)
				}
				ts = append(ts, t)
			}
		}
	}
	if labelled(ts) >= 3 {
		slices.SortFunc(ts, func(a, b plot.Tick) int { return cmp.Compare(a.Value, b.Value) })
		return ts
	}
	step := 0.1
	if hi-lo > 1 {
		step = 0.2
	}
	ts = ts[:0]
	for i := math.Ceil(lo / 0.1); i*0.1 <= hi; i++ {
		v := i / 10
		t := plot.Tick{Value: v}
		if math.Abs(math.Remainder(v, step)) < 1e-9 {
			t.Label = number(v)
		}
		ts = append(ts, t)
	}
	return ts
}

func labelled(ts []plot.Tick) int {
	n := 0
	for _, t := range ts {
		if !t.IsMinor() {
			n++
		}
	}
	return n
}

// number writes a tick's value without exponents: 0.05, 2, 10000.
func number(v float64) string {
	if v >= 10000 {
		return strconv.FormatFloat(v/1000, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// writeTo writes wt's drawing to path, through edit if not nil.
func writeTo(path string, wt io.WriterTo, edit func([]byte) []byte) error {
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return err
	}
	out := b.Bytes()
	if edit != nil {
		out = edit(out)
	}
	return os.WriteFile(path, out, 0o644)
}
