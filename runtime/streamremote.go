package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/wizardmesh/wizard/runtime/internal/streamconn"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
	"google.golang.org/protobuf/proto"
)

// remoteStream is the calling side of a stream to another node, over a
// transport's streamconn.Client.
type remoteStream struct {
	ctx   context.Context
	cs    streamconn.Client
	addr  string // the target's, for errors
	types *peerTypes
	br    Breaker // told the stream's fate at its end

	observe        func(AttemptResult) // the observer's AttemptEnd, if any
	sent, received atomic.Int64
	body           streamBody // the message Send encodes into its frame, when cs is a BodySender

	hdrOnce sync.Once
	hdrMD   Metadata
	hdrErr  error
	resType string // the protobuf type of the server's messages, from its headers

	mu         sync.Mutex
	sendClosed bool
	ended      bool
}

func (s *remoteStream) send(msg any) error {
	s.mu.Lock()
	closed := s.sendClosed
	s.mu.Unlock()
	if closed {
		return errSendAfterClose
	}
	out, err := prepare(s.cs, &s.body, msg)
	if err != nil {
		return err
	}
	err = out.send(s.ctx, s.cs)
	out.done()
	if err != nil {
		if _, ok := errors.AsType[*streamconn.Error](err); ok || err == io.EOF {
			return io.EOF // ended by the server: Recv tells how
		}
		if errors.Is(err, wire.ErrFrameTooLarge) {
			return tooLarge(err) // not sent; the stream goes on
		}
		return s.fail(err)
	}
	s.sent.Add(1)
	return nil
}

func (s *remoteStream) closeSend() error {
	s.mu.Lock()
	if s.sendClosed {
		s.mu.Unlock()
		return nil
	}
	s.sendClosed = true
	s.mu.Unlock()
	if err := s.cs.CloseSend(); err != nil {
		return s.fail(err)
	}
	return nil
}

func (s *remoteStream) recv() (streamMsg, error) {
	s.header() // the server's message type comes with its headers
	codec, payload, err := s.cs.Recv(s.ctx)
	if err != nil {
		return streamMsg{}, s.fail(err)
	}
	s.received.Add(1)
	return streamMsg{remote: true, raw: raw{codec: Codec(codec), data: payload, typ: s.resType, types: s.types}}, nil
}

func (s *remoteStream) header() (Metadata, error) {
	s.hdrOnce.Do(func() {
		meta, err := s.cs.Header(s.ctx)
		if err != nil {
			s.hdrErr = s.fail(err)
			return
		}
		s.resType = wireMetaValue(meta, metaType)
		s.hdrMD = Metadata{pairs: metaPairs(meta)}
	})
	if s.hdrErr == io.EOF {
		return s.hdrMD, nil
	}
	return s.hdrMD, s.hdrErr
}

func (s *remoteStream) trailer() Metadata {
	return Metadata{pairs: metaPairs(s.cs.Trailer())}
}

func (s *remoteStream) cancel() {
	s.cs.Cancel()
	s.finish(context.Canceled)
}

// fail converts err, what the transport's stream returned, to the
// stream's end as the caller sees it, and ends the stream.
func (s *remoteStream) fail(err error) error {
	var out error
	switch se, isEnd := errors.AsType[*streamconn.Error](err); {
	case err == io.EOF:
		out = io.EOF
	case isEnd:
		e := &Error{Code: Code(se.Code), Message: se.Message}
		if len(se.Details) > 0 {
			e.Details = decodeDetails(se.Details)
		}
		out = e
	case s.ctx.Err() != nil:
		out = toError(s.ctx.Err())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		out = toError(err)
	default:
		out = &Error{Code: CodeUnavailable, Message: fmt.Sprintf("wizard: stream to %s lost: %v", s.addr, err), cause: err}
	}
	s.finish(out)
	return out
}

// finish tells the stream's breaker how it ended, once: a lost stream
// counts against its target.
func (s *remoteStream) finish(err error) {
	s.mu.Lock()
	ended := s.ended
	s.ended = true
	s.mu.Unlock()
	if ended {
		return
	}
	code := CodeOK
	if err != io.EOF {
		code = CodeOf(err)
	}
	if code == CodeUnavailable {
		s.br.Failure()
	} else {
		s.br.Success()
	}
	if s.observe != nil {
		r := AttemptResult{Code: code, Sent: s.sent.Load(), Received: s.received.Load()}
		if code != CodeOK {
			r.Err = err
		}
		s.observe(r)
	}
}

// remoteServer is the serving side of a stream from another node, over a
// transport's streamconn.Stream.
type remoteServer struct {
	ctx     context.Context
	st      streamconn.Stream
	reqType string     // the protobuf type of the caller's messages, from the open
	call    *Message   // the open, as a call's message: its caller (Request.Source)
	body    streamBody // the message Send encodes into its frame, when st is a BodySender

	mu      sync.Mutex
	hdrSent bool
}

func (s *remoteServer) recv() (any, error) {
	codec, payload, err := s.st.Recv(s.ctx)
	if err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, s.fail(err)
	}
	return &raw{codec: Codec(codec), data: payload, typ: s.reqType, call: s.call}, nil
}

func (s *remoteServer) send(msg any) error {
	out, err := prepare(s.st, &s.body, msg)
	if err != nil {
		return err
	}
	defer out.done()
	s.mu.Lock()
	first := !s.hdrSent
	s.hdrSent = true
	s.mu.Unlock()
	if first {
		var meta []wire.Meta
		if out.typ != "" {
			meta = []wire.Meta{{Key: metaType, Value: out.typ}}
		}
		if err := s.st.SendHeader(meta); err != nil {
			return s.fail(err)
		}
	}
	if err := out.send(s.ctx, s.st); err != nil {
		if errors.Is(err, wire.ErrFrameTooLarge) {
			return tooLarge(err) // not sent; the stream goes on
		}
		return s.fail(err)
	}
	return nil
}

// tooLarge is the error of a stream's Send whose message is larger than
// its connection's frames may be: that message is not sent.
func tooLarge(err error) *Error {
	return &Error{Code: CodeResourceExhausted, Message: "wizard: stream message not sent: " + err.Error(), cause: err}
}

func (s *remoteServer) sendHeader(ps []MetaPair) error {
	s.mu.Lock()
	if s.hdrSent {
		s.mu.Unlock()
		return errHeaderSent
	}
	s.hdrSent = true
	s.mu.Unlock()
	if err := s.st.SendHeader(wireMeta(ps)); err != nil {
		return s.fail(err)
	}
	return nil
}

func (s *remoteServer) setTrailer(ps []MetaPair) { s.st.SetTrailer(wireMeta(ps)) }

func (s *remoteServer) fail(err error) error {
	if s.ctx.Err() != nil {
		return toError(s.ctx.Err())
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e
	}
	return &Error{Code: CodeUnavailable, Message: "wizard: stream lost: " + err.Error(), cause: err}
}

// wireMeta returns the caller's pairs of ps (not the node's own) as the
// wire carries them.
func wireMeta(ps []MetaPair) []wire.Meta {
	var out []wire.Meta
	for _, p := range ps {
		if !isSystemKey(p.Key) {
			out = append(out, wire.Meta{Key: p.Key, Value: p.Value})
		}
	}
	return out
}

// metaPairs returns meta as a Message's pairs.
func metaPairs(meta []wire.Meta) []MetaPair {
	if len(meta) == 0 {
		return nil
	}
	out := make([]MetaPair, len(meta))
	for i, m := range meta {
		out[i] = MetaPair{Key: m.Key, Value: m.Value}
	}
	return out
}

func wireMetaValue(meta []wire.Meta, key string) string {
	for _, m := range meta {
		if m.Key == key {
			return m.Value
		}
	}
	return ""
}

// endOf is the end a node's stream handler returned, as a transport sends
// it: nil for OK, else a *streamconn.Error with the error's code, message
// and details.
func endOf(err error, refused bool) error {
	if err == nil {
		return nil
	}
	e := toError(err)
	se := &streamconn.Error{Code: uint32(e.Code), Message: e.Message, Refused: refused}
	if len(e.Details) > 0 {
		se.Details = appendDetails(nil, e.Details)
	}
	return se
}

// outgoing is a message a stream's side is about to send: a protobuf
// message its transport encodes straight into its frame (body), or the
// message's encoding (in a pooled buffer for a protobuf message).
type outgoing struct {
	body    *streamBody
	codec   Codec
	payload []byte
	typ     string // the protobuf type, or ""
	buf     *[]byte
}

// prepare readies msg to be sent on side, a transport's stream side:
// through body when side is a streamconn.BodySender and msg a message
// body takes, else encoded.
func prepare(side any, body *streamBody, msg any) (outgoing, error) {
	if _, ok := side.(streamconn.BodySender); ok && body.set(msg) {
		return outgoing{body: body, codec: CodecProto, typ: string(body.m.ProtoReflect().Descriptor().FullName())}, nil
	}
	codec, payload, typ, buf, err := encodeStream(msg)
	return outgoing{codec: codec, payload: payload, typ: typ, buf: buf}, err
}

// send sends o on side, the one prepare had.
func (o *outgoing) send(ctx context.Context, side interface {
	Send(context.Context, wire.Codec, []byte) error
}) error {
	if o.body != nil {
		return side.(streamconn.BodySender).SendBody(ctx, wire.CodecProto, o.body)
	}
	return side.Send(ctx, wire.Codec(o.codec), o.payload)
}

// done gives back what o held, once sent (the transport keeps nothing of
// a message).
func (o *outgoing) done() {
	if o.body != nil {
		*o.body = streamBody{}
	}
	putStreamBuf(o.buf)
}

// streamBody is a protobuf message a stream's side encodes straight into
// its frame (a transport's BodySender), sparing a marshalled copy: only
// messages whose encoding cannot fail (plainMessage), whose size it takes
// first (proto.Size caches it for the encoding).
type streamBody struct {
	m proto.Message
	n int
}

// set makes b msg, when msg is such a message, and reports whether it is.
func (b *streamBody) set(msg any) bool {
	pm, ok := msg.(proto.Message)
	if !ok || !plainMessage(pm.ProtoReflect().Descriptor()) {
		return false
	}
	*b = streamBody{pm, proto.Size(pm)}
	return true
}

func (b *streamBody) Len() int { return b.n }

// AppendTo marshals the message onto dst. The frame's length field is
// written already: should the message have changed since its size was
// taken (a sender racing with its own message), the payload is cut or
// padded with zeros to its size, so that the connection's stream of
// frames stays whole (the receiver then fails to decode that message).
func (b *streamBody) AppendTo(dst []byte) []byte {
	n := len(dst)
	out, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(dst, b.m)
	if err != nil {
		out = dst
	}
	switch got := len(out) - n; {
	case got > b.n:
		out = out[:n+b.n]
	case got < b.n:
		out = append(out, make([]byte, b.n-got)...)
	}
	return out
}
