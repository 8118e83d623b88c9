package experiment

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/brimnode/brim/qos"
)

// Colours: one per correction type, one per trial line.
var (
	typeColors = map[string]color.Color{
		"THROTTLE": color.RGBA{R: 230, G: 160, A: 255}, "THROTTLE_IO": color.RGBA{R: 200, G: 120, B: 40, A: 255},
		"FREEZE": color.RGBA{B: 220, A: 255}, "KILL": color.RGBA{R: 220, A: 255},
		"THAW": color.RGBA{G: 170, A: 255}, "UNTHROTTLE": color.RGBA{G: 170, B: 170, A: 255},
	}
	grey    = color.Gray{Y: 120}
	palette = []color.Color{
		color.RGBA{R: 31, G: 119, B: 180, A: 255}, color.RGBA{R: 255, G: 127, B: 14, A: 255},
		color.RGBA{R: 44, G: 160, B: 44, A: 255}, color.RGBA{R: 214, G: 39, B: 40, A: 255},
		color.RGBA{R: 148, G: 103, B: 189, A: 255}, color.RGBA{R: 140, G: 86, B: 75, A: 255},
	}
)

// PlotRun draws one run: the LC's p50 and p99 per window (ms, log scale)
// with the SLO, the onset, the end of the contended phase and every
// correction marked; below it the node's cpu use, on the same time axis
// (seconds since the solo phase began).
func PlotRun(r *Run, res RunResult, path string) error {
	m := r.Meta
	x := func(ms int64) float64 { return float64(ms-m.SoloStart) / 1000 }
	var p50, p99 plotter.XYs
	for _, w := range r.Windows {
		if w.End < m.SoloStart || w.P99 <= 0 {
			continue
		}
		p99 = append(p99, plotter.XY{X: x(w.End), Y: w.P99 / 1000})
		if w.P50 > 0 {
			p50 = append(p50, plotter.XY{X: x(w.End), Y: w.P50 / 1000})
		}
	}
	if len(p99) == 0 {
		return fmt.Errorf("plot %s: no window after the solo phase began", r.Dir)
	}
	lat := plot.New()
	lat.Title.Text = fmt.Sprintf("trial %d, %s: LC latency per %v window", m.Trial, m.Controller, res.Window)
	lat.Y.Label.Text = "ms (log)"
	lat.Y.Scale = plot.LogScale{}
	lat.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	lat.Add(plotter.NewGrid())
	lat.Legend.Top = true
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range append(append(plotter.XYs{}, p99...), p50...) {
		lo, hi = math.Min(lo, v.Y), math.Max(hi, v.Y)
	}
	slo := m.SLO * res.SoloP99 / 1000
	hi = math.Max(hi, slo) * 1.5
	lo = math.Min(lo, slo) / 1.5
	lat.Y.Min, lat.Y.Max = lo, hi
	if err := addLine(lat, p99, "p99", palette[3], false); err != nil {
		return err
	}
	if len(p50) > 0 {
		if err := addLine(lat, p50, "p50", palette[0], false); err != nil {
			return err
		}
	}
	end := x(max(m.ContendedEnd, m.AfterEnd))
	if err := addLine(lat, plotter.XYs{{X: 0, Y: slo}, {X: end, Y: slo}}, fmt.Sprintf("SLO %.2g× solo p99", m.SLO), grey, true); err != nil {
		return err
	}
	marks := []int64{m.Onset, m.ContendedEnd}
	for _, t := range marks {
		if err := addLine(lat, plotter.XYs{{X: x(t), Y: lo}, {X: x(t), Y: hi}}, "", color.Black, true); err != nil {
			return err
		}
	}
	byType := map[string]plotter.XYs{}
	for _, c := range r.Corrections {
		if c.At < m.SoloStart {
			continue
		}
		// A slow start's limits admit work: marked apart (grey
		// circles), so that parked idle antagonists do not read as
		// corrections before the onset.
		t := c.Type
		if c.Trigger == qos.SignalSlowStart {
			t = SlowStartCorrections
		}
		byType[t] = append(byType[t], plotter.XY{X: x(c.At), Y: hi / 1.15})
	}
	types := make([]string, 0, len(byType))
	for t := range byType {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		s, err := plotter.NewScatter(byType[t])
		if err != nil {
			return err
		}
		s.Shape = draw.TriangleGlyph{}
		if t == SlowStartCorrections {
			s.Shape = draw.CircleGlyph{}
		}
		s.Radius = vg.Points(3.5)
		s.Color = typeColor(t)
		lat.Add(s)
		lat.Legend.Add(t, s)
	}

	var busy plotter.XYs
	for _, s := range r.Node {
		if s.At >= m.SoloStart {
			busy = append(busy, plotter.XY{X: x(s.At), Y: s.Busy * 100})
		}
	}
	node := plot.New()
	node.Y.Label.Text = "node cpu %"
	node.X.Label.Text = "seconds since the solo phase began (dashed: onset, end of contention)"
	node.Y.Min, node.Y.Max = 0, 100
	node.Add(plotter.NewGrid())
	if len(busy) > 0 {
		if err := addLine(node, busy, "", palette[2], false); err != nil {
			return err
		}
	}
	for _, t := range marks {
		if err := addLine(node, plotter.XYs{{X: x(t), Y: 0}, {X: x(t), Y: 100}}, "", color.Black, true); err != nil {
			return err
		}
	}
	for _, p := range []*plot.Plot{lat, node} {
		p.X.Min, p.X.Max = 0, end
	}
	return savePNG(path, [][]*plot.Plot{{lat}, {node}})
}

// PlotOverview draws, per controller, every trial's p99 over its solo
// median per window against the time since the onset, with the SLO, the
// onset and the end of the contended phase; every panel on the same time
// axis.
func PlotOverview(runs []*Run, results []RunResult, controllers []string, slo float64, path string) error {
	type series struct {
		trial int
		xy    plotter.XYs
	}
	byController := map[string][]series{}
	xmin, xmax := 0.0, 0.0
	var ends []float64
	for i, r := range runs {
		res := results[i]
		if res.SoloP99 <= 0 {
			continue
		}
		var xy plotter.XYs
		for _, w := range r.Windows {
			if w.P99 <= 0 || r.Meta.Phase(w.End, res.Window) == "" {
				continue
			}
			v := plotter.XY{X: float64(w.End-r.Meta.Onset) / 1000, Y: w.P99 / res.SoloP99}
			xy = append(xy, v)
			xmin, xmax = math.Min(xmin, v.X), math.Max(xmax, v.X)
		}
		if len(xy) > 0 {
			byController[r.Meta.Controller] = append(byController[r.Meta.Controller], series{r.Meta.Trial, xy})
			ends = append(ends, float64(r.Meta.ContendedEnd-r.Meta.Onset)/1000)
		}
	}
	end := median(ends)
	var rows [][]*plot.Plot
	for _, c := range controllers {
		ss := byController[c]
		if len(ss) == 0 {
			continue
		}
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: LC p99 ÷ solo median, per window, each trial", c)
		p.Y.Label.Text = "× solo (log)"
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.X.Label.Text = "seconds since the onset (dashed: onset, end of contention)"
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		lo, hi := 0.5, 2.0
		for n, sr := range ss {
			for _, v := range sr.xy {
				lo, hi = math.Min(lo, v.Y), math.Max(hi, v.Y)
			}
			if err := addLine(p, sr.xy, fmt.Sprintf("trial %d", sr.trial), palette[n%len(palette)], false); err != nil {
				return err
			}
		}
		p.Y.Min, p.Y.Max = lo/1.2, hi*1.2
		p.X.Min, p.X.Max = xmin, xmax
		if err := addLine(p, plotter.XYs{{X: xmin, Y: slo}, {X: xmax, Y: slo}}, fmt.Sprintf("SLO %.2g×", slo), grey, true); err != nil {
			return err
		}
		for _, x := range []float64{0, end} {
			if err := addLine(p, plotter.XYs{{X: x, Y: p.Y.Min}, {X: x, Y: p.Y.Max}}, "", color.Black, true); err != nil {
				return err
			}
		}
		rows = append(rows, []*plot.Plot{p})
	}
	if len(rows) == 0 {
		return fmt.Errorf("overview: no run has a solo baseline")
	}
	return savePNG(path, rows)
}

func typeColor(t string) color.Color {
	if c, ok := typeColors[t]; ok {
		return c
	}
	return grey
}

func addLine(p *plot.Plot, xy plotter.XYs, label string, c color.Color, dashed bool) error {
	l, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
	l.Color = c
	l.Width = vg.Points(1.2)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		l.Width = vg.Points(0.8)
	}
	p.Add(l)
	if label != "" {
		p.Legend.Add(label, l)
	}
	return nil
}

// savePNG draws rows of plots stacked, aligned on their axes, 10 inches
// wide and 3 per row, and writes a PNG.
func savePNG(path string, rows [][]*plot.Plot) error {
	img := vgimg.New(10*vg.Inch, vg.Length(3*len(rows))*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadTop: vg.Millimeter, PadBottom: vg.Millimeter,
		PadLeft: vg.Millimeter, PadRight: 2 * vg.Millimeter, PadY: 2 * vg.Millimeter}
	canvases := plot.Align(rows, tiles, dc)
	for i, row := range rows {
		row[0].Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close() // the write error matters
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
