package main

import (
	"context"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/wizardmesh/wizard/cmd/wizard/internal/jsonic"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// explainCommand is 'wizard explain', listed in [commands].
var explainCommand = &command{
	name: "explain",
	args: "PATTERN | MESSAGE",
	summary: `Say which pattern answers a message, and why: the winner by Seneca's
precedence (patrun's find), every other pattern that matches, in the order
they would answer were those before them removed, each with the rule it lost
by (exact before glob, glob order, first key in byte order, deeper wins, or
the walk kept a handler found earlier), the targets of the winner with their
state, which one the balancer picks next and why, and whether a call would be
refused now (nothing matches, no target connected, every breaker open).

The argument is a pattern (role:math,cmd:sum) or a message, JSON or
key:value pairs; only its root scalar fields route.`,
	example: `wizard explain --seeds 127.0.0.1:7946 role:math,cmd:sum
wizard explain --seeds 127.0.0.1:7946 '{"role":"math","cmd":"sum","values":[1,2]}'`,
	join: true,
	run:  runExplain,
}

type candidateJSON struct {
	Pattern string `json:"pattern"`
	Rank    int    `json:"rank"`
	Rule    string `json:"rule,omitempty"`
	Key     string `json:"key,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

type explainJSON struct {
	Message    string          `json:"message"`
	Found      bool            `json:"found"`
	Winner     string          `json:"winner,omitempty"`
	Candidates []candidateJSON `json:"candidates"`
	Local      bool            `json:"local,omitempty"`
	Request    string          `json:"request,omitempty"`
	Response   string          `json:"response,omitempty"`
	Targets    []targetJSON    `json:"targets"`
	Balancer   string          `json:"balancer,omitempty"`
	Next       string          `json:"next,omitempty"`
	NextReason string          `json:"next_reason,omitempty"`
	Refused    *refusalJSON    `json:"refused,omitempty"`
	// TypesDiffer lists the types of each target when they differ.
	TypesDiffer []targetTypesJSON `json:"types_differ,omitempty"`
}

type refusalJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// explainArg explains a pattern or a message: read as a message first
// (JSON or key:value pairs, whose nested values do not route), else as a
// pattern (which may quote what a message cannot).
func explainArg(n *runtime.Node, arg string) (runtime.Explanation, error) {
	msg, err := jsonic.ParseObject(arg)
	if err == nil {
		return n.ExplainMessage(msg)
	}
	if _, perr := pattern.Parse(arg); perr == nil && !strings.HasPrefix(strings.TrimSpace(arg), "{") {
		return n.Explain(arg)
	}
	return runtime.Explanation{}, &inputError{"MESSAGE", err}
}

func runExplain(ctx context.Context, c *cli, args []string, _ any) error {
	if err := wantArgs("explain", args, 1, 1, "PATTERN or MESSAGE"); err != nil {
		return err
	}
	n, err := c.node(ctx)
	if err != nil {
		return err
	}
	x, err := explainArg(n, args[0])
	if err != nil {
		return err
	}
	var differ []targetTypesJSON
	if x.Found {
		differ = newTypeProbe(n).differ(ctx, x.Candidates[0].Pattern.String(), x.Request, x.Targets)
	}
	if c.json {
		out := toExplainJSON(x)
		out.TypesDiffer = differ
		c.printJSON(out)
		return nil
	}
	writeExplanation(c, x, differ)
	return nil
}

func toExplainJSON(x runtime.Explanation) explainJSON {
	out := explainJSON{Message: x.Message.String(), Found: x.Found, Local: x.Local, Request: x.Request, Response: x.Response,
		Targets: targetsJSON(x.Targets), Balancer: x.Balancer, Next: x.Next, NextReason: x.NextReason, Candidates: []candidateJSON{}}
	if x.Found {
		out.Winner = x.Candidates[0].Pattern.String()
	}
	for _, cd := range x.Candidates {
		out.Candidates = append(out.Candidates, candidateJSON{Pattern: cd.Pattern.String(), Rank: cd.Rank, Rule: string(cd.Rule), Key: cd.Key, Reason: cd.Reason})
	}
	if x.Refused != nil {
		out.Refused = &refusalJSON{x.Refused.Code.String(), x.Refused.Message}
	}
	return out
}

func patternText(p pattern.Pattern) string {
	if p.Len() == 0 {
		return `"" (catch-all)`
	}
	return p.String()
}

func writeExplanation(c *cli, x runtime.Explanation, differ []targetTypesJSON) {
	c.printf("message     %s\n", x.Message.String())
	if !x.Found {
		c.printf("winner      none: no added pattern matches\n")
	} else {
		c.printf("winner      %s\n", patternText(x.Candidates[0].Pattern))
	}
	if len(x.Candidates) > 1 {
		c.printf("candidates  in precedence order:\n")
		for _, cd := range x.Candidates {
			rank := "never"
			if cd.Rank > 0 {
				rank = strconv.Itoa(cd.Rank) + "."
			}
			if cd.Rank == 1 {
				c.printf("  %s %s  wins\n", rank, patternText(cd.Pattern))
				continue
			}
			c.printf("  %s %s  lost: %s\n", rank, patternText(cd.Pattern), cd.Reason)
		}
	}
	if x.Request != "" {
		c.printf("types       %s -> %s\n", x.Request, x.Response)
	}
	if differ != nil {
		c.printf("types       differ by target (wizard act refuses the call):\n")
		for _, t := range differ {
			c.printf("  %s\n", t)
		}
	}
	if x.Found {
		switch {
		case x.Local:
			c.printf("targets     this node's own handler\n")
		case len(x.Targets) == 0:
			c.printf("targets     none\n")
		default:
			c.printf("targets\n")
			w := tabwriter.NewWriter(c.io.out, 0, 4, 2, ' ', 0)
			for _, t := range x.Targets {
				c.fprintf(w, "  %s\n", targetLine(t))
			}
			w.Flush()
		}
		if x.Balancer != "" {
			c.printf("balancer    %s\n", x.Balancer)
		}
		if x.Next != "" {
			c.printf("next        %s: %s\n", x.Next, x.NextReason)
		} else if x.NextReason != "" {
			c.printf("next        %s\n", x.NextReason)
		}
	}
	if x.Refused != nil {
		c.printf("a call      refused: %s\n", errorText(x.Refused))
	} else {
		c.printf("a call      would be sent\n")
	}
}
