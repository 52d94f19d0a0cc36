package runtime

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Spec names a call, for interceptors, logs, metrics and traces: its
// procedure and, for a typed call, the protobuf method and its message
// types. [Request.Spec] gives a handler's; [Call.Spec] a call's.
// Generated handlers and clients pass their method's descriptor with
// [Method]; other calls are named by their pattern.
type Spec struct {
	// Procedure is a typed method's full name,
	// "wizard.examples.math.v1.MathService/Sum", or an untyped call's
	// pattern in canonical form.
	Procedure string
	// Method is the typed method's descriptor; nil for an untyped call.
	Method protoreflect.MethodDescriptor
}

// procedureOf is the procedure name of md: its service's full name, a
// slash, the method's name.
func procedureOf(md protoreflect.MethodDescriptor) string {
	return string(md.Parent().FullName()) + "/" + string(md.Name())
}

// MethodOption names the typed method a handler serves or a client calls;
// [Method] makes one. It is a [HandlerOption] and a [CallOption].
type MethodOption struct{ spec *Spec }

// Method returns the option that gives a handler ([Node.Add]) or a client
// ([NewClient]) md as its [Spec]: interceptors see the method's full name
// and descriptors; the node lists the method's request and response types
// in its catalog, refuses a call that sends another protobuf type
// ([CodeInvalidArgument], naming both, without running the handler), and a
// caller that knows the type a pattern takes refuses to send another one.
// Generated code passes it for every method. A nil md adds nothing.
func Method(md protoreflect.MethodDescriptor) MethodOption {
	if md == nil {
		return MethodOption{}
	}
	return MethodOption{&Spec{Procedure: procedureOf(md), Method: md}}
}

func (o MethodOption) applyHandler(c *handlerConfig) {
	if o.spec != nil {
		c.spec = o.spec
	}
}

func (o MethodOption) applyCall(c *callConfig) {
	if o.spec != nil {
		c.spec = o.spec
	}
}

// Spec returns the handler's [Spec]: its method's when it was added with
// [Method], else its pattern's.
func (r Request) Spec() Spec {
	if r.entry == nil {
		return Spec{}
	}
	if r.entry.spec != nil {
		return *r.entry.spec
	}
	return Spec{Procedure: r.entry.pattern.String()}
}

// Spec returns the call's [Spec]: the method a typed client calls, else
// the call's pattern.
func (c *Call) Spec() Spec {
	if c.cfg != nil && c.cfg.spec != nil {
		return *c.cfg.spec
	}
	return Spec{Procedure: c.Pattern.String()}
}

// typeNames are the protobuf full names of the messages a typed handler
// takes and answers.
type typeNames struct{ in, out string }

func (s *Spec) types() typeNames {
	if s == nil || s.Method == nil {
		return typeNames{}
	}
	return typeNames{string(s.Method.Input().FullName()), string(s.Method.Output().FullName())}
}

// protoName is the protobuf full name of the Go type T (through *T), or
// "" when *T is not a protobuf message.
func protoName[T any]() string {
	if m, ok := any(new(T)).(proto.Message); ok {
		return string(m.ProtoReflect().Descriptor().FullName())
	}
	return ""
}

// messageType is the protobuf full name of a message as a handler or
// caller receives it, or "" when it is not a protobuf message (a map,
// JSON, nothing).
func messageType(msg any) string {
	switch m := msg.(type) {
	case *raw:
		if m.codec == CodecProto {
			return m.typ
		}
	case proto.Message:
		return string(m.ProtoReflect().Descriptor().FullName())
	}
	return ""
}

// errWrongRequest is the error of a typed handler of pattern, which takes
// want, given a message of type got.
func errWrongRequest(pattern, want, got string) *Error {
	return Errorf(CodeInvalidArgument, "wizard: %s takes %s, not %s", quoteClipped(pattern, maxEcho), want, got)
}

// errWrongResponse is the error of a typed client of pattern, which
// expects want, answered with a message of type got.
func errWrongResponse(pattern, want, got string) *Error {
	return Errorf(CodeInvalidArgument, "wizard: %s answered %s, not the %s the client expects", quoteClipped(pattern, maxEcho), got, want)
}
