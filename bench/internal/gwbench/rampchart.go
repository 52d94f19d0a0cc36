package gwbench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"

	"github.com/wizardmesh/wizard/bench/internal/benchkit"
)

// rampColors gives each pass of the ramp its colour.
var rampColors = []string{"#2b6cb0", "#63b3ed", "#805ad5", "#dd6b20", "#f6ad55", "#d53f8c"}

// WriteRampSVG draws pathfinder's scenario: each pass's p99 per stage
// (the calls that ended in it) against the clients open, on a log scale,
// with the 50 ms line. Written by hand, like [Report.WriteSVG].
func (r *Report) WriteRampSVG(w io.Writer) error {
	const (
		width, height            = 960, 500
		left, right, top, bottom = 80, 20, 110, 56
		plotW, plotH             = width - left - right, height - top - bottom
	)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n", width, height, width, height)
	title := "pathfinder's scenario through wizard-gateway: p99 per stage (log scale, lower is better)"
	fmt.Fprintf(&b, "<title>%s</title>\n", html.EscapeString(title))
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="16" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	sub := fmt.Sprintf("closed-loop clients added in %d stages of %v; gateway, echo node and load generator on one machine: %s, %d CPUs; load %s",
		r.Config.Ramp.Stages, r.Config.Ramp.Stage, r.Env.CPU, r.Env.NumCPU, r.Env.LoadStart)
	fmt.Fprintf(&b, `<text x="%d" y="44" fill="#4a5568">%s</text>`+"\n", left, html.EscapeString(sub))
	lo, hi, maxClients := math.Inf(1), float64(50*time.Millisecond), 0
	for i, x := range r.Ramps {
		col := rampColors[i%len(rampColors)]
		lx, ly := left+(i%3)*290, 58+(i/3)*20
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="14" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", lx, ly, col, lx+20, ly+12, html.EscapeString(x.Label()))
		for _, s := range x.Stages {
			if s.P99 > 0 {
				lo, hi = math.Min(lo, float64(s.P99)), math.Max(hi, float64(s.P99))
			}
			maxClients = max(maxClients, s.Clients)
		}
	}
	if maxClients == 0 || math.IsInf(lo, 1) {
		b.WriteString("</svg>\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	lo = math.Min(lo, float64(50*time.Millisecond))
	y := benchkit.LogAxis(&b, left, top, plotW, plotH, lo, hi, func(v float64) string { return dur(time.Duration(v)) })
	x := func(c int) float64 { return float64(left) + float64(c)/float64(maxClients)*float64(plotW) }
	t := y(float64(50 * time.Millisecond))
	fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#e53e3e" stroke-dasharray="6,4"/><text x="%d" y="%.1f" fill="#e53e3e" text-anchor="end">target: p99 50 ms</text>`+"\n",
		left, left+plotW, t, t, left+plotW-4, t-4)
	for i, r := range r.Ramps {
		col := rampColors[i%len(rampColors)]
		var pts []string
		for _, s := range r.Stages {
			if s.P99 <= 0 {
				continue
			}
			px, py := x(s.Clients), y(float64(s.P99))
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
			fmt.Fprintf(&b, `<circle class="point" cx="%.1f" cy="%.1f" r="4" fill="%s"><title>%s, %d clients: p99 %s, p50 %s, %s req/s</title></circle>`+"\n",
				px, py, col, html.EscapeString(r.Label()), s.Clients, dur(s.P99), dur(s.P50), rate(s.PerSec))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), col)
	}
	if len(r.Ramps) > 0 {
		for _, s := range r.Ramps[0].Stages {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", x(s.Clients), top+plotH+18, s.Clients)
		}
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="#4a5568">clients open</text>`+"\n", left+plotW/2, top+plotH+40)
	fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#2d3748"/>`+"\n", left, left+plotW, top+plotH, top+plotH)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
