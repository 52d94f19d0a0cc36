package harness

import (
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/wizardmesh/wizard/bench/internal/benchkit"
)

// chartColors gives each contender a fixed colour; others take the
// fallback palette in order.
var chartColors = map[string]string{
	"wizard-tcp":  "#2b6cb0",
	"wizard-quic": "#63b3ed",
	gRPCName:      "#38a169",
	"http":        "#dd6b20",
	floorName:     "#a0aec0",
	quicFloorName: "#cbd5e0",

	"microwizard":        "#805ad5",
	"microwizard-node":   "#b794f4",
	"wizard-microwizard": "#44337a",
	"moleculer":          "#d53f8c",
	"drpc":               "#319795",
	"connect":            "#b7791f",
	"nats-micro":         "#e53e3e",
	"nats-core":          "#fc8181",
	"wizard-nats":        "#1a365d",
}

var chartFallback = []string{"#805ad5", "#d53f8c", "#319795", "#b7791f"}

// WriteSVG draws the comparison as grouped bars: one group per
// concurrency, one bar per contender, req/s on a log scale. The SVG is
// written by hand, so it needs no chart library.
func (r *Report) WriteSVG(w io.Writer) error {
	const (
		left, right, bottom = 80, 20, 56
		plotH               = 352
		legendW, legendH    = 300, 18 // a legend entry's cell
	)
	var levels []int
	var names []Cell // one per contender, in order
	seen := map[string]bool{}
	lo, hi := math.Inf(1), 0.0
	for _, c := range r.Cells {
		if c.Extra {
			continue // the labelled extra rows are in the table only
		}
		if len(levels) == 0 || levels[len(levels)-1] != c.Callers {
			levels = append(levels, c.Callers)
		}
		if !seen[c.Name] {
			seen[c.Name] = true
			names = append(names, c)
		}
		if c.PerSec > 0 {
			lo, hi = math.Min(lo, c.PerSec), math.Max(hi, c.PerSec)
		}
	}
	// Wide enough for about 24 px a bar, the legend in rows of cells.
	width := max(960, left+right+len(levels)*len(names)*24)
	perRow := max(1, (width-left-right)/legendW)
	top := 58 + (len(names)+perRow-1)/perRow*legendH + 16
	height := top + plotH + bottom
	plotW := width - left - right
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n", width, height, width, height)
	title := "Unary calls per second over one connection (log scale, higher is better)"
	fmt.Fprintf(&b, "<title>%s</title>\n", html.EscapeString(title))
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="16" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	sub := fmt.Sprintf("server in its own process on 127.0.0.1; median of %s of %v; %s, %d CPUs, %s",
		runs(r.Config.Runs), r.Config.Duration, r.Env.CPU, r.Env.NumCPU, r.Env.GoVersion)
	fmt.Fprintf(&b, `<text x="%d" y="44" fill="#4a5568">%s</text>`+"\n", left, html.EscapeString(sub))
	colors := map[string]string{}
	for i, c := range names {
		col, ok := chartColors[c.Name]
		if !ok {
			col = chartFallback[i%len(chartFallback)]
		}
		colors[c.Name] = col
		x, ly := left+i%perRow*legendW, 58+i/perRow*legendH
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="14" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", x, ly, col, x+20, ly+12, html.EscapeString(c.Contender))
	}
	if len(levels) == 0 || hi == 0 {
		b.WriteString("</svg>\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	y := benchkit.LogAxis(&b, left, top, plotW, plotH, lo, hi, shortRate)
	fmt.Fprintf(&b, `<text transform="translate(18 %d) rotate(-90)" text-anchor="middle" fill="#4a5568">requests per second</text>`+"\n", top+plotH/2)
	groupW := float64(plotW) / float64(len(levels))
	barW := groupW * 0.84 / float64(len(names))
	for gi, n := range levels {
		gx := float64(left) + float64(gi)*groupW + groupW*0.08
		for bi, c := range names {
			cell, ok := r.cell(c.Name, n)
			if !ok || cell.PerSec <= 0 {
				continue
			}
			x := gx + float64(bi)*barW
			yy := y(cell.PerSec)
			fmt.Fprintf(&b, `<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s, %d callers: %s req/s, p50 %s, p99 %s</title></rect>`+"\n",
				x+1, yy, barW-2, float64(top+plotH)-yy, colors[c.Name], html.EscapeString(cell.Contender), n, rate(cell.PerSec), dur(cell.P50), dur(cell.P99))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="9">%s</text>`+"\n", x+barW/2, yy-4, shortRate(cell.PerSec))
		}
		label := strconv.Itoa(n) + " callers"
		if n == 1 {
			label = "1 caller"
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", float64(left)+float64(gi)*groupW+groupW/2, top+plotH+22, label)
	}
	fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#2d3748"/>`+"\n", left, left+plotW, top+plotH, top+plotH)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// shortRate formats a rate with k or M and about three significant digits.
func shortRate(v float64) string {
	unit := ""
	switch {
	case v >= 1e6:
		v, unit = v/1e6, "M"
	case v >= 1e3:
		v, unit = v/1e3, "k"
	}
	prec := 0
	switch {
	case v < 10:
		prec = 2
	case v < 100:
		prec = 1
	}
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s + unit
}
