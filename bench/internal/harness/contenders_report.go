package harness

import (
	"fmt"
	"strconv"
	"strings"
)

// The contenders the sections below compare by name.
const (
	wizardTCPName = "wizard-tcp"
	mwNodeName    = "microwizard-node"
	mwGoName      = "microwizard"
	mwBridgeName  = "wizard-microwizard"
	natsName      = "nats-micro"
	wizNATSName   = "wizard-nats"
)

// writeContenders writes the sections of issues 17, 18 and 19: wizard TCP
// against the best other contender and MicroWizard at each concurrency,
// wizard over NATS against NATS micro, and the MicroWizard bridges.
func (r *Report) writeContenders(b *strings.Builder) {
	levels := r.levels()
	if len(levels) == 0 {
		return
	}
	x := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + "x" }
	met := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "no"
	}
	if _, ok := r.cell(wizardTCPName, levels[0]); ok {
		fmt.Fprintf(b, "## wizard TCP against every contender (issue 17's targets)\n\n")
		fmt.Fprintf(b, "Targets: ahead of every contender in req/s at each concurrency, and ≥ 2x MicroWizard 1.5.0 "+
			"(MicroWizard → MicroWizard, the figure its users compare). The floor and wizard's own rows are not contenders.\n\n")
		fmt.Fprintf(b, "| callers | wizard TCP | fastest contender | its req/s | wizard TCP vs it | ahead | vs MicroWizard ← MicroWizard | ≥ 2x |\n")
		fmt.Fprintf(b, "|---:|---:|---|---:|---:|---|---:|---|\n")
		for _, n := range levels {
			w, _ := r.cell(wizardTCPName, n)
			var best Cell
			for _, c := range r.Cells {
				if c.Callers == n && !strings.HasPrefix(c.Name, floorName) && !c.Extra && !strings.HasPrefix(c.Name, "wizard-") && c.PerSec > best.PerSec {
					best = c
				}
			}
			bestCol := "— | — | — | —"
			if best.Name != "" {
				bestCol = fmt.Sprintf("%s | %s | %s | %s", best.Contender, rate(best.PerSec), x(w.PerSec/best.PerSec), met(w.PerSec > best.PerSec))
			}
			mwCol := "not measured | —"
			if m, ok := r.cell(mwNodeName, n); ok && m.PerSec > 0 {
				mwCol = x(w.PerSec/m.PerSec) + " | " + met(w.PerSec >= 2*m.PerSec)
			}
			fmt.Fprintf(b, "| %d | %s | %s | %s |\n", n, rate(w.PerSec), bestCol, mwCol)
		}
		b.WriteString("\n")
	}
	if _, ok := r.cell(wizNATSName, levels[0]); ok {
		fmt.Fprintf(b, "## wizard over NATS (issue 18's target)\n\n")
		fmt.Fprintf(b, "Target: wizard over NATS ≥ 1x NATS micro's req/s (the broker is the floor here); the last column is the fraction of wizard TCP it reaches.\n\n")
		fmt.Fprintf(b, "| callers | wizard NATS | NATS micro | wizard NATS vs NATS micro | ≥ 1x | wizard TCP | wizard NATS vs wizard TCP |\n")
		fmt.Fprintf(b, "|---:|---:|---:|---:|---|---:|---:|\n")
		for _, n := range levels {
			wn, _ := r.cell(wizNATSName, n)
			nm, nok := r.cell(natsName, n)
			wt, tok := r.cell(wizardTCPName, n)
			vs, ok1 := "not measured", "—"
			if nok && nm.PerSec > 0 {
				vs, ok1 = x(wn.PerSec/nm.PerSec), met(wn.PerSec >= nm.PerSec)
			}
			tcp, frac := "not measured", "—"
			if tok && wt.PerSec > 0 {
				tcp, frac = rate(wt.PerSec), x(wn.PerSec/wt.PerSec)
			}
			fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s | %s |\n", n, rate(wn.PerSec), rate(nm.PerSec), vs, ok1, tcp, frac)
		}
		b.WriteString("\n")
	}
	bridges := []string{mwGoName, mwBridgeName, mwNodeName}
	var have []string
	for _, name := range bridges {
		if _, ok := r.cell(name, levels[0]); ok {
			have = append(have, name)
		}
	}
	if len(have) > 0 {
		fmt.Fprintf(b, "## The MicroWizard bridges (issue 19): req/s, p50\n\n")
		fmt.Fprintf(b, "| callers | Go caller → MicroWizard server | MicroWizard caller → Go server (runtime/microwizard) | MicroWizard → MicroWizard |\n")
		fmt.Fprintf(b, "|---:|---:|---:|---:|\n")
		for _, n := range levels {
			cols := make([]string, len(bridges))
			for i, name := range bridges {
				cols[i] = "not measured"
				if c, ok := r.cell(name, n); ok {
					cols[i] = rate(c.PerSec) + ", " + dur(c.P50)
				}
			}
			fmt.Fprintf(b, "| %d | %s |\n", n, strings.Join(cols, " | "))
		}
		b.WriteString("\n")
	}
}

// levels returns the concurrencies of the comparison, in order.
func (r *Report) levels() []int {
	var out []int
	for _, c := range r.Cells {
		if len(out) == 0 || out[len(out)-1] != c.Callers {
			out = append(out, c.Callers)
		}
	}
	return out
}
