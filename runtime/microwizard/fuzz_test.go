package microwizard

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// FuzzDecodeLine: no line crashes the decoder or what serving and
// calling make of a decoded line.
func FuzzDecodeLine(f *testing.F) {
	for _, s := range []string{
		`{"id":"1","k":"a","sync":true,"args":{"role":"math","cmd":"sum","a":1,"b":2}}`,
		`{"id":"2","k":"aE","sync":false,"p":"role:math,cmd:sum,kind:x","d":{"a":1}}`,
		`{"id":"3","k":"res","sync":true,"res":{"answer":3}}`,
		`{"id":"4","k":"res","error":{"message":"retry_later_err_overload","name":"Error","stack":"x"}}`,
		`{"id":"5","k":"res","error":"invalid_json"}`,
		`{"id":"a/b","kind":"act","origin":"o","track":["o"],"time":{"client_sent":1},"act":{"role":"x"},"sync":true}`,
		`{"id":"a/b","kind":"res","origin":"o","accept":"p","track":["o"],"res":{"x":1}}`,
		`{"id":"a/b","kind":"res","origin":"o","error":{"code":"act_execute","orig":{"code":"out_of_range"},"msg":"seneca: x","details":{"message":"x","orig$":{}},"name":"Error"}}`,
		`{"id":"a/b","kind":"res","error":{"orig":{"name":1,"message":"m","code":"ok"},"details":[1]}}`,
		`{"h":1}`, `{"h":2}`, `not json`, `{"k":"zz"}`, `[1,2]`, `{"args":{"a":1e400,"b$":1,"c d":2}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if h := headLine(b); json.Valid(b) && h.ID != "" {
			if l, err := decodeLine(b); err == nil && l.ID != h.ID {
				t.Fatalf("the head of %q has id %q, the line %q", b, h.ID, l.ID)
			}
		}
		l, err := decodeLine(b)
		if err != nil {
			return
		}
		if m, err := requestMessage(l, nil); err == nil {
			if _, err := pattern.Parse(m.Pattern); err != nil && l.K == kindAct {
				t.Fatalf("act's pattern %q does not parse: %v", m.Pattern, err)
			}
		}
		replyMessage(l)
		if l.Error != nil {
			m := fromLineError(l.Error)
			toLineError(m)
			if ne := NodeErrorOf(&runtime.Error{Details: decodeDetails(m.Payload)}); l.Error.Orig != nil && l.Error.Message != overloadMessage && (ne == nil || ne.Orig == nil) {
				t.Fatalf("the orig of %q did not cross: %+v", b, ne)
			}
		}
	})
}

// FuzzReadLine: readLine returns each line of at most max bytes, and
// errLineTooLong with its head for a longer one, then the next line,
// whatever the input.
func FuzzReadLine(f *testing.F) {
	f.Add([]byte("a\nbb\n\nccc"), 2)
	f.Add(bytes.Repeat([]byte("x"), 300), 100)
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		if max < 1 || max > 1<<16 {
			return
		}
		r := bufio.NewReaderSize(bytes.NewReader(in), 16)
		want := bytes.Split(in, []byte("\n"))
		var buf []byte
		for i := 0; ; i++ {
			b, nb, err := readLine(r, max, buf)
			buf = nb
			if errors.Is(err, errLineTooLong) {
				if len(want[i]) <= max {
					t.Fatalf("line %d (%d bytes) refused at max %d", i, len(want[i]), max)
				}
				if !bytes.HasPrefix(want[i], b) {
					t.Fatalf("line %d: head %q is not its start", i, b)
				}
				continue // the next line is read
			}
			if err != nil {
				return
			}
			if !bytes.Equal(b, want[i]) {
				t.Fatalf("line %d = %q, want %q", i, b, want[i])
			}
		}
	})
}

// echoServer answers every call with its payload.
type echoServer struct{}

func (echoServer) ServeMessage(ctx context.Context, m *runtime.Message) *runtime.Message {
	return &runtime.Message{Codec: m.Codec, Payload: m.Payload}
}

// FuzzServeHTTP: no body or track header crashes the Seneca HTTP
// listener's handler, and every answer is JSON.
func FuzzServeHTTP(f *testing.F) {
	f.Add([]byte(`{"role":"go","cmd":"sum","a":1}`), `["x"]`)
	f.Add([]byte(`[1,2]`), `not json`)
	f.Add([]byte(`{"a":{"b":[1]},"c$":1}`), `["me"]`)
	t, err := New(WithSenecaHTTP("me"), WithMaxLine(1<<12))
	if err != nil {
		f.Fatal(err)
	}
	l := &httpListener{t: t, s: echoServer{}}
	f.Fuzz(func(tt *testing.T, body []byte, track string) {
		r := httptest.NewRequest(http.MethodPost, senecaPath, bytes.NewReader(body))
		r.Header.Set(hTrack, track)
		w := httptest.NewRecorder()
		l.ServeHTTP(w, r)
		if b := w.Body.Bytes(); len(b) > 0 && !json.Valid(b) {
			tt.Fatalf("status %d, body %q is not JSON", w.Code, b)
		}
	})
}
