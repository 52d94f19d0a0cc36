package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/wizardmesh/wizard/gateway/config"
	"github.com/wizardmesh/wizard/runtime"
)

// The streams of streaming routes (stream: server, client or bidi): the
// request opens a mesh stream of the route's pattern, and the gateway
// relays its messages between the client and the service, a few
// messages at a time each way (see the package doc's # Streams).

// streamKind is a route's kind of stream.
type streamKind uint8

const (
	streamNone   streamKind = iota // a call
	streamServer                   // one message in, many out
	streamClient                   // many in, one out (WebSocket only)
	streamBidi                     // both at once (WebSocket only)
)

func streamKindOf(k config.StreamKind) streamKind {
	switch k {
	case config.StreamServer:
		return streamServer
	case config.StreamClient:
		return streamClient
	case config.StreamBidi:
		return streamBidi
	}
	return streamNone
}

func (k streamKind) String() string {
	switch k {
	case streamServer:
		return "server"
	case streamClient:
		return "client"
	case streamBidi:
		return "bidi"
	}
	return "none"
}

// meshStream is what the gateway uses of a mesh stream, the untyped
// client stream [runtime.Node.OpenStream] returns.
type meshStream interface {
	Send(msg any) error
	CloseSend() error
	Recv() (runtime.Result, error)
	Trailer() runtime.Metadata
	Close()
}

// openStream opens the mesh stream of a request to a streaming route:
// the subject's rate limit, the call's metadata as the open's headers,
// the route's timeout (or the client's hint clamped to max_timeout; none
// by default) as its deadline; then the request's message as the first
// message (always for a server stream, which is then half-closed; for
// client and bidi streams when the request has a body). ctx is the
// client's: its end cancels the stream. The caller ends the stream with
// cancel and s.Close.
func (g *Gateway) openStream(ctx context.Context, c call, first bool) (s meshStream, sctx context.Context, cancel context.CancelFunc, e *apiError) {
	if c.id != nil {
		if e := g.limit(c.l.subLim, c.id.Subject); e != nil {
			return nil, nil, nil, e
		}
	}
	var msg any
	if first {
		if msg, e = c.message(); e != nil {
			return nil, nil, nil, e
		}
	}
	sctx = withCallMeta(ctx, c.rid, c.id)
	if d := c.m.policy.timeoutFor(c.hint); d > 0 {
		sctx, cancel = context.WithTimeout(sctx, d)
	} else {
		sctx, cancel = context.WithCancel(sctx)
	}
	s, err := g.dial(sctx, c.m.pattern)
	if err != nil {
		e := g.streamError(ctx, sctx, err, c)
		cancel()
		return nil, nil, nil, e
	}
	if first {
		if e := sendError(s.Send(msg)); e != nil {
			s.Close()
			cancel()
			return nil, nil, nil, e
		}
	}
	if c.m.policy.stream == streamServer {
		_ = s.CloseSend()
	}
	return s, sctx, cancel, nil
}

// sendError is the client's error of a Send to a stream: a message the
// mesh does not carry (too large; the stream goes on without it), or
// nil for the rest, which end the stream (its Recv says how).
func sendError(err error) *apiError {
	if err == nil || errors.Is(err, io.EOF) || runtime.CodeOf(err) != runtime.CodeResourceExhausted {
		return nil
	}
	return newAPIError(http.StatusRequestEntityTooLarge, runtime.CodeResourceExhausted, "a stream message is larger than the mesh carries")
}

// streamError is the error a stream ended with, as the client sees it:
// a call's error ([callError]), logged as a call's is.
func (g *Gateway) streamError(client, sctx context.Context, err error, c call) *apiError {
	e := callError(client, sctx, err, c.method, c.path)
	if e.status >= 500 && e.status != http.StatusServiceUnavailable && e.status != http.StatusGatewayTimeout {
		g.log.Error("gateway: stream failed", "request_id", c.rid, "pattern", c.m.pattern, "err", err)
	}
	return e
}

// recvJSON receives a stream's next message as JSON on one line (NDJSON
// and SSE need it; a remote message's text may span lines): io.EOF at
// the stream's clean end, an *apiError-bearing error otherwise.
func (g *Gateway) recvJSON(s meshStream, c *call) (json.RawMessage, error) {
	res, err := s.Recv()
	if err != nil {
		return nil, err
	}
	b, _, e := g.answerJSON(res, c.rid, c.m.pattern)
	if e != nil {
		return nil, streamFailure{e}
	}
	return oneLine(b), nil
}

// streamFailure is a message the gateway cannot pass on: the stream
// ends with its error.
type streamFailure struct{ e *apiError }

func (f streamFailure) Error() string { return f.e.message }

// endOf is the status that ends a stream: nil for a clean end (io.EOF).
func (g *Gateway) endOf(client, sctx context.Context, err error, c *call) *apiError {
	var f streamFailure
	switch {
	case errors.Is(err, io.EOF):
		return nil
	case errors.As(err, &f):
		return f.e
	}
	return g.streamError(client, sctx, err, *c)
}

// oneLine returns b with no line breaks: compacted when it has any.
func oneLine(b json.RawMessage) json.RawMessage {
	if bytes.IndexByte(b, '\n') < 0 && bytes.IndexByte(b, '\r') < 0 {
		return b
	}
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return b // valid already: not reached
	}
	return out.Bytes()
}

// endFrame is the frame that ends a stream: its status, the error's
// body, the service's trailers. Over the WebSocket it carries type end
// and the stream's id; an NDJSON stream's last line is one without the
// id, an SSE stream's end event its data without type and id.
type endFrame struct {
	Type      string              `json:"type,omitempty"`
	ID        *string             `json:"id,omitempty"`
	Status    int                 `json:"status"`
	RequestID string              `json:"request_id,omitempty"`
	Error     *errorBody          `json:"error,omitempty"`
	Trailer   map[string][]string `json:"trailer,omitempty"`
	// RetryAfterMs is Retry-After, as in a res frame.
	RetryAfterMs int64 `json:"retry_after_ms,omitempty"`
}

// appendEnd appends the end frame of a stream (typ "" and id nil for
// SSE's data) that ended with e (nil: OK) and the trailers md.
func appendEnd(b []byte, typ string, id *string, rid string, e *apiError, md runtime.Metadata) []byte {
	f := endFrame{Type: typ, ID: id, Status: http.StatusOK, RequestID: rid}
	if e != nil {
		eb := e.body()
		f.Status, f.Error = e.status, &eb
		f.RetryAfterMs = e.retryMs
		if f.RetryAfterMs == 0 {
			f.RetryAfterMs = int64(e.retryAfter) * 1000
		}
	}
	if md.Len() > 0 {
		f.Trailer = make(map[string][]string, md.Len())
		for k, v := range md.All() {
			f.Trailer[k] = append(f.Trailer[k], v)
		}
	}
	out, err := json.Marshal(f)
	if err != nil && f.Error != nil { // details that do not encode: drop them
		f.Error.Details = nil
		out, _ = json.Marshal(f)
	}
	return append(b, out...)
}

// appendMsg appends a msg frame: {"type":"msg","id":ID,"body":BODY}, the
// id left out when nil (an NDJSON line).
func appendMsg(b []byte, id *string, body json.RawMessage) []byte {
	b = append(b, `{"type":"msg"`...)
	if id != nil {
		b = append(b, `,"id":`...)
		b = appendJSONString(b, *id)
	}
	b = append(append(b, `,"body":`...), body...)
	return append(b, '}')
}

// appendJSONString appends s as a JSON string, as json.Marshal writes it.
func appendJSONString(b []byte, s string) []byte {
	if plainJSONString(s) {
		return append(append(append(b, '"'), s...), '"')
	}
	q, _ := json.Marshal(s)
	return append(b, q...)
}

// checkMessage refuses a client's stream message (a msg frame's body)
// whose root has a metadata key, as a request's message is refused.
func checkMessage(body json.RawMessage) *apiError {
	if !bytes.Contains(body, []byte(`$"`)) {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return nil
	}
	for k := range m {
		if strings.HasSuffix(k, "$") {
			return badRequest("field " + strconv.Quote(k) + " is reserved: keys ending in '$' are call metadata, set by the gateway only")
		}
	}
	return nil
}

// notOverHTTP is the answer to an HTTP request for a client or bidi
// stream's route.
func notOverHTTP(p *policy) *apiError {
	return newAPIError(http.StatusBadRequest, runtime.CodeFailedPrecondition, "route "+strconv.Quote(p.name)+" is a "+p.stream.String()+" stream: open it over the WebSocket")
}
