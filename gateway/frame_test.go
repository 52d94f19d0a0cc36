package gateway

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/runtime"
)

func TestDecodeFrame(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    string
		want  inFrame
		id    *string // of the error
		error string  // substring; "" for none
	}{
		{name: "ping", in: `{}`, want: inFrame{}},
		{name: "ping with spaces", in: " { } ", want: inFrame{}},
		{name: "req", in: `{"type":"req","id":"42","method":"POST","path":"/a?b=c","body":{"x":1},"timeout_ms":3000}`,
			want: inFrame{Type: "req", ID: strp("42"), Method: "POST", Path: "/a?b=c", Body: json.RawMessage(`{"x":1}`), TimeoutMs: 3000}},
		{name: "auth", in: `{"type":"auth","id":"a1","token":"t"}`, want: inFrame{Type: "auth", ID: strp("a1"), Token: "t"}},
		{name: "cancel", in: `{"type":"cancel","id":"42"}`, want: inFrame{Type: "cancel", ID: strp("42")}},
		{name: "msg", in: `{"type":"msg","id":"s1","body":{"x":1}}`, want: inFrame{Type: "msg", ID: strp("s1"), Body: json.RawMessage(`{"x":1}`)}},
		{name: "msg null", in: `{"type":"msg","id":"s1","body":null}`, want: inFrame{Type: "msg", ID: strp("s1"), Body: json.RawMessage(`null`)}},
		{name: "end", in: `{"type":"end","id":"s1"}`, want: inFrame{Type: "end", ID: strp("s1")}},
		{name: "msg without body", in: `{"type":"msg","id":"s1"}`, id: strp("s1"), error: "no body"},
		{name: "not JSON", in: `{"type":`, error: "not valid JSON"},
		{name: "array", in: `[1]`, error: "wrong type"},
		{name: "two values", in: `{} {}`, error: "more than one"},
		{name: "unknown field", in: `{"type":"req","id":"7","method":"GET","path":"/","auth-subject":"root"}`, id: strp("7"), error: `unknown field "auth-subject"`},
		{name: "no id", in: `{"type":"req","method":"GET","path":"/"}`, error: "no id"},
		{name: "number id", in: `{"type":"req","id":7,"method":"GET","path":"/"}`, error: "wrong type"},
		{name: "long id", in: `{"type":"cancel","id":"` + strings.Repeat("i", 65) + `"}`, error: "1 to 64 bytes"},
		{name: "no type", in: `{"id":"1"}`, id: strp("1"), error: "no type"},
		{name: "bad type", in: `{"type":"res","id":"1"}`, id: strp("1"), error: "unknown frame type"},
		{name: "no path", in: `{"type":"req","id":"1","method":"GET"}`, id: strp("1"), error: "path"},
		{name: "relative path", in: `{"type":"req","id":"1","method":"GET","path":"a"}`, id: strp("1"), error: "path"},
		{name: "negative timeout", in: `{"type":"req","id":"1","method":"GET","path":"/","timeout_ms":-1}`, id: strp("1"), error: "negative"},
		{name: "auth without token", in: `{"type":"auth","id":"1"}`, id: strp("1"), error: "no token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, fe := decodeFrame([]byte(tc.in))
			if tc.error == "" {
				if fe != nil {
					t.Fatalf("error %q", fe.msg)
				}
				if d := cmp.Diff(tc.want, f); d != "" {
					t.Errorf("(-want +got):\n%s", d)
				}
				return
			}
			if fe == nil {
				t.Fatalf("decoded %+v, want an error containing %q", f, tc.error)
			}
			if !strings.Contains(fe.msg, tc.error) {
				t.Errorf("error %q, want it to contain %q", fe.msg, tc.error)
			}
			if d := cmp.Diff(tc.id, fe.id); d != "" {
				t.Errorf("error's id (-want +got):\n%s", d)
			}
		})
	}
}

// FuzzDecodeFrame: the decoder never panics; a frame it accepts is a
// ping or has a valid id and a known type; an error's id is valid or nil;
// every reply to it encodes as JSON.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"type":"req","id":"42","method":"POST","path":"/a","body":{"x":1},"timeout_ms":3000}`,
		`{"type":"auth","id":"a1","token":"t"}`, `{"type":"cancel","id":"42"}`, `not json`, `{"id":"x"}`,
		`{"type":"req","id":"1","method":"GET","path":"/","extra":1}`, `{"id":"\u0000"}`, `[]`, `null`, `{"body":null}`,
		`{"type":"msg","id":"s1","body":{"x":"\n"}}`, `{"type":"end","id":"s1"}`, `{"type":"msg","id":"s1"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, fe := decodeFrame(data)
		if fe != nil {
			if fe.id != nil && !validFrameID(*fe.id) {
				t.Fatalf("error with invalid id %q", *fe.id)
			}
			if fe.msg == "" {
				t.Fatal("error without a message")
			}
			if !json.Valid(resFrame(fe.id, "", nil, badRequest(fe.msg))) {
				t.Fatal("the error reply is not JSON")
			}
			return
		}
		if fr.ping() {
			return
		}
		if fr.ID == nil || !validFrameID(*fr.ID) {
			t.Fatalf("accepted a frame without a valid id: %+v", fr)
		}
		switch fr.Type {
		case frameAuth, frameReq, frameCancel:
		case frameEnd:
			if !json.Valid(appendEnd(nil, frameEnd, fr.ID, "r", badRequest("x"), runtime.Metadata{})) {
				t.Fatal("the end frame is not JSON")
			}
		case frameMsg:
			// A msg frame's body goes back out in the gateway's frames
			// and lines: JSON, and on one line.
			line := appendMsg(nil, fr.ID, oneLine(fr.Body))
			if !json.Valid(line) || bytes.ContainsAny(line, "\r\n") {
				t.Fatalf("the msg frame %q is written as %q", data, line)
			}
		default:
			t.Fatalf("accepted type %q", fr.Type)
		}
		if !json.Valid(resFrame(fr.ID, "r", json.RawMessage(`{}`), nil)) {
			t.Fatal("the reply is not JSON")
		}
	})
}
