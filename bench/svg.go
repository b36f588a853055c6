package bench

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// series is one line of a plot.
type series struct {
	name  string
	color string
	x, y  []float64
	// labels, if set, are printed above a marker at each point (for plots
	// of a few points).
	labels []string
}

// plot is a line chart with linear axes starting at zero, rendered as a
// self-contained SVG.
type plot struct {
	title, subtitle, xLabel, yLabel string
	series                          []series
}

const (
	plotW, plotH                           = 760, 440
	marginL, marginR, marginT, marginB     = 80, 40, 84, 56
	innerW, innerH                         = plotW - marginL - marginR, plotH - marginT - marginB
	axisColor, gridColor, textColor, fontF = "#444", "#e4e4e4", "#222", "font-family=\"system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif\""
)

// Colors of the series, in order.
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"}

func (p plot) svg() []byte {
	xMax, yMax := 0.0, 0.0
	for _, s := range p.series {
		for i := range s.x {
			xMax, yMax = max(xMax, s.x[i]), max(yMax, s.y[i])
		}
	}
	xTicks, xTop := niceTicks(xMax)
	yTicks, yTop := niceTicks(yMax * 1.05)
	px := func(x float64) float64 { return marginL + x/xTop*innerW }
	py := func(y float64) float64 { return marginT + innerH - y/yTop*innerH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" %s font-size="12">`+"\n", plotW, plotH, plotW, plotH, fontF)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", plotW, plotH)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="600" fill="%s">%s</text>`+"\n", marginL, textColor, esc(p.title))
	if p.subtitle != "" {
		fmt.Fprintf(&b, `<text x="%d" y="43" fill="%s">%s</text>`+"\n", marginL, textColor, esc(p.subtitle))
	}
	for _, t := range yTicks {
		y := py(t)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", marginL, y, marginL+innerW, y, gridColor)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle" fill="%s">%s</text>`+"\n", marginL-6, y, textColor, tickLabel(t))
	}
	for _, t := range xTicks {
		x := px(t)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x, marginT+innerH, x, marginT+innerH+5, axisColor)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="%s">%s</text>`+"\n", x, marginT+innerH+19, textColor, tickLabel(t))
	}
	fmt.Fprintf(&b, `<path d="M%d %d V%d H%d" fill="none" stroke="%s"/>`+"\n", marginL, marginT, marginT+innerH, marginL+innerW, axisColor)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="%s">%s</text>`+"\n", marginL+innerW/2, plotH-12, textColor, esc(p.xLabel))
	fmt.Fprintf(&b, `<text transform="translate(18 %d) rotate(-90)" text-anchor="middle" fill="%s">%s</text>`+"\n", marginT+innerH/2, textColor, esc(p.yLabel))

	for i, s := range p.series {
		color := s.color
		if color == "" {
			color = palette[i%len(palette)]
		}
		if len(s.x) > 0 {
			pts := make([]string, len(s.x))
			for j := range s.x {
				pts[j] = fmt.Sprintf("%.1f,%.1f", px(s.x[j]), py(s.y[j]))
			}
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"/>`+"\n", strings.Join(pts, " "), color)
		}
		for j, l := range s.labels {
			x, y := px(s.x[j]), py(s.y[j])
			// Labels near an edge grow inwards so that none is cut off.
			anchor := "middle"
			if x > marginL+0.85*innerW {
				anchor = "end"
			} else if x < marginL+0.15*innerW {
				anchor = "start"
			}
			// Alternately above and below, so that close points stay legible.
			ly := y - 10
			if j%2 == 1 {
				ly = y + 20
			}
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/>`+"\n", x, y, color)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="%s" fill="%s">%s</text>`+"\n", x, ly, anchor, textColor, esc(l))
		}
		// Legend: one row above the plot area.
		lx, ly := float64(marginL+200*i), float64(marginT-18)
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="%s" stroke-width="3"/>`+"\n", lx, ly, lx+22, ly, color)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" dominant-baseline="middle" fill="%s">%s</text>`+"\n", lx+28, ly, textColor, esc(s.name))
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// niceTicks returns ticks from 0 to at least top at a step of 1, 2 or 5
// times a power of ten (about five of them) and the axis's end.
func niceTicks(top float64) ([]float64, float64) {
	if !(top > 0) || math.IsInf(top, 0) {
		top = 1
	}
	raw := top / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	end := math.Ceil(top/step-1e-9) * step
	var ticks []float64
	for i := 0; float64(i)*step <= end+step*1e-9; i++ {
		ticks = append(ticks, float64(i)*step)
	}
	return ticks, end
}

// tickLabel prints an axis value compactly: 1.5k, 2M, 0.25.
func tickLabel(v float64) string {
	trim := func(f float64, suffix string) string {
		return strconv.FormatFloat(f, 'f', -1, 64) + suffix
	}
	switch a := math.Abs(v); {
	case a >= 1e6:
		return trim(math.Round(v/1e6*100)/100, "M")
	case a >= 1e4:
		return trim(math.Round(v/1e3*10)/10, "k")
	default:
		return trim(math.Round(v*1000)/1000, "")
	}
}

func esc(s string) string { return html.EscapeString(s) }

// batchRates turns commits (cumulative, in time order) into a step line:
// each batch's rows over the time since the previous commit (the start,
// for the first), drawn flat across that interval.
func batchRates(commits []Sample) (x, y []float64) {
	var prev Sample
	for _, c := range commits {
		dt := c.Seconds - prev.Seconds
		if dt <= 0 {
			continue
		}
		r := float64(c.Rows-prev.Rows) / dt
		x = append(x, prev.Seconds, c.Seconds)
		y = append(y, r, r)
		prev = c
	}
	return x, y
}

// throughputPlot shows export and baseline rows/s over time for a density.
func throughputPlot(d DensityResult) plot {
	ex, ey := batchRates(d.Export.Commits)
	bx, by := batchRates(d.Baseline.Commits)
	return plot{
		title:    fmt.Sprintf("%s: rows/s into PostgreSQL over time", d.Name),
		subtitle: fmt.Sprintf("%s, %s blocks, each batch's rows over its interval", densityLabel(d.Name), fmtNum(float64(d.Blocks))),
		xLabel:   "seconds since start",
		yLabel:   "rows/s",
		series: []series{
			{name: "blockhaul export", x: ex, y: ey},
			{name: "raw COPY baseline", x: bx, y: by},
		},
	}
}

// scalingPlot shows time per block against range size, each point labelled
// with its peak RSS too.
func scalingPlot(ps []ProcessRun) plot {
	s := series{name: "blockhaul run"}
	for _, p := range ps {
		s.x = append(s.x, float64(p.Blocks))
		s.y = append(s.y, p.MicrosPerBlock)
		s.labels = append(s.labels, fmt.Sprintf("%s µs, %s", fmtNum(p.MicrosPerBlock), fmtBytes(uint64(p.PeakRSSBytes))))
	}
	return plot{
		title:    "time per block by range size",
		subtitle: "blockhaul run (fetch and export), CometBFT density, own process; labels: µs per block, peak RSS",
		xLabel:   "blocks in the range",
		yLabel:   "µs per block",
		series:   []series{s},
	}
}
