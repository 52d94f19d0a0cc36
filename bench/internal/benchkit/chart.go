package benchkit

import (
	"fmt"
	"math"
	"strings"
)

// LogAxis draws the grid of a log-scale y axis across the plot whose top
// left corner is (left, top), plotW by plotH: a solid line at every power
// of ten from lo's decade to hi's and dashed lines at 2 and 5 times it,
// each labelled by label on the left. It returns the y of a value.
func LogAxis(b *strings.Builder, left, top, plotW, plotH int, lo, hi float64, label func(float64) string) func(float64) float64 {
	d0, d1 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if d1 <= d0 {
		d1 = d0 + 1
	}
	y := func(v float64) float64 {
		return float64(top+plotH) - (math.Log10(v)-d0)/(d1-d0)*float64(plotH)
	}
	for d := d0; d <= d1; d++ {
		for _, m := range []float64{1, 2, 5} {
			if d == d1 && m > 1 {
				break
			}
			v := m * math.Pow(10, d)
			yy := y(v)
			stroke, dash := "#cbd5e0", ""
			if m > 1 {
				stroke, dash = "#edf2f7", ` stroke-dasharray="3,3"`
			}
			fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s"%s/>`+"\n", left, left+plotW, yy, yy, stroke, dash)
			fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" fill="#4a5568">%s</text>`+"\n", left-8, yy+4, label(v))
		}
	}
	return y
}
