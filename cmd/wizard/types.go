package main

import (
	"context"
	"strings"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/introspect"
)

// targetTypesJSON is the message types one target serves a pattern with,
// as --output json prints them ("" when untyped).
type targetTypesJSON struct {
	Target   string `json:"target"`
	Request  string `json:"request,omitempty"`
	Response string `json:"response,omitempty"`
}

func (t targetTypesJSON) String() string {
	types := "untyped"
	if t.Request != "" {
		types = t.Request + " -> " + t.Response
	}
	return t.Target + ": " + types
}

// typeProbe learns the message types each target serves a pattern with,
// asking each peer its schema once: a route lists types only when all its
// targets agree, and a call sent to a target of other types than the
// command encoded would be answered in a type it cannot read.
type typeProbe struct {
	n       *runtime.Node
	schemas map[string]*runtime.Schema // by address; nil: not answered
}

func newTypeProbe(n *runtime.Node) *typeProbe {
	return &typeProbe{n: n, schemas: map[string]*runtime.Schema{}}
}

// differ returns the types each connected target of pattern serves it
// with when they differ, nil when they agree. request is the type the
// route lists: when it lists one, the targets agree.
func (tp *typeProbe) differ(ctx context.Context, pattern, request string, targets []introspect.TargetState) []targetTypesJSON {
	if request != "" || len(targets) < 2 {
		return nil
	}
	var out []targetTypesJSON
	for _, t := range targets {
		if !t.Connected {
			continue
		}
		s := tp.schema(ctx, t.Addr)
		if s == nil {
			continue
		}
		tt := targetTypesJSON{Target: t.Addr}
		if t.ID != "" {
			tt.Target = t.ID + " at " + t.Addr
		}
		if md, err := s.Method(pattern); err == nil {
			tt.Request, tt.Response = string(md.Input().FullName()), string(md.Output().FullName())
		}
		out = append(out, tt)
	}
	for _, tt := range out[min(1, len(out)):] {
		if tt.Request != out[0].Request || tt.Response != out[0].Response {
			return out
		}
	}
	return nil
}

func (tp *typeProbe) schema(ctx context.Context, addr string) *runtime.Schema {
	if s, ok := tp.schemas[addr]; ok {
		return s
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var sp *runtime.Schema
	if s, err := tp.n.DescribePeer(ctx, addr); err == nil {
		sp = &s
	}
	tp.schemas[addr] = sp
	return sp
}

// typesDiffer says in a line that the targets serve different types.
func typesDiffer(ts []targetTypesJSON) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.String()
	}
	return "types differ: " + strings.Join(parts, "; ")
}

// mismatchError is the error of a call to a pattern whose targets serve
// different types.
func mismatchError(pattern string, ts []targetTypesJSON) error {
	return runtime.Errorf(runtime.CodeFailedPrecondition, "the targets of %s serve it with different message types, so its answer could be read as the wrong one: %s; call one target (--peers) or make them agree", pattern, strings.TrimPrefix(typesDiffer(ts), "types differ: "))
}
