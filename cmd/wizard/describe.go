package main

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// describeCommand is 'wizard describe', listed in [commands].
var describeCommand = &command{
	name: "describe",
	args: "PATTERN",
	summary: `Print the request and response schema of a typed pattern, from the
descriptors the serving node publishes on introspect.DescribePattern
(cmd:describe,sys:wizard): the method, and every message it takes or answers
in proto syntax. An untyped pattern says so: its handler takes any JSON.`,
	example: `wizard describe --seeds 127.0.0.1:7946 role:math,cmd:sum`,
	join:    true,
	run:     runDescribe,
}

type fieldJSON struct {
	Name     string `json:"name"`
	JSONName string `json:"json_name"`
	Number   int    `json:"number"`
	Type     string `json:"type"`
	Label    string `json:"label,omitempty"`
}

type messageJSON struct {
	Name   string      `json:"name"`
	Fields []fieldJSON `json:"fields"`
}

type describeJSON struct {
	Pattern  string        `json:"pattern"`
	Node     string        `json:"node"`
	Typed    bool          `json:"typed"`
	Method   string        `json:"method,omitempty"`
	Request  string        `json:"request,omitempty"`
	Response string        `json:"response,omitempty"`
	Messages []messageJSON `json:"messages,omitempty"`
	Proto    string        `json:"proto,omitempty"`
}

func runDescribe(ctx context.Context, c *cli, args []string, _ any) error {
	if err := wantArgs("describe", args, 1, 1, "PATTERN"); err != nil {
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
	if !x.Found {
		return x.Refused
	}
	winner := x.Candidates[0].Pattern.String()
	ctx, cancel := context.WithTimeout(ctx, *c.mesh.timeout)
	defer cancel()
	s, err := n.Describe(ctx, winner)
	if err != nil {
		return err
	}
	out := describeJSON{Pattern: winner, Node: s.ID}
	if _, ok := s.Methods[winner]; !ok {
		if c.json {
			c.printJSON(out)
		} else {
			c.printf("%s is untyped: its handler (node %s) takes and answers any JSON\n", winner, s.ID)
		}
		return nil
	}
	md, err := s.Method(winner)
	if err != nil {
		return err
	}
	out.Typed, out.Method = true, string(md.Parent().FullName())+"/"+string(md.Name())
	out.Request, out.Response = string(md.Input().FullName()), string(md.Output().FullName())
	msgs := reachable(md.Input(), md.Output())
	var b strings.Builder
	fmt.Fprintf(&b, "// %s, served by node %s\nrpc %s(%s) returns (%s);\n", winner, s.ID, out.Method, out.Request, out.Response)
	for _, m := range msgs {
		mj := messageJSON{Name: string(m.FullName()), Fields: []fieldJSON{}}
		fmt.Fprintf(&b, "\nmessage %s {\n", m.FullName())
		fs := m.Fields()
		for i := range fs.Len() {
			f := fs.Get(i)
			label := ""
			switch {
			case f.IsMap():
			case f.IsList():
				label = "repeated"
			case f.HasPresence() && f.ContainingOneof() == nil && f.Kind() != protoreflect.MessageKind:
				label = "optional"
			}
			typ := fieldType(f)
			mj.Fields = append(mj.Fields, fieldJSON{Name: string(f.Name()), JSONName: f.JSONName(), Number: int(f.Number()), Type: typ, Label: label})
			if label != "" {
				label += " "
			}
			fmt.Fprintf(&b, "  %s%s %s = %d;\n", label, typ, f.Name(), f.Number())
		}
		b.WriteString("}\n")
		out.Messages = append(out.Messages, mj)
	}
	out.Proto = b.String()
	if c.json {
		c.printJSON(out)
		return nil
	}
	c.printf("%s", out.Proto)
	return nil
}

// fieldType is f's type as proto syntax writes it.
func fieldType(f protoreflect.FieldDescriptor) string {
	if f.IsMap() {
		return "map<" + fieldType(f.MapKey()) + ", " + fieldType(f.MapValue()) + ">"
	}
	switch f.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return string(f.Message().FullName())
	case protoreflect.EnumKind:
		return string(f.Enum().FullName())
	}
	return f.Kind().String()
}

// reachable lists the messages of roots and those their fields hold, in
// the order met, skipping map entries.
func reachable(roots ...protoreflect.MessageDescriptor) []protoreflect.MessageDescriptor {
	var out []protoreflect.MessageDescriptor
	seen := map[protoreflect.FullName]bool{}
	var visit func(m protoreflect.MessageDescriptor)
	visit = func(m protoreflect.MessageDescriptor) {
		if seen[m.FullName()] {
			return
		}
		seen[m.FullName()] = true
		if !m.IsMapEntry() {
			out = append(out, m)
		}
		fs := m.Fields()
		for i := range fs.Len() {
			if sub := fs.Get(i).Message(); sub != nil {
				visit(sub)
			}
		}
	}
	for _, r := range roots {
		visit(r)
	}
	return out
}
