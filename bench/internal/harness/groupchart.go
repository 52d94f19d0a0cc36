package harness

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// groupedChart is a bar chart on a log scale: one group of bars per
// group, one bar per series, drawn by hand like [Report.WriteSVG].
type groupedChart struct {
	title, sub, axis string
	groups           []string
	series           []chartSeries
	// label formats a value for the axis and the bars.
	label func(float64) string
	// value returns series s's value in group g, the bar's tooltip, and
	// whether there is one.
	value func(s, g int) (float64, string, bool)
}

type chartSeries struct{ name, title string }

// chartColor returns the colour of series i, named or from the fallback
// palette.
func chartColor(name string, i int) string {
	if c, ok := chartColors[name]; ok {
		return c
	}
	return chartFallback[i%len(chartFallback)]
}

func (c groupedChart) write(w io.Writer) error {
	const (
		width, height            = 960, 500
		left, right, top, bottom = 80, 20, 92, 56
		plotW, plotH             = width - left - right, height - top - bottom
	)
	lo, hi := math.Inf(1), 0.0
	for s := range c.series {
		for g := range c.groups {
			if v, _, ok := c.value(s, g); ok && v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, "<title>%s</title>\n", html.EscapeString(c.title))
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="16" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(c.title))
	fmt.Fprintf(&b, `<text x="%d" y="44" fill="#4a5568">%s</text>`+"\n", left, html.EscapeString(c.sub))
	step := min(170, plotW/max(len(c.series), 1))
	for i, s := range c.series {
		x := left + i*step
		fmt.Fprintf(&b, `<rect x="%d" y="58" width="14" height="14" fill="%s"/><text x="%d" y="70">%s</text>`+"\n", x, chartColor(s.name, i), x+20, html.EscapeString(s.title))
	}
	if len(c.groups) == 0 || hi == 0 {
		b.WriteString("</svg>\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	d0, d1 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if d1 <= d0 {
		d1 = d0 + 1
	}
	y := func(v float64) float64 { return float64(top+plotH) - (math.Log10(v)-d0)/(d1-d0)*float64(plotH) }
	for d := d0; d <= d1; d++ {
		for _, m := range []float64{1, 2, 5} {
			if d == d1 && m > 1 {
				break
			}
			v := m * math.Pow(10, d)
			stroke, dash := "#cbd5e0", ""
			if m > 1 {
				stroke, dash = "#edf2f7", ` stroke-dasharray="3,3"`
			}
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s"%s/>`+"\n", left, left+plotW, y(v), y(v), stroke, dash)
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#4a5568">%s</text>`+"\n", left-8, y(v)+4, c.label(v))
		}
	}
	fmt.Fprintf(&b, `<text transform="translate(18 %d) rotate(-90)" text-anchor="middle" fill="#4a5568">%s</text>`+"\n", top+plotH/2, html.EscapeString(c.axis))
	groupW := float64(plotW) / float64(len(c.groups))
	barW := groupW * 0.84 / float64(max(len(c.series), 1))
	for g, label := range c.groups {
		gx := float64(left) + float64(g)*groupW + groupW*0.08
		for s, ser := range c.series {
			v, tip, ok := c.value(s, g)
			if !ok || v <= 0 {
				continue
			}
			x, yy := gx+float64(s)*barW, y(v)
			fmt.Fprintf(&b, `<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s</title></rect>`+"\n",
				x+1, yy, barW-2, float64(top+plotH)-yy, chartColor(ser.name, s), html.EscapeString(tip))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10">%s</text>`+"\n", x+barW/2, yy-4, html.EscapeString(c.label(v)))
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", float64(left)+float64(g)*groupW+groupW/2, top+plotH+22, html.EscapeString(label))
	}
	fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#2d3748"/>`+"\n", left, left+plotW, top+plotH, top+plotH)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// ChartSeries names a series of [WriteGroupedChart]: its key (which picks
// its colour) and its title in the legend.
type ChartSeries struct{ Name, Title string }

// WriteGroupedChart draws a bar chart on a log scale, as the streams and
// payload modes' charts: a group of bars per group, a bar per series;
// value returns series s's value in group g, the bar's tooltip, and
// whether there is one.
func WriteGroupedChart(w io.Writer, title, sub, axis string, groups []string, series []ChartSeries,
	label func(float64) string, value func(s, g int) (float64, string, bool)) error {
	c := groupedChart{title: title, sub: sub, axis: axis, groups: groups, label: label, value: value}
	for _, s := range series {
		c.series = append(c.series, chartSeries{name: s.Name, title: s.Title})
	}
	return c.write(w)
}
