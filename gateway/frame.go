package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/wizardmesh/wizard/runtime"
)

// The WebSocket frames (DESIGN §8): text messages of one JSON object each.

// Frame types.
const (
	frameAuth   = "auth"
	frameReq    = "req"
	frameCancel = "cancel"
	frameRes    = "res"
	frameMsg    = "msg"   // a stream's message, either way
	frameEnd    = "end"   // the client's half-close; the gateway's end of a stream
	frameSub    = "sub"   // subscribes to events; answered by a sub frame
	frameUnsub  = "unsub" // ends a subscription; answered by an unsub frame
	frameEvent  = "event" // an event of a subscription
)

// maxFrameID bounds a frame's id.
const maxFrameID = 64

// inFrame is a client's frame, decoded strictly: an unknown field is an
// error, so that no client field can pose as the gateway's own.
type inFrame struct {
	Type      string          `json:"type"`
	ID        *string         `json:"id"`
	Token     string          `json:"token"`
	Method    string          `json:"method"`
	Path      string          `json:"path"`
	Body      json.RawMessage `json:"body"`
	TimeoutMs int64           `json:"timeout_ms"`
	Pattern   string          `json:"pattern"` // a sub frame's
	Route     string          `json:"route"`   // a sub frame's
}

// frameError is a frame the gateway cannot act on: its id if it could be
// read (nil: the reply's id is null) and why.
type frameError struct {
	id  *string
	msg string
}

// ping reports whether f is the app-level ping {}.
func (f *inFrame) ping() bool {
	return f.Type == "" && f.ID == nil && f.Token == "" && f.Method == "" && f.Path == "" && f.Body == nil && f.TimeoutMs == 0 && f.Pattern == "" && f.Route == ""
}

// decodeFrame decodes and checks one client frame: the common shape by
// [scanFrame], anything else by encoding/json's strict decoding, which
// has the last word on what a frame is.
func decodeFrame(data []byte) (inFrame, *frameError) {
	f, ok := scanFrame(data)
	if !ok {
		var fe *frameError
		if f, fe = decodeFrameJSON(data); fe != nil {
			return inFrame{}, fe
		}
	}
	return checkFrame(f)
}

// decodeFrameJSON decodes a frame with encoding/json: strictly (an
// unknown field is an error), one JSON value.
func decodeFrameJSON(data []byte) (inFrame, *frameError) {
	var f inFrame
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return inFrame{}, &frameError{id: salvageID(data), msg: frameJSONError(err)}
	}
	if dec.More() {
		return inFrame{}, &frameError{id: salvageID(data), msg: "frame holds more than one JSON value"}
	}
	return f, nil
}

// checkFrame checks a decoded frame.
func checkFrame(f inFrame) (inFrame, *frameError) {
	if f.ping() {
		return f, nil
	}
	if f.ID != nil && !validFrameID(*f.ID) {
		return inFrame{}, &frameError{msg: "frame id must be 1 to " + strconv.Itoa(maxFrameID) + " bytes"}
	}
	if e := f.check(); e != "" {
		return inFrame{}, &frameError{id: f.ID, msg: e}
	}
	return f, nil
}

// check says what is wrong with a decoded frame's fields, or "".
func (f *inFrame) check() string {
	if f.ID == nil {
		return "frame has no id"
	}
	switch f.Type {
	case frameAuth:
		if f.Token == "" {
			return "auth frame has no token"
		}
	case frameReq:
		if f.Method == "" || f.Path == "" || f.Path[0] != '/' {
			return "req frame needs a method and a path starting with '/'"
		}
		if f.TimeoutMs < 0 {
			return "timeout_ms cannot be negative"
		}
	case frameMsg:
		if f.Body == nil {
			return "msg frame has no body"
		}
	case frameSub:
		if f.Pattern == "" && f.Route == "" {
			return "sub frame needs a pattern or a route"
		}
	case frameCancel, frameEnd, frameUnsub:
	case "":
		return "frame has no type"
	default:
		return "unknown frame type " + strconv.Quote(clipString(f.Type, 32)) + " (want auth, req, msg, end, cancel, sub or unsub)"
	}
	return ""
}

func validFrameID(id string) bool { return id != "" && len(id) <= maxFrameID }

// salvageID reads the id of a frame that does not decode, when it is a
// valid one, so that the error reply can still name the request.
func salvageID(data []byte) *string {
	var f struct {
		ID *string `json:"id"`
	}
	if json.Unmarshal(data, &f) != nil || f.ID == nil || !validFrameID(*f.ID) {
		return nil
	}
	return f.ID
}

// frameJSONError words a decoding error for the client, without Go types.
func frameJSONError(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case asErr(err, &se), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "frame is not valid JSON"
	case asErr(err, &te):
		return "frame field " + strconv.Quote(te.Field) + " has the wrong type"
	}
	msg := err.Error()
	if rest, ok := bytes.CutPrefix([]byte(msg), []byte("json: unknown field ")); ok {
		return "frame has an unknown field " + clipString(string(rest), 70)
	}
	return "frame is not a JSON object of the gateway's frames"
}

// outFrame is a frame the gateway sends.
type outFrame struct {
	Type    string  `json:"type"`
	ID      *string `json:"id"`
	OK      *bool   `json:"ok,omitempty"`
	Subject string  `json:"subject,omitempty"`
	Pattern string  `json:"pattern,omitempty"` // a sub frame's answer

	ExpiresAt string          `json:"expires_at,omitempty"`
	Status    int             `json:"status,omitempty"`
	RequestID string          `json:"request_id,omitempty"`
	Body      json.RawMessage `json:"body,omitempty"`
	Error     *errorBody      `json:"error,omitempty"`
	// RetryAfterMs is Retry-After for frames, which have no headers.
	RetryAfterMs int64 `json:"retry_after_ms,omitempty"`
}

// resFrame is the reply of request id: body (JSON, as a call's answer
// decodes), or e.
func resFrame(id *string, rid string, body json.RawMessage, e *apiError) []byte {
	return resFrameStatus(id, rid, http.StatusOK, body, e)
}

// resFrameStatus is resFrame with the status of a successful answer.
func resFrameStatus(id *string, rid string, status int, body json.RawMessage, e *apiError) []byte {
	if e == nil && id != nil && plainJSONString(*id) && plainJSONString(rid) {
		// The common reply, written as json.Marshal writes outFrame
		// (but for escaping <, > and & in the body), without its
		// reflection and the body's second scan.
		b := make([]byte, 0, len(body)+len(*id)+len(rid)+48)
		b = append(append(append(b, `{"type":"res","id":"`...), *id...), `","status":`...)
		b = strconv.AppendInt(b, int64(status), 10)
		if rid != "" {
			b = append(append(append(b, `,"request_id":"`...), rid...), '"')
		}
		if len(body) > 0 {
			b = append(append(b, `,"body":`...), body...)
		}
		return append(b, '}')
	}
	f := outFrame{Type: frameRes, ID: id, RequestID: rid, Status: status, Body: body}
	if e != nil {
		eb := e.body()
		f.Status, f.Body, f.Error = e.status, nil, &eb
		f.RetryAfterMs = e.retryMs
		if f.RetryAfterMs == 0 {
			f.RetryAfterMs = int64(e.retryAfter) * 1000
		}
	}
	b, err := json.Marshal(f)
	if err != nil && f.Error != nil {
		f.Error.Details = nil
		b, err = json.Marshal(f)
	}
	if err != nil { // a body that is not JSON: no call answers one
		return resFrame(id, rid, nil, newAPIError(http.StatusInternalServerError, runtime.CodeInternal, "internal error"))
	}
	return b
}

// plainJSONString reports whether s is written in JSON as it is, between
// quotes, by json.Marshal: printable ASCII but for '"', '\\' and the
// HTML characters it escapes.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

func marshalFrame(f outFrame) []byte {
	b, _ := json.Marshal(f) // only strings, numbers and raw JSON
	return b
}
