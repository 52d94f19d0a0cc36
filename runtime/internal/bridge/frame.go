package bridge

import (
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// The conversions between a runtime.Message and a wire.Frame, for every
// transport that carries wire frames (the stream transports through
// [Call] and [Handler], runtime/nats through a broker). A frame made of a
// message aliases its pattern, payload and metadata, and a message made
// of a frame aliases the frame's: who owns them is runtime.Message's rule.

// RequestFrame sets f to the request frame of m, a call's message. The
// frame's deadline and id are the transport's to set.
func RequestFrame(f *wire.Frame, m *runtime.Message) {
	*f = wire.Frame{
		Type:    wire.TypeRequest,
		Flags:   wire.Flags(m.Flags),
		Codec:   wire.Codec(m.Codec),
		Pattern: m.Pattern,
		Payload: m.Payload,
		Meta:    toWire(m.Meta),
	}
}

// RequestMessage sets m to the call of f, a request frame. The caller's
// Remote and Identity are the transport's to set.
func RequestMessage(m *runtime.Message, f *wire.Frame) {
	*m = runtime.Message{
		Pattern:  f.Pattern,
		Flags:    runtime.MessageFlags(f.Flags),
		Codec:    runtime.Codec(f.Codec),
		Payload:  f.Payload,
		Deadline: f.Deadline,
		Meta:     fromWire(f.Meta),
	}
}

// ReplyFrame sets f to the answer frame of reply, which a
// runtime.Server returned: an empty response for nil (a call with
// NoReply), an error frame, with the error's details after it, for a
// failed reply, a response otherwise.
func ReplyFrame(f *wire.Frame, reply *runtime.Message) {
	switch {
	case reply == nil:
		*f = wire.Frame{Type: wire.TypeResponse}
	case reply.Code != runtime.CodeOK:
		*f = wire.Frame{Type: wire.TypeError, Flags: wire.Flags(reply.Flags & runtime.FlagRefused), Payload: append(wire.AppendError(nil, uint32(reply.Code), reply.Error), reply.Payload...)}
	default:
		*f = wire.Frame{Type: wire.TypeResponse, Codec: wire.Codec(reply.Codec), Payload: reply.Payload, Meta: toWire(reply.Meta)}
	}
}

// ReplyMessage sets m to the reply of f, a response or an error frame.
// It fails only for an error frame whose error does not decode.
func ReplyMessage(m *runtime.Message, f *wire.Frame) error {
	if f.Type != wire.TypeError {
		*m = runtime.Message{Codec: runtime.Codec(f.Codec), Payload: f.Payload, Meta: fromWire(f.Meta)}
		return nil
	}
	code, msg, details, err := wire.DecodeErrorDetails(f.Payload)
	if err != nil {
		return err
	}
	if code == 0 {
		code = uint32(runtime.CodeUnknown)
	}
	// An error reply's payload carries the error's details.
	*m = runtime.Message{Code: runtime.Code(code), Error: msg, Payload: details, Flags: runtime.MessageFlags(f.Flags & wire.FlagRefused)}
	return nil
}

// The runtime's message flags and codecs are the wire's, value for value:
// the conversions above are plain type conversions. A pair that differs
// fails to compile here (the index is out of range, or the constant
// overflows).
func _() {
	var x [1]struct{}
	_ = x[wire.FlagNoReply-wire.Flags(runtime.FlagNoReply)]
	_ = x[wire.FlagIdempotent-wire.Flags(runtime.FlagIdempotent)]
	_ = x[wire.FlagRetry-wire.Flags(runtime.FlagRetry)]
	_ = x[wire.FlagRefused-wire.Flags(runtime.FlagRefused)]
	_ = x[wire.FlagKeep-wire.Flags(runtime.FlagKeep)]
	_ = x[wire.CodecNone-wire.Codec(runtime.CodecNone)]
	_ = x[wire.CodecProto-wire.Codec(runtime.CodecProto)]
	_ = x[wire.CodecJSON-wire.Codec(runtime.CodecJSON)]
}
