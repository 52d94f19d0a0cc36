package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
)

// The WebSocket frames (DESIGN §8): text messages of one JSON object each.

// Frame types.
const (
	frameAuth   = "auth"
	frameReq    = "req"
	frameCancel = "cancel"
	frameRes    = "res"
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
}

// frameError is a frame the gateway cannot act on: its id if it could be
// read (nil: the reply's id is null) and why.
type frameError struct {
	id  *string
	msg string
}

// ping reports whether f is the app-level ping {}.
func (f *inFrame) ping() bool {
	return f.Type == "" && f.ID == nil && f.Token == "" && f.Method == "" && f.Path == "" && f.Body == nil && f.TimeoutMs == 0
}

// decodeFrame decodes and checks one client frame.
func decodeFrame(data []byte) (inFrame, *frameError) {
	var f inFrame
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return inFrame{}, &frameError{id: salvageID(data), msg: frameJSONError(err)}
	}
	if dec.More() {
		return inFrame{}, &frameError{id: salvageID(data), msg: "frame holds more than one JSON value"}
	}
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
	case frameCancel:
	case "":
		return "frame has no type"
	default:
		return "unknown frame type " + strconv.Quote(clipString(f.Type, 32)) + " (want auth, req or cancel)"
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
	Type      string          `json:"type"`
	ID        *string         `json:"id"`
	OK        *bool           `json:"ok,omitempty"`
	Subject   string          `json:"subject,omitempty"`
	ExpiresAt string          `json:"expires_at,omitempty"`
	Status    int             `json:"status,omitempty"`
	RequestID string          `json:"request_id,omitempty"`
	Body      json.RawMessage `json:"body,omitempty"`
	Error     *errorBody      `json:"error,omitempty"`
	// RetryAfterMs is Retry-After for frames, which have no headers.
	RetryAfterMs int64 `json:"retry_after_ms,omitempty"`
}

// resFrame is the reply of request id: body, or e.
func resFrame(id *string, rid string, body json.RawMessage, e *apiError) []byte {
	f := outFrame{Type: frameRes, ID: id, RequestID: rid, Status: 200, Body: body}
	if e != nil {
		eb := e.body()
		f.Status, f.Body, f.Error = e.status, nil, &eb
		f.RetryAfterMs = e.retryMs
		if f.RetryAfterMs == 0 {
			f.RetryAfterMs = int64(e.retryAfter) * 1000
		}
	}
	b, err := json.Marshal(f)
	if err != nil {
		f.Error.Details = nil
		b, _ = json.Marshal(f)
	}
	return b
}

func marshalFrame(f outFrame) []byte {
	b, _ := json.Marshal(f) // only strings, numbers and raw JSON
	return b
}
