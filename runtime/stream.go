package runtime

import (
	"context"
	"errors"
	"io"
	"reflect"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/proto"
)

// A stream is a call that carries many messages each way: a caller opens
// it to a pattern ([Node.OpenStream], [Client.Stream]), the node picks a
// target for it as for a call, and the handler made with
// [NewStreamHandler] serves it until it returns. Server streaming (one
// request, many answers), client streaming (many requests, one answer)
// and bidirectional streams are the same stream, used differently.
//
// Both sides send at the pace the other receives: a remote stream's
// transport grants each side credit in bytes (256 KiB per stream each way
// over runtime/tcp and runtime/quic), an in-process stream queues a few
// messages; a side that stops receiving blocks the other's Send. A
// stream is never sent again: its target is chosen once, at open, and a
// connection lost mid-stream ends it on both sides with
// [CodeUnavailable].

// streamQueue bounds the messages an in-process stream holds each way
// before the sender's Send blocks.
const streamQueue = 16

// ClientStream is the calling side of a stream, from [Node.OpenStream]
// (untyped: Send takes any message Act takes, Recv returns a [Result]) or
// [Client.Stream] (typed: *ClientStream[*Req, *Res]). Send and CloseSend
// may be called by one goroutine while another calls Recv. The context
// the stream was opened with bounds it: when it ends, the stream is
// cancelled and the server is told. Close the stream when done with it.
type ClientStream[Req, Res any] struct {
	c      clientCore
	newRes func() Res // a new protobuf Res, for a typed stream (Client.Stream)
}

// Send sends msg, waiting while the server has not taken enough of what
// was sent before. It fails once the stream has ended (Recv tells how)
// or after CloseSend.
func (s *ClientStream[Req, Res]) Send(msg Req) error { return s.c.send(msg) }

// CloseSend tells the server that the caller sends no more messages: its
// Recv returns io.EOF once it took those sent before.
func (s *ClientStream[Req, Res]) CloseSend() error { return s.c.closeSend() }

// Recv returns the server's next message. At the stream's end it returns
// io.EOF when the handler returned nil, else an [*Error] with the
// handler's code (or [CodeUnavailable] when the stream was lost,
// [CodeCanceled] or [CodeDeadlineExceeded] when its context ended).
func (s *ClientStream[Req, Res]) Recv() (Res, error) {
	v, err := s.c.recv()
	if err != nil {
		var zero Res
		return zero, err
	}
	if s.newRes != nil && v.remote && v.raw.codec == CodecProto {
		dst := s.newRes()
		if err := unmarshalNew(&v.raw, any(dst).(proto.Message)); err != nil {
			var zero Res
			return zero, err
		}
		return dst, nil
	}
	return streamValue[Res](&v)
}

// unmarshalNew decodes r, a protobuf payload, into dst, a message just
// made: nothing to reset first.
func unmarshalNew(r *raw, dst proto.Message) error {
	if name := string(dst.ProtoReflect().Descriptor().FullName()); r.typ != "" && name != r.typ {
		return errOtherType(r.typ, name)
	}
	if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(r.data, dst); err != nil {
		return decodeError(dst, err)
	}
	return nil
}

// Header waits for the server's headers ([ServerStream.SendHeader], or
// the headers it sent with its first message) or the stream's end, which
// it returns as Recv would, io.EOF aside.
func (s *ClientStream[Req, Res]) Header() (Metadata, error) { return s.c.header() }

// Trailer returns the server's trailers ([ServerStream.SetTrailer]) once
// Recv returned the stream's end; before that, none.
func (s *ClientStream[Req, Res]) Trailer() Metadata { return s.c.trailer() }

// Close cancels the stream if it has not ended (the server's handler sees
// its context cancelled) and releases it. It is idempotent.
func (s *ClientStream[Req, Res]) Close() { s.c.cancel() }

// ServerStream is the serving side of a stream, which a handler made with
// [NewStreamHandler] gets: typed (*ServerStream[*Req, *Res]) or untyped
// (*ServerStream[Request, any]: Recv returns a [Request], Send takes any
// message a handler may return). Send and SendHeader may be called by one
// goroutine while another calls Recv. The stream ends when the handler
// returns; neither side may be used afterwards.
type ServerStream[Req, Res any] struct {
	s *serverStream
}

// Recv returns the caller's next message, and io.EOF once the caller
// called CloseSend and every message was taken. It fails when the
// stream's context ends.
func (s *ServerStream[Req, Res]) Recv() (Req, error) {
	v, err := s.s.recv()
	if err != nil {
		var zero Req
		return zero, err
	}
	s.s.received.Add(1)
	if _, ok := any((*Req)(nil)).(*Request); ok {
		return any(Request{msg: v, entry: s.s.entry, node: s.s.node}).(Req), nil
	}
	return boxedValue[Req](v)
}

// Send sends msg to the caller, waiting while the caller has not taken
// enough of what was sent before.
func (s *ServerStream[Req, Res]) Send(msg Res) error {
	if err := s.s.send(msg); err != nil {
		return err
	}
	s.s.sent.Add(1)
	return nil
}

// SendHeader sends kv (key, value, key, value, …) to the caller as the
// stream's headers, at most once and before the first Send; without it,
// the first Send sends empty ones. A bad key or an odd number of strings
// fails it ([CodeInvalidArgument]), as for [AppendMetadata].
func (s *ServerStream[Req, Res]) SendHeader(kv ...string) error {
	ps, err := streamPairs("SendHeader", kv)
	if err != nil {
		return err
	}
	return s.s.sendHeader(ps)
}

// SetTrailer sets kv (key, value, …) as the metadata the stream's end
// carries to the caller, replacing what an earlier call set. It fails as
// SendHeader does.
func (s *ServerStream[Req, Res]) SetTrailer(kv ...string) error {
	ps, err := streamPairs("SetTrailer", kv)
	if err != nil {
		return err
	}
	s.s.setTrailer(ps)
	return nil
}

// NewStreamHandler returns a handler that serves streams with fn: add it
// with [Node.Add] (or a generated Register function) as any handler, and
// open streams to its pattern with [Node.OpenStream] or [Client.Stream]. A
// call with Act to its pattern fails with [CodeUnimplemented], as does a
// stream opened to a unary handler.
//
// fn's ctx carries the caller's metadata ([IncomingMetadata]) and the
// stream's deadline, and ends when the caller cancels, goes away or the
// node's shutdown grace ends. What fn returns ends the stream: nil ends it
// with OK, an error with its code, as a handler's error ends a call.
// Handler interceptors run once per stream, around fn; their Request
// carries no message.
func NewStreamHandler[Req, Res any](fn func(ctx context.Context, s *ServerStream[Req, Res]) error) Handler {
	if fn == nil {
		return nil
	}
	h := func(ctx context.Context, r Request) (any, error) {
		ss, ok := r.msg.(*serverStream)
		if !ok {
			return nil, Errorf(CodeUnimplemented, "wizard: %s serves streams: open a stream to it (Node.OpenStream), not a call", quoteClipped(r.Pattern().String(), maxEcho))
		}
		return nil, fn(ctx, &ServerStream[Req, Res]{s: ss})
	}
	streamCode.Store(reflect.ValueOf(h).Pointer(), true)
	return h
}

// streamCode holds the code pointers of NewStreamHandler's handlers:
// those the node opens streams to.
var streamCode sync.Map // uintptr → true

// isStreamHandler reports whether h is NewStreamHandler's.
func isStreamHandler(h Handler) bool {
	_, ok := streamCode.Load(reflect.ValueOf(h).Pointer())
	return ok
}

// clientCore is the calling side of a stream, in-process or remote. recv
// returns a message as Result and Request hold it: the sender's value
// in-process, a *raw remotely.
type clientCore interface {
	send(msg any) error
	closeSend() error
	recv() (streamMsg, error)
	header() (Metadata, error)
	trailer() Metadata
	cancel()
}

// serverSide is the serving side of a stream as a handler's ServerStream
// reaches it, in-process or remote. recv returns the message boxed, as a
// Request holds it (the sender's value, or a *raw): a handler waiting in
// Recv on an idle stream then keeps a small frame, and its goroutine's
// stack at 4 KiB.
type serverSide interface {
	recv() (any, error)
	send(msg any) error
	sendHeader(ps []MetaPair) error
	setTrailer(ps []MetaPair)
}

// serverStream is the serving side and what the handler's Request needs.
type serverStream struct {
	serverSide
	entry          *handlerEntry
	node           *Node
	call           *Message     // a remote stream's open, as a call's message (Request.Source); nil in-process
	sent, received atomic.Int64 // the messages the handler sent and received
}

// StreamMessages reports, for the Request of a stream (what handler
// interceptors see around a [NewStreamHandler]'s handler), the messages
// the handler has sent and received so far: once the handler returned,
// the stream's counts. ok is false for a call's Request.
func (r Request) StreamMessages() (sent, received int64, ok bool) {
	ss, ok := r.msg.(*serverStream)
	if !ok {
		return 0, 0, false
	}
	return ss.sent.Load(), ss.received.Load(), true
}

// streamMsg is a message a stream's side received: the sender's value
// in-process, a remote message's encoding otherwise, held by value so
// that a typed Recv decodes it without boxing it first.
type streamMsg struct {
	v      any
	raw    raw
	remote bool
}

// value returns m as Result and Request hold a message.
func (m streamMsg) value() any {
	if m.remote {
		r := m.raw
		return &r
	}
	return m.v
}

// streamValue converts m, a received message, to T: as it is when it
// already is a T (in-process, nothing copied), else decoded into a new
// one. Not inlined: its locals would otherwise sit in the frame of a
// Recv waiting for its message, and grow the stack of every handler
// waiting on an idle stream.
//
//go:noinline
func streamValue[T any](m *streamMsg) (T, error) {
	var zero T
	switch p := any(&zero).(type) {
	case *Result:
		*p = Result{v: m.value()}
		return zero, nil
	case *any:
		*p = Result{v: m.value()}.Value()
		return zero, nil
	}
	if !m.remote {
		if t, ok := m.v.(T); ok {
			return t, nil
		}
	}
	if rt := reflect.TypeFor[T](); rt.Kind() == reflect.Pointer {
		nv := reflect.New(rt.Elem())
		var err error
		if m.remote {
			err = decodeRaw(&m.raw, nv.Interface())
		} else {
			err = decode(m.v, nv.Interface())
		}
		if err != nil {
			return zero, err
		}
		return nv.Interface().(T), nil
	}
	if err := decode(m.value(), &zero); err != nil {
		return zero, err
	}
	return zero, nil
}

// boxedValue is streamValue for a message received boxed (a server
// side's). Not inlined, for the frame of a waiting Recv (streamValue's
// doc).
//
//go:noinline
func boxedValue[T any](v any) (T, error) {
	m := streamMsg{v: v}
	if r, ok := v.(*raw); ok {
		m = streamMsg{raw: *r, remote: true}
	}
	return streamValue[T](&m)
}

// streamEnd is the error a stream's side returns for its end err: io.EOF
// as it is, the others as an *Error.
func streamEnd(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return io.EOF
	}
	return toError(err)
}

// errStreamToUnary is the error of a stream opened to a unary handler.
func errStreamToUnary(pattern string) *Error {
	return Errorf(CodeUnimplemented, "wizard: %s is served by a unary handler: call it (Act), do not open a stream to it", quoteClipped(pattern, maxEcho))
}

// streamPairs checks kv, a header's or trailer's keys and values, as the
// metadata of a call is checked.
func streamPairs(what string, kv []string) ([]MetaPair, error) {
	if len(kv)%2 != 0 {
		return nil, Errorf(CodeInvalidArgument, "wizard: %s: %d strings, not key/value pairs: the key %s has no value", what, len(kv), quoteClipped(kv[len(kv)-1], maxEchoKey))
	}
	ps := make([]MetaPair, 0, len(kv)/2)
	size := 0
	for i := 0; i < len(kv); i += 2 {
		p := MetaPair{kv[i], kv[i+1]}
		if err := checkMetaPair(p); err != nil {
			return nil, err
		}
		size += len(p.Key) + len(p.Value)
		ps = append(ps, p)
	}
	if size > maxMetadataSize {
		return nil, Errorf(CodeResourceExhausted, "wizard: %s: %d bytes of metadata, more than the limit of %d", what, size, maxMetadataSize)
	}
	return ps, nil
}
