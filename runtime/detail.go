package runtime

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// An error's details are the handler's own messages in-process, and
// remotely the messages decoded from the google.protobuf.Any each one
// travels as: of the same type when the caller's binary links it, else
// the *anypb.Any itself. DetailAs and AnyDetails read them alike in both
// cases.

// DetailAs finds the first of e's details of dst's type, copies it into
// dst and reports whether it found one: the one way to read a detail that
// works in-process and remotely, whether or not the caller's binary
// registers the detail's type (a detail it does not register arrives as
// an *anypb.Any, which DetailAs unpacks).
func (e *Error) DetailAs(dst proto.Message) bool {
	if e == nil || dst == nil {
		return false
	}
	want := dst.ProtoReflect().Descriptor().FullName()
	for _, d := range e.Details {
		if d == nil {
			continue
		}
		if a, ok := d.(*anypb.Any); ok && want != "google.protobuf.Any" {
			if a.MessageName() == want && a.UnmarshalTo(dst) == nil {
				return true
			}
			continue
		}
		switch desc := d.ProtoReflect().Descriptor(); {
		case desc == dst.ProtoReflect().Descriptor():
			proto.Reset(dst)
			proto.Merge(dst, d)
			return true
		case desc.FullName() == want:
			// The same name from another descriptor: proto.Merge would
			// panic, the wire form does not.
			if b, err := proto.Marshal(d); err == nil && proto.Unmarshal(b, dst) == nil {
				return true
			}
		}
	}
	return false
}

// AnyDetails returns e's details each as a google.protobuf.Any, the form
// in which they cross the wire: the same list in-process and remotely,
// whatever types the caller's binary registers. A detail that cannot be
// encoded is left out, as it is on the wire.
func (e *Error) AnyDetails() []*anypb.Any {
	if e == nil || len(e.Details) == 0 {
		return nil
	}
	out := make([]*anypb.Any, 0, len(e.Details))
	for _, d := range e.Details {
		if a, ok := d.(*anypb.Any); ok {
			out = append(out, a)
			continue
		}
		if d == nil {
			continue
		}
		if a, err := anypb.New(d); err == nil {
			out = append(out, a)
		}
	}
	return out
}
