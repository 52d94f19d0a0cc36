package gateway

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
)

// A server stream over HTTP: Server-Sent Events for Accept:
// text/event-stream, else newline-delimited JSON.

// Content types of a streamed answer.
const (
	contentSSE    = "text/event-stream"
	contentNDJSON = "application/x-ndjson"
)

// sseEndID is the id of an SSE stream's end event. A browser's
// EventSource reconnects when a stream ends; its reconnection carries
// Last-Event-ID: end and is answered 204, which stops it.
const sseEndID = "end"

// streamFormat is how an answer streams: SSE when Accept names
// text/event-stream, NDJSON otherwise.
type streamFormat uint8

const (
	formatNDJSON streamFormat = iota
	formatSSE
)

func formatOf(accept string) streamFormat {
	for part := range strings.SplitSeq(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err == nil && mt == contentSSE && params["q"] != "0" {
			return formatSSE
		}
	}
	return formatNDJSON
}

// serveHTTPStream serves a request for a server stream's route: it opens
// the stream and answers as the first message or the end arrives (an
// error before any message is an ordinary error answer, with its
// status); then one event or line per message, each flushed before the
// next message is received, so that a slow client slows the service
// (flow control end to end, one message held at a time); then the end
// event or line with the stream's status. The client's leaving cancels
// the stream.
func (g *Gateway) serveHTTPStream(w http.ResponseWriter, r *http.Request, c call) (reply, *apiError) {
	if c.m.policy.stream != streamServer {
		return reply{}, notOverHTTP(c.m.policy)
	}
	format := formatOf(r.Header.Get("Accept"))
	rc := http.NewResponseController(w)
	if format == formatSSE && r.Header.Get("Last-Event-ID") == sseEndID {
		w.WriteHeader(http.StatusNoContent)
		return reply{status: http.StatusNoContent, streamed: true}, nil
	}
	// The body is read: a read deadline left from it would end the
	// request's context mid-stream.
	_ = rc.SetReadDeadline(time.Time{})
	s, sctx, cancel, e := g.openStream(r.Context(), c, true)
	if e != nil {
		return reply{}, e
	}
	defer cancel()
	defer s.Close()
	body, err := g.recvJSON(s, &c)
	if err != nil && !errors.Is(err, io.EOF) {
		return reply{}, g.endOf(r.Context(), sctx, err, &c)
	}
	h := w.Header()
	h["Cache-Control"] = []string{"no-cache"}
	h["X-Accel-Buffering"] = []string{"no"} // proxies that buffer answers must not buffer this one
	h.Add("Vary", "Accept")
	if r.ProtoMajor == 1 {
		// Each message's write moved the connection's write deadline,
		// which the next request on the connection would otherwise
		// inherit (net/http sets none without a write timeout).
		h["Connection"] = []string{"close"}
	}
	if format == formatSSE {
		h["Content-Type"] = []string{contentSSE}
	} else {
		h["Content-Type"] = []string{contentNDJSON}
	}
	w.WriteHeader(http.StatusOK)
	hs := httpStream{w: w, rc: rc, format: format, timeout: g.writeTimeout()}
	for err == nil {
		if err = hs.msg(body); err != nil {
			// The client is gone: nobody reads the end.
			cancel()
			return reply{status: StatusClientClosed, streamed: true}, nil
		}
		body, err = g.recvJSON(s, &c)
	}
	end := g.endOf(r.Context(), sctx, err, &c)
	cancel()
	status := http.StatusOK
	if end != nil {
		status = end.status
	}
	hs.end(c.rid, end, s)
	return reply{status: status, streamed: true}, nil
}

// writeTimeout bounds one write of a stream's message to its client.
func (g *Gateway) writeTimeout() time.Duration {
	if g.set.writeTimeout > 0 {
		return g.set.writeTimeout
	}
	return wsWriteTimeout
}

// httpStream writes a stream's messages to an HTTP client.
type httpStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	format  streamFormat
	timeout time.Duration
	buf     []byte
}

// msg writes and flushes one message, within the write timeout (the
// server's write timeout bounds each message, not the whole stream).
func (hs *httpStream) msg(body []byte) error {
	b := hs.buf[:0]
	if hs.format == formatSSE {
		b = append(append(append(b, "data: "...), body...), "\n\n"...)
	} else {
		b = append(appendMsg(b, nil, body), '\n')
	}
	hs.buf = b
	return hs.write(b)
}

// end writes the end event or line: the status, and the trailers of a
// stream that ended (s's Trailer is read after its end).
func (hs *httpStream) end(rid string, e *apiError, s meshStream) {
	b := hs.buf[:0]
	md := s.Trailer()
	if hs.format == formatSSE {
		b = append(b, "event: end\nid: "+sseEndID+"\ndata: "...)
		b = append(appendEnd(b, "", nil, rid, e, md), "\n\n"...)
	} else {
		b = append(appendEnd(b, frameEnd, nil, rid, e, md), '\n')
	}
	hs.write(b)
}

func (hs *httpStream) write(b []byte) error {
	_ = hs.rc.SetWriteDeadline(time.Now().Add(hs.timeout))
	if _, err := hs.w.Write(b); err != nil {
		return err
	}
	return hs.rc.Flush()
}
