package microwizard

import (
	"encoding/json"
	"errors"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/wizardmesh/wizard/runtime"
)

// NodeError is a Node.js error as MicroWizard or Seneca sent it (never
// its stack). [NodeErrorOf] finds it in an error a call returned.
type NodeError struct {
	// Name is the error's name ("Error", "TypeError").
	Name string
	// Message is its message: a Seneca error's is Seneca's wrapper
	// ("seneca: Action cmd:fail,role:test failed: bad input."), as
	// Seneca's own client shows it in err.message.
	Message string
	// Code is its code, when it has a string one ("act_execute",
	// "message_loop", a gRPC code name from a Go node).
	Code string
	// Orig is the error a Seneca action failed with, which Seneca wraps
	// (code act_execute): what Seneca's own client shows in err.orig,
	// with the message of err.details (Seneca's wire carries the
	// original's own fields, not its message, nor its name unless it set
	// one of its own). Nil for an error that wraps none.
	Orig *NodeError
}

// NodeErrorOf returns the Node.js error err came from, or nil when err
// did not come from MicroWizard or Seneca.
func NodeErrorOf(err error) *NodeError {
	var e *runtime.Error
	if !errors.As(err, &e) {
		return nil
	}
	for _, d := range e.Details {
		if s, ok := d.(*structpb.Struct); ok {
			if _, ok := s.Fields["name"]; ok {
				return nodeErrorOf(s)
			}
		}
	}
	return nil
}

func nodeErrorOf(s *structpb.Struct) *NodeError {
	f := s.GetFields()
	ne := &NodeError{Name: f["name"].GetStringValue(), Message: f["message"].GetStringValue(), Code: f["code"].GetStringValue()}
	if o := f["orig"].GetStructValue(); o != nil {
		ne.Orig = nodeErrorOf(o)
	}
	return ne
}

// errorDetail is the detail that carries a Node.js error through
// wizard: a google.protobuf.Struct with its name, message and code, and
// the error it wraps under "orig".
func errorDetail(e *lineError) proto.Message {
	return errorStruct(e, true)
}

func errorStruct(e *lineError, orig bool) *structpb.Struct {
	s := &structpb.Struct{Fields: map[string]*structpb.Value{"name": structpb.NewStringValue(e.Name)}}
	if e.Message != "" {
		s.Fields["message"] = structpb.NewStringValue(e.Message)
	}
	if e.Code != "" {
		s.Fields["code"] = structpb.NewStringValue(e.Code)
	}
	if orig && e.Orig != nil {
		s.Fields["orig"] = structpb.NewStructValue(errorStruct(e.Orig, false))
	}
	return s
}

// origError reads the error a Seneca error wraps: its orig's name,
// message and code (the strings among them), the message from details
// when orig has none (Seneca's wire drops an Error's own message); nil
// when there is no orig object.
func origError(o map[string]json.RawMessage) *lineError {
	var orig map[string]json.RawMessage
	if json.Unmarshal(o["orig"], &orig) != nil || orig == nil {
		return nil
	}
	e := &lineError{Message: strField(orig, "message"), Name: strField(orig, "name"), Code: strField(orig, "code")}
	if e.Message == "" {
		var details map[string]json.RawMessage
		if json.Unmarshal(o["details"], &details) == nil {
			e.Message = strField(details, "message")
		}
	}
	return e
}

// strField is o's string field k, or "".
func strField(o map[string]json.RawMessage, k string) string {
	var s string
	if v, ok := o[k]; ok && json.Unmarshal(v, &s) == nil {
		return s
	}
	return ""
}
