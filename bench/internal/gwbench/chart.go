package gwbench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/wizardmesh/wizard/bench/internal/benchkit"
)

// chartColors gives each contender its colour.
var chartColors = map[string]string{
	WizardGateway:  "#2b6cb0",
	MoleculerWeb:   "#dd6b20",
	GRPCGateway:    "#38a169",
	WizardDirect:   "#a0aec0",
	WizardBaseline: "#805ad5",
}

// WriteSVG draws the side by side comparison as grouped bars: one group
// per number of connections, one bar per contender, req/s on a log scale.
// The SVG is written by hand, so it needs no chart library.
func (r *Report) WriteSVG(w io.Writer) error {
	const (
		width, height            = 960, 500
		left, right, top, bottom = 80, 20, 92, 56
		plotW, plotH             = width - left - right, height - top - bottom
	)
	var levels []int
	var names []string
	lo, hi := math.Inf(1), 0.0
	for _, c := range r.Cells {
		if len(levels) == 0 || levels[len(levels)-1] != c.Conns {
			levels = append(levels, c.Conns)
		}
		found := false
		for _, n := range names {
			found = found || n == c.Contender
		}
		if !found {
			names = append(names, c.Contender)
		}
		if c.PerSec > 0 {
			lo, hi = math.Min(lo, c.PerSec), math.Max(hi, c.PerSec)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n", width, height, width, height)
	title := "HTTP echo through each gateway, requests per second (log scale, higher is better)"
	fmt.Fprintf(&b, "<title>%s</title>\n", html.EscapeString(title))
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="16" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	sub := fmt.Sprintf("each gateway and its echo service in their own processes on 127.0.0.1; median of %s of %v; %s, %d CPUs; load %s",
		runs(r.Config.Runs), r.Config.Duration, r.Env.CPU, r.Env.NumCPU, r.Env.LoadStart)
	fmt.Fprintf(&b, `<text x="%d" y="44" fill="#4a5568">%s</text>`+"\n", left, html.EscapeString(sub))
	for i, n := range names {
		x := left + i*210
		fmt.Fprintf(&b, `<rect x="%d" y="58" width="14" height="14" fill="%s"/><text x="%d" y="70">%s</text>`+"\n", x, chartColors[n], x+20, html.EscapeString(titles[n]))
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
		for bi, name := range names {
			c, ok := r.cell(name, n)
			if !ok || c.PerSec <= 0 {
				continue
			}
			x := gx + float64(bi)*barW
			yy := y(c.PerSec)
			fmt.Fprintf(&b, `<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s, %d connections: %s req/s, p50 %s, p99 %s</title></rect>`+"\n",
				x+1, yy, barW-2, float64(top+plotH)-yy, chartColors[name], html.EscapeString(titles[name]), n, rate(c.PerSec), dur(c.P50), dur(c.P99))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10">%s</text>`+"\n", x+barW/2, yy-4, shortRate(c.PerSec))
		}
		label := strconv.Itoa(n) + " connections"
		if n == 1 {
			label = "1 connection"
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", float64(left)+float64(gi)*groupW+groupW/2, top+plotH+22, label)
	}
	fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#2d3748"/>`+"\n", left, left+plotW, top+plotH, top+plotH)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
