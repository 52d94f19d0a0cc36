package harness

import (
	"context"
	"fmt"
	"strings"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	"github.com/wizardmesh/wizard/runtime"
)

// inProcRow is one row of the in-process section: a call to a handler in
// the caller's own process, no network.
type inProcRow struct {
	name, title, note string
	sub               string // the Node.js folder it needs ("": none)
	drive             func(ctx context.Context, l Load) (Sample, error)
}

// inProcRows lists the in-process rows, in table order.
func inProcRows() []inProcRow {
	return []inProcRow{
		{name: wizardCallName, title: "wizard typed call (new request, the handler's answer by reference)",
			note: "a typed client's Call (runtime.NewClient[AddRequest, AddResponse] on the node, what generated code wraps) with a new " +
				"*AddRequest{a, b} per call, to a typed handler (runtime.NewUnaryHandler) returning a new *AddResponse, which Call hands back " +
				"as the handler returned it, no copy: the same work as MicroWizard's actE row (a new request object, the handler's new answer " +
				"object by reference), in the Go load generator",
			drive: driveWizardInProc(inProcTyped)},
		{name: "wizard-acte", title: "wizard ActE + Result.Decode (new request, the answer copied)",
			note: "node.ActE(ctx, pattern, *AddRequest) with a new request per call to the same handler, then Result.Decode into a new " +
				"AddResponse: one message more than the typed call builds, and a copy of the answer MicroWizard's actE does not make",
			drive: driveWizardInProc(inProcDecode)},
		{name: "wizard-act", title: "wizard Act (a map in, the answer decoded through JSON)",
			note: "node.Act(ctx, pattern, map{a, b}) to a handler reading req.Float64 and answering map{r}, decoded with Result.Decode into a " +
				"struct, in the Go load generator",
			drive: driveWizardInProc(inProcMap)},
		{name: "microwizard-acte", title: "MicroWizard actE (new request object, the handler's answer by reference)", sub: mwDir,
			note: "mc.actE('" + mwPattern + "', {a, b}) to mc.add's handler, which returns a new {r}; actE resolves to that object by " +
				"reference; one Node.js process (bench.mjs inproc actE)",
			drive: func(ctx context.Context, l Load) (Sample, error) {
				return runNodeLoad(ctx, mwDir, nil, l, append([]string{"bench.mjs", "inproc", "actE"}, nodeLoadArgs(l)...)...)
			}},
		{name: "microwizard-act", title: "MicroWizard act (callback)", sub: mwDir, note: "mc.act('" + mwPattern + "', {a, b}), the same process kind (bench.mjs inproc act)",
			drive: func(ctx context.Context, l Load) (Sample, error) {
				return runNodeLoad(ctx, mwDir, nil, l, append([]string{"bench.mjs", "inproc", "act"}, nodeLoadArgs(l)...)...)
			}},
		{name: "moleculer-call", title: "Moleculer broker.call", sub: molDir, note: "broker.call('bench.add', {a, b}) to a local service, no transporter, one Node.js process (rpc.mjs inproc)",
			drive: func(ctx context.Context, l Load) (Sample, error) {
				return runNodeLoad(ctx, molDir, nil, l, append([]string{"rpc.mjs", "inproc"}, nodeLoadArgs(l)...)...)
			}},
	}
}

// runInProcess measures the in-process rows at each of cfg.InProcess
// callers, cfg.Runs times, taking turns; a row whose toolchain is missing
// is skipped with a line and a [Gap].
func runInProcess(ctx context.Context, cfg Config, rep *Report, logf func(string, ...any)) error {
	var rows []inProcRow
	for _, r := range inProcRows() {
		if r.sub != "" {
			if why := prepareNode(ctx, r.sub); why != "" {
				logf("%-14s in-process: skipped: %s", r.title, why)
				rep.Gaps = append(rep.Gaps, Gap{Title: r.title + " in-process", Reason: why})
				continue
			}
		}
		rows = append(rows, r)
	}
	for _, n := range cfg.InProcess {
		load := Load{Callers: n, Warmup: cfg.Warmup, Duration: cfg.Duration, MaxCalls: cfg.MaxCalls}
		runs := make([][]Sample, len(rows))
		for run := range cfg.Runs {
			for i, r := range rows {
				s, err := r.drive(ctx, load)
				if err != nil {
					return fmt.Errorf("%s in-process, %d callers: %w", r.title, n, err)
				}
				logf("%-14s in-process, %d callers  run %d/%d  %10.0f req/s  p50 %9v  p99 %9v  errors %d",
					r.title, n, run+1, cfg.Runs, s.PerSec, s.P50, s.P99, s.Errors)
				runs[i] = append(runs[i], s)
			}
		}
		for i, r := range rows {
			rep.InProcess = append(rep.InProcess, cellOf(Contender{Name: r.name, Title: r.title}, n, runs[i]))
		}
	}
	return nil
}

// wizardCallName is the in-process row like for like with MicroWizard's
// actE; the section's ratios are to it.
const wizardCallName = "wizard-call"

// inProcKind says how a wizard in-process row calls.
type inProcKind int

const (
	inProcTyped  inProcKind = iota // a typed client's Call
	inProcDecode                   // node.ActE, then Result.Decode
	inProcMap                      // node.Act with a map
)

// driveWizardInProc measures a node calling its own handler: through a
// typed client, by ActE with the protobuf message, or by Act with a map.
func driveWizardInProc(kind inProcKind) func(ctx context.Context, l Load) (Sample, error) {
	return func(ctx context.Context, l Load) (Sample, error) {
		node, err := runtime.New()
		if err != nil {
			return Sample{}, err
		}
		defer node.Close()
		var c Client
		if kind == inProcMap {
			h := func(_ context.Context, req runtime.Request) (any, error) {
				a, _ := req.Float64("a")
				b, _ := req.Float64("b")
				return map[string]any{"r": a + b}, nil
			}
			if err := node.Add(wizardPattern, h); err != nil {
				return Sample{}, err
			}
			c = inProcAct{node}
		} else {
			add := func(_ context.Context, req *mathv1.AddRequest) (*mathv1.AddResponse, error) {
				return &mathv1.AddResponse{Sum: req.GetA() + req.GetB()}, nil
			}
			if err := node.Add(wizardPattern, runtime.NewUnaryHandler(add)); err != nil {
				return Sample{}, err
			}
			c = inProcActE{node}
			if kind == inProcTyped {
				cl, err := runtime.NewClient[mathv1.AddRequest, mathv1.AddResponse](node, wizardPattern)
				if err != nil {
					return Sample{}, err
				}
				c = inProcCall{cl}
			}
		}
		return drive(ctx, c, l)
	}
}

type inProcCall struct {
	c *runtime.Client[mathv1.AddRequest, mathv1.AddResponse]
}

func (c inProcCall) Call(ctx context.Context, a, b float64) (float64, error) {
	res, err := c.c.Call(ctx, &mathv1.AddRequest{A: a, B: b})
	if err != nil {
		return 0, err
	}
	return res.GetSum(), nil
}

func (inProcCall) Close() error { return nil }

type inProcActE struct{ node *runtime.Node }

func (c inProcActE) Call(ctx context.Context, a, b float64) (float64, error) {
	res, err := c.node.ActE(ctx, wizardPattern, &mathv1.AddRequest{A: a, B: b})
	if err != nil {
		return 0, err
	}
	var out mathv1.AddResponse
	if err := res.Decode(&out); err != nil {
		return 0, err
	}
	return out.GetSum(), nil
}

func (inProcActE) Close() error { return nil }

type inProcAct struct{ node *runtime.Node }

func (c inProcAct) Call(ctx context.Context, a, b float64) (float64, error) {
	res, err := c.node.Act(ctx, wizardPattern, map[string]any{"a": a, "b": b})
	if err != nil {
		return 0, err
	}
	var out struct {
		R float64 `json:"r"`
	}
	if err := res.Decode(&out); err != nil {
		return 0, err
	}
	return out.R, nil
}

func (inProcAct) Close() error { return nil }

// writeInProcess writes the in-process section.
func (r *Report) writeInProcess(b *strings.Builder) {
	if len(r.InProcess) == 0 {
		return
	}
	fmt.Fprintf(b, "## In-process calls: no network\n\n")
	fmt.Fprintf(b, "A call to a handler in the caller's own process, the same {a, b} -> {r}: wizard's in the Go load generator, "+
		"MicroWizard's and Moleculer's each in a Node.js process of their own (which times its calls as the harness does). "+
		"Each row's title says the work it does: the wizard typed call and MicroWizard's actE do the same (a new request, the handler's "+
		"new answer handed back by reference); ActE + Result.Decode also copies the answer into a new message. Ratios are to the "+
		"wizard typed call.\n\n")
	fmt.Fprintf(b, "| callers | call | req/s | p50 | p99 | req/s vs wizard typed call |\n|---:|---|---:|---:|---:|---:|\n")
	for _, c := range r.InProcess {
		base, ok := r.inProcCell(wizardCallName, c.Callers)
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s |\n", c.Callers, c.Contender, rate(c.PerSec), dur(c.P50), dur(c.P99), ratioIf(ok, c.PerSec, base.PerSec))
	}
	b.WriteString("\n")
	for _, row := range inProcRows() {
		fmt.Fprintf(b, "- **%s** (in-process): %s.\n", row.title, row.note)
	}
	b.WriteString("\n")
}

func (r *Report) inProcCell(name string, callers int) (Cell, bool) {
	for _, c := range r.InProcess {
		if c.Name == name && c.Callers == callers {
			return c, true
		}
	}
	return Cell{}, false
}
