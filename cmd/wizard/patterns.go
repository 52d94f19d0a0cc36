package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wizardmesh/wizard/runtime/introspect"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// patternsCommand is 'wizard patterns', listed in [commands].
var patternsCommand = &command{
	name: "patterns",
	args: "[GLOB]",
	summary: `List every pattern in the mesh's routing, its message types when typed, and
the targets that serve it, each with its state: connected or why not,
suspect, breaker (open or closed; "-" without breakers), calls in flight from
this node and the latency the default balancer expects of it. GLOB filters
the patterns: key:value pairs whose values may hold "*" (any run) and "?"
(one character) keep the patterns that have each key with a matching value,
whatever their other keys ('role:m*'); a GLOB without "*" or "?" is a
substring of the canonical pattern; any other GLOB matches it whole.`,
	example: `wizard patterns --seeds 127.0.0.1:7946
wizard patterns --seeds 127.0.0.1:7946 'role:m*'`,
	join: true,
	run:  runPatterns,
}

// targetJSON is a target as --output json prints it.
type targetJSON struct {
	ID        string  `json:"id"`
	Addr      string  `json:"addr"`
	Transport string  `json:"transport"`
	Connected bool    `json:"connected"`
	Suspect   bool    `json:"suspect"`
	Down      bool    `json:"down"`
	Breaker   string  `json:"breaker"`
	InFlight  int     `json:"in_flight"`
	LatencyMS float64 `json:"latency_ms"`
	Stalled   bool    `json:"stalled"`
	LastError string  `json:"last_error,omitempty"`
}

func targetsJSON(ts []introspect.TargetState) []targetJSON {
	out := make([]targetJSON, 0, len(ts))
	for _, t := range ts {
		out = append(out, targetJSON{ID: t.ID, Addr: t.Addr, Transport: t.Transport, Connected: t.Connected, Suspect: t.Suspect, Down: t.Down,
			Breaker: breakerName(t.Breaker), InFlight: t.InFlight, LatencyMS: float64(t.Latency) / float64(time.Millisecond), Stalled: t.Stalled, LastError: t.LastError})
	}
	return out
}

func breakerName(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// targetLine is a target for a person.
func targetLine(t introspect.TargetState) string {
	name := t.Addr
	if t.ID != "" {
		name = t.ID + " at " + t.Addr
	}
	state := "connected"
	switch {
	case !t.Connected && t.LastError != "":
		state = "not connected: " + t.LastError
	case !t.Connected:
		state = "not connected"
	}
	if t.Suspect {
		state += ", suspect"
	}
	if t.Down {
		state += ", reported down"
	}
	if t.Stalled {
		state += ", stalled"
	}
	lat := "-"
	if t.Latency > 0 {
		lat = t.Latency.Round(time.Microsecond).String()
	}
	b := t.Breaker
	if b == "" {
		b = "-"
	}
	return fmt.Sprintf("%s\t%s\tbreaker %s\tin flight %d\tlatency %s", name, state, b, t.InFlight, lat)
}

type patternJSON struct {
	Pattern  string       `json:"pattern"`
	Local    bool         `json:"local,omitempty"`
	Request  string       `json:"request,omitempty"`
	Response string       `json:"response,omitempty"`
	Targets  []targetJSON `json:"targets"`
	// TypesDiffer lists the types of each target when they differ.
	TypesDiffer []targetTypesJSON `json:"types_differ,omitempty"`
}

func runPatterns(ctx context.Context, c *cli, args []string, _ any) error {
	if err := wantArgs("patterns", args, 0, 1, ""); err != nil {
		return err
	}
	glob := ""
	if len(args) == 1 {
		glob = args[0]
	}
	n, err := c.node(ctx)
	if err != nil {
		return err
	}
	var routes []introspect.Route
	for _, info := range n.Patterns() {
		if glob != "" && !filterMatch(glob, info.Pattern) {
			continue
		}
		if r, ok, _ := n.Route(info.Pattern.String()); ok {
			routes = append(routes, r)
		}
	}
	probe := newTypeProbe(n)
	differ := make([][]targetTypesJSON, len(routes))
	for i, r := range routes {
		differ[i] = probe.differ(ctx, r.Pattern.String(), r.Request, r.Targets)
	}
	if c.json {
		out := make([]patternJSON, 0, len(routes))
		for i, r := range routes {
			out = append(out, patternJSON{Pattern: r.Pattern.String(), Local: r.Local, Request: r.Request, Response: r.Response, Targets: targetsJSON(r.Targets), TypesDiffer: differ[i]})
		}
		c.printJSON(out)
		return nil
	}
	if len(routes) == 0 {
		if glob != "" {
			c.printf("no pattern matches %q\n", glob)
		} else {
			c.printf("no patterns\n")
		}
		return nil
	}
	w := tabwriter.NewWriter(c.io.out, 0, 4, 2, ' ', 0)
	defer w.Flush()
	for i, r := range routes {
		line := r.Pattern.String()
		if line == "" {
			line = `"" (catch-all)`
		}
		if r.Request != "" {
			line += "  (" + r.Request + " -> " + r.Response + ")"
		}
		if differ[i] != nil {
			line += "  (" + typesDiffer(differ[i]) + ")"
		}
		c.fprintf(w, "%s\n", line)
		for _, t := range r.Targets {
			c.fprintf(w, "  %s\n", targetLine(t))
		}
	}
	return nil
}

// filterMatch matches pattern p against a GLOB of the patterns command:
// '*' any run, '?' one character; without either, a substring of p's
// canonical form. A GLOB of key:value pairs matches a pattern that has
// each key with a value the pair's glob matches, whatever its other keys
// and their order ("role:m*" matches "cmd:sum,role:math"); any other
// GLOB matches the canonical form whole.
func filterMatch(glob string, p pattern.Pattern) bool {
	s := p.String()
	if !strings.ContainsAny(glob, "*?") {
		return strings.Contains(s, glob)
	}
	if pairs, ok := globPairs(glob); ok {
		for k, vg := range pairs {
			v, found := p.Get(k)
			if !found || !globMatch(vg, v) {
				return false
			}
		}
		return true
	}
	return globMatch(glob, s)
}

// globPairs reads glob as comma-separated key:value-glob pairs whose keys
// have no wildcard.
func globPairs(glob string) (map[string]string, bool) {
	out := map[string]string{}
	for part := range strings.SplitSeq(glob, ",") {
		k, v, ok := strings.Cut(part, ":")
		if !ok || k == "" || strings.ContainsAny(k, "*?") {
			return nil, false
		}
		out[k] = v
	}
	return out, true
}

// globMatch matches s against glob ('*' any run, '?' one byte), with
// backtracking to the last star only: linear in practice.
func globMatch(glob, s string) bool {
	gi, si, star, mark := 0, 0, -1, 0
	for si < len(s) {
		switch {
		case gi < len(glob) && (glob[gi] == '?' || glob[gi] == s[si]):
			gi++
			si++
		case gi < len(glob) && glob[gi] == '*':
			star, mark = gi, si
			gi++
		case star >= 0:
			gi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for gi < len(glob) && glob[gi] == '*' {
		gi++
	}
	return gi == len(glob)
}
