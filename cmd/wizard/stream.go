package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/wizardmesh/wizard/cmd/wizard/internal/jsonic"
	"github.com/wizardmesh/wizard/runtime"
)

// runActStream is 'wizard act --stream': PATTERN [DATA] [-] or MESSAGE.
func runActStream(ctx context.Context, c *cli, args []string, f *callFlags) error {
	if err := wantArgs("act", args, 1, 3, "PATTERN"); err != nil {
		return err
	}
	var in io.Reader
	if last := len(args) - 1; last > 0 && args[last] == "-" {
		args, in = args[:last], c.io.in
	} else if len(args) == 3 {
		return usagef("unexpected argument %q: a stream's third argument is \"-\" (the standard input); see 'wizard help act'", args[2])
	}
	c.lines = true
	n, err := c.node(ctx)
	if err != nil {
		return err
	}
	cl, first, err := prepareStream(ctx, n, args, in != nil && len(args) == 1, f)
	if err != nil {
		return err
	}
	err = cl.stream(ctx, n, first, in, c.io.out)
	if err != nil && context.Cause(ctx) != nil {
		cl.deliverCancel(n) // interrupted: the handler's ctx ends now
	}
	return kindHint(err, "act without --stream")
}

// kindHint adds hint (such as "act --stream") to err when err says that
// the pattern's handler serves streams and was called, or is unary and
// was opened as a stream: the other way reaches it.
func kindHint(err error, hint string) error {
	e, ok := errors.AsType[*runtime.Error](err)
	if !ok || e.Code != runtime.CodeUnimplemented || !strings.Contains(e.Message, "serves streams") && !strings.Contains(e.Message, "served by a unary handler") {
		return err
	}
	return runtime.Errorf(e.Code, "%s: use %s", e.Message, hint)
}

// prepareStream reads a stream's arguments into a call and the messages
// it sends first: one MESSAGE, sent as act sends it (a typed pattern's
// handler receives the keys that do not route), or PATTERN and DATA, each
// DATA a message in order. bare is PATTERN alone: nothing is sent first.
func prepareStream(ctx context.Context, n *runtime.Node, args []string, bare bool, f *callFlags) (*call, []any, error) {
	switch {
	case f.mixin != "":
		return nil, nil, usagef("--mixin does not apply to a stream: its PATTERN alone routes")
	case f.noReply:
		return nil, nil, usagef("--no-reply does not apply to a stream")
	}
	head := args[:min(len(args), 2)]
	if bare {
		head = []string{args[0], "{}"} // resolves PATTERN's types; not sent
	}
	cl, err := prepare(ctx, n, head, strings.NewReader(""), f)
	if err != nil {
		return nil, nil, err
	}
	if cl.act {
		// An untyped MESSAGE: its routed pairs open the stream, and its
		// handler receives it whole, as Act's does.
		x, err := n.ExplainMessage(cl.route)
		if err != nil {
			return nil, nil, &inputError{"MESSAGE", err}
		}
		cl.pattern = x.Message.String()
	}
	var first []any
	if !bare {
		first = append(first, cl.msg)
	}
	for i, text := range args[min(len(args), 2):] {
		m, err := cl.message(dataName(i+1), text)
		if err != nil {
			return nil, nil, err
		}
		first = append(first, m)
	}
	return cl, first, nil
}

// dataName names the i-th DATA of a stream, from 0, in an error.
func dataName(i int) string {
	if i == 0 {
		return "DATA"
	}
	return fmt.Sprintf("DATA %d", i+1)
}

// message parses text, a DATA or a line of the standard input (named by
// what in an error), into a message of cl's request type.
func (cl *call) message(what, text string) (any, error) {
	data, err := jsonic.Parse(text)
	if err != nil {
		return nil, &inputError{what, err}
	}
	if cl.method == nil {
		return data, nil
	}
	return encodeTyped(what, cl.method.Input(), data)
}

// stream opens cl as a stream, sends first and then, when in is not nil,
// each line of in, and closes its sending side; meanwhile it writes each
// message it receives to out as one JSON line, as it arrives. It returns
// when the stream ends: nil when it ends OK, else its error; a line of in
// that is not a message cancels the stream, and stream returns its
// [inputError].
func (cl *call) stream(ctx context.Context, n *runtime.Node, first []any, in io.Reader, out io.Writer) error {
	if len(cl.md) > 0 {
		ctx = runtime.AppendMetadata(ctx, cl.md...)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := n.OpenStream(ctx, cl.pattern, cl.opts...)
	if err != nil {
		return err
	}
	defer s.Close()
	failed := make(chan error, 1) // the sending side's own failure
	go func() {
		if err := cl.sendAll(s, first, in); err != nil {
			failed <- err
			cancel()
		}
	}()
	for {
		res, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			select {
			case ferr := <-failed:
				return ferr
			default:
				return err
			}
		}
		b, err := messageLine(res, cl.method)
		if err != nil {
			return err
		}
		if _, err := out.Write(b); err != nil {
			return err // a closed pipe (| head) ends the stream
		}
	}
}

// sendAll sends first, then each line of in (when not nil; blank lines
// skipped) as one message, then closes the sending side. It returns the
// error of a line that is not a message, of reading in, or of a failed
// Send; a Send that finds the stream ended returns nil (Recv tells how it
// ended).
func (cl *call) sendAll(s *runtime.ClientStream[any, runtime.Result], first []any, in io.Reader) error {
	for i, m := range first {
		if err := s.Send(m); err != nil {
			return sendError(dataName(i), err)
		}
	}
	if in != nil {
		r := bufio.NewReader(in)
		for line := 1; ; line++ {
			text, rerr := r.ReadString('\n')
			if text = strings.TrimSpace(text); text != "" {
				what := fmt.Sprintf("standard input line %d", line)
				m, err := cl.message(what, text)
				if err != nil {
					return lineError(err)
				}
				if err := s.Send(m); err != nil {
					return sendError(what, err)
				}
			}
			if errors.Is(rerr, io.EOF) {
				break
			}
			if rerr != nil {
				return fmt.Errorf("read the standard input: %w", rerr)
			}
		}
	}
	return s.CloseSend()
}

// sendError is the error of a failed Send of the message what names: nil
// when the stream ended, an [inputError] for a message too large to send.
func sendError(what string, err error) error {
	switch {
	case errors.Is(err, io.EOF):
		return nil
	case runtime.CodeOf(err) == runtime.CodeResourceExhausted:
		return &inputError{what, err}
	}
	return err
}

// lineError is err, from a line of input, with a syntax error placed by
// its column alone: the line is named already.
func lineError(err error) error {
	var ie *inputError
	var se *jsonic.SyntaxError
	if errors.As(err, &ie) && errors.As(err, &se) {
		return &inputError{ie.what, &columnError{se}}
	}
	return err
}

// columnError is a syntax error in a single line.
type columnError struct{ *jsonic.SyntaxError }

func (e *columnError) Error() string { return fmt.Sprintf("column %d: %s", e.Column, e.Reason) }
func (e *columnError) Unwrap() error { return e.SyntaxError }

// messageLine is a message received on a stream as one line of JSON: a
// typed message through its method's response type.
func messageLine(res runtime.Result, md protoreflect.MethodDescriptor) ([]byte, error) {
	b, err := answerJSON(res, md)
	if err != nil {
		return nil, err
	}
	var line bytes.Buffer
	if err := json.Compact(&line, b); err != nil {
		return nil, err
	}
	line.WriteByte('\n')
	return line.Bytes(), nil
}
