package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/wizardmesh/wizard/cmd/wizard/internal/jsonic"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// inputError is malformed input, named: "DATA", "PATTERN", "MESSAGE".
type inputError struct {
	what string
	err  error
}

func (e *inputError) Error() string { return e.what + ": " + e.err.Error() }
func (e *inputError) Unwrap() error { return e.err }

// callFlags are the flags of the commands that call (act, bench, repl).
type callFlags struct {
	mixin    string
	noReply  bool
	metadata metadataFlag
	stream   bool // act --stream
}

// metadataFlag collects --metadata k=v.
type metadataFlag []string

func (m *metadataFlag) String() string { return strings.Join(*m, ",") }

func (m *metadataFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q: want key=value", s)
	}
	*m = append(*m, k, v)
	return nil
}

// call is one prepared call: what act, bench and the REPL send.
type call struct {
	act     bool // Act with msg: every root key routes
	pattern string
	msg     any
	method  protoreflect.MethodDescriptor // nil: untyped
	opts    []runtime.CallOption
	md      []string       // metadata pairs
	route   map[string]any // what routes, for Explain
}

// prepare reads PATTERN [DATA] (or one MESSAGE) into a call; a typed
// pattern's data is encoded into its request type through the serving
// node's schema.
func prepare(ctx context.Context, n *runtime.Node, args []string, stdin io.Reader, f *callFlags) (*call, error) {
	cl := &call{md: f.metadata}
	if f.noReply {
		cl.opts = append(cl.opts, runtime.NoReply())
	}
	var route map[string]any // what routes, for Explain
	switch len(args) {
	case 1:
		msg, err := jsonic.ParseObject(args[0])
		if err != nil {
			return nil, &inputError{"MESSAGE", err}
		}
		if f.mixin != "" {
			return nil, usagef("--mixin needs PATTERN and DATA: a single MESSAGE routes by all its keys")
		}
		cl.act, cl.msg, route = true, msg, msg
	case 2:
		p, err := pattern.Parse(args[0])
		if err != nil {
			return nil, &inputError{"PATTERN", err}
		}
		text := args[1]
		if text == "-" {
			b, err := io.ReadAll(stdin)
			if err != nil {
				return nil, fmt.Errorf("read DATA from the standard input: %w", err)
			}
			text = string(b)
		}
		data, err := jsonic.Parse(text)
		if err != nil {
			return nil, &inputError{"DATA", err}
		}
		cl.pattern, cl.msg = p.String(), data
		route = map[string]any{}
		for _, pr := range p.Pairs() {
			route[pr.Key] = pr.Value
		}
		if keys := splitList(f.mixin); len(keys) > 0 {
			cl.opts = append(cl.opts, runtime.Mixin(keys...))
			m, _ := data.(map[string]any)
			for _, k := range keys {
				if _, ok := route[k]; !ok && m != nil && m[k] != nil {
					route[k] = m[k]
				}
			}
		}
	default:
		return nil, usagef("want PATTERN [DATA] or one MESSAGE, not %d arguments", len(args))
	}
	cl.route = route
	x, err := n.ExplainMessage(route)
	if err != nil || !x.Found {
		return cl, nil // not found: the call says so
	}
	winner := x.Candidates[0].Pattern
	if ts := newTypeProbe(n).differ(ctx, winner.String(), x.Request, x.Targets); ts != nil {
		return nil, mismatchError(winner.String(), ts)
	}
	if x.Request == "" {
		return cl, nil // untyped
	}
	if cl.act {
		// A typed handler takes its request alone: the pattern routes.
		m := cl.msg.(map[string]any)
		rest := map[string]any{}
		for k, v := range m {
			if _, ok := winner.Get(k); !ok {
				rest[k] = v
			}
		}
		cl.act, cl.pattern, cl.msg = false, winner.String(), rest
	}
	s, err := n.Describe(ctx, winner.String())
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", winner, err)
	}
	md, err := s.Method(winner.String())
	if err != nil {
		return nil, err
	}
	pm, err := encodeTyped("DATA", md.Input(), cl.msg)
	if err != nil {
		return nil, err
	}
	cl.method, cl.msg = md, pm
	return cl, nil
}

// encodeTyped encodes data into a new message of type d, through JSON;
// what names data in an error.
func encodeTyped(what string, d protoreflect.MessageDescriptor, data any) (proto.Message, error) {
	b, err := json.Marshal(data)
	if err != nil {
		return nil, &inputError{what, err}
	}
	m := dynamicpb.NewMessage(d)
	if err := protojson.Unmarshal(b, m); err != nil {
		return nil, &inputError{what, runtime.Errorf(runtime.CodeInvalidArgument, "does not fit %s: %v", d.FullName(), err)}
	}
	return m, nil
}

// send makes the call.
func (cl *call) send(ctx context.Context, n *runtime.Node) (runtime.Result, error) {
	if len(cl.md) > 0 {
		ctx = runtime.AppendMetadata(ctx, cl.md...)
	}
	if cl.act {
		return n.Act(ctx, "", cl.msg, cl.opts...)
	}
	return n.ActE(ctx, cl.pattern, cl.msg, cl.opts...)
}

// deliverCancel returns once the cancel of an interrupted call has
// reached the peers that may run it, or after a second: the node sends a
// cancel as a frame of its own, which a shutdown right after the call
// could drop, leaving the remote handler to run to the call's deadline.
// It asks each connected target for its schema on the same connection:
// frames leave in order, so the answer comes after the cancel arrived.
func (cl *call) deliverCancel(n *runtime.Node) {
	x, err := n.ExplainMessage(cl.route)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, t := range x.Targets {
		if t.Connected {
			n.DescribePeer(ctx, t.Addr)
		}
	}
}

// answerJSON is a call's answer as indented JSON: a typed answer through
// its method's response type.
func answerJSON(res runtime.Result, md protoreflect.MethodDescriptor) ([]byte, error) {
	if md != nil {
		out := dynamicpb.NewMessage(md.Output())
		if err := res.Decode(out); err == nil {
			return protoJSON(out)
		}
	}
	switch v := res.Value().(type) {
	case proto.Message:
		return protoJSON(v)
	case []byte:
		if utf8.Valid(v) {
			return json.Marshal(string(v))
		}
		return json.Marshal(v)
	default:
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("the answer does not print as JSON: %w", err)
		}
		return b, nil
	}
}

func protoJSON(m proto.Message) ([]byte, error) {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	// protojson randomises its spacing; a CLI's output should not change
	// from run to run.
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return b, nil
	}
	return json.MarshalIndent(v, "", "  ")
}

// isCallError reports whether err came from the call (coded), not from
// the command line.
func isCallError(err error) bool {
	var e *runtime.Error
	var ie *inputError
	return errors.As(err, &e) && !errors.As(err, &ie)
}
