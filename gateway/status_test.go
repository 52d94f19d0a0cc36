package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"
	"github.com/wizardmesh/wizard/runtime"
)

// statusCase is one row of the status table, asked over HTTP and over
// WebSocket.
type statusCase struct {
	name        string
	method      string
	path        string // with its query
	body        string
	contentType string // HTTP; default application/json with a body
	token       string
	hint        string // X-Request-Timeout-Ms (HTTP), timeout_ms (WebSocket)
	setup       func(t *testing.T, tg *testGateway) (cleanup func())
	httpOnly    string // why the row has no WebSocket form

	status  int
	code    string
	message string            // a substring of the error's message
	headers map[string]string // HTTP: wanted headers (a prefix of the value)
}

// outcome is what a client saw of a request.
type outcome struct {
	status    int
	code      string
	message   string
	requestID string
	header    http.Header
	body      json.RawMessage
}

// holdBusy fills the busy node's one slot with a call of the gateway's
// node until cleanup.
func holdBusy(t *testing.T, tg *testGateway) func() {
	done := make(chan error, 1)
	go func() {
		_, err := tg.node.Act(context.Background(), "role:t,cmd:busy", map[string]any{"hold": true})
		done <- err
	}()
	recv(t, tg.b.holdStarted)
	return func() {
		tg.b.releaseOne <- struct{}{}
		if err := recv(t, done); err != nil {
			t.Errorf("the held call: %v", err)
		}
	}
}

// exhaustSubject empties the bucket of the subject "limited".
func exhaustSubject(t *testing.T, tg *testGateway) func() {
	for i := 0; ; i++ {
		if ok, _ := tg.now().subLim.allow("limited"); !ok {
			break
		}
		if i > 1e6 {
			t.Fatal("the subject's bucket never empties")
		}
	}
	return func() {}
}

func statusCases() []statusCase {
	retry := map[string]string{"Retry-After": "1"}
	cases := []statusCase{
		{name: "ok", method: "GET", path: "/echo?x=1", status: 200},
		{name: "ok with body", method: "POST", path: "/echo", body: `{"a":"b"}`, status: 200},
		{name: "no route", method: "GET", path: "/nope", status: 404, code: "not_found", message: "GET /nope"},
		{name: "wrong method", method: "DELETE", path: "/echo", status: 405, code: "unimplemented", headers: map[string]string{"Allow": "GET, POST"}},
		{name: "nobody serves the pattern", method: "GET", path: "/absent", status: 503, code: "unavailable", message: "GET /absent", headers: retry},
		{name: "timeout", method: "GET", path: "/slow", status: 504, code: "deadline_exceeded"},
		{name: "timeout hint", method: "GET", path: "/slow", hint: "20", status: 504, code: "deadline_exceeded"},
		{name: "overloaded", method: "GET", path: "/busy", setup: holdBusy, status: 503, code: "resource_exhausted", headers: retry},
		{name: "breaker open", method: "GET", path: "/broken", status: 503, code: "unavailable", headers: retry},
		{name: "rate limited", method: "GET", path: "/private", token: "limited", setup: exhaustSubject, status: 429, code: "resource_exhausted", headers: map[string]string{"Retry-After": ""}},
		{name: "token missing", method: "GET", path: "/private", status: 401, code: "unauthenticated", headers: map[string]string{"WWW-Authenticate": "Bearer"}},
		{name: "token invalid", method: "GET", path: "/private", token: "bad", status: 401, code: "unauthenticated", headers: map[string]string{"WWW-Authenticate": `Bearer error="invalid_token"`}},
		{name: "token on an optional route", method: "GET", path: "/echo", token: "good", status: 200},
		{name: "scope missing", method: "GET", path: "/admin", token: "good", status: 403, code: "permission_denied", headers: map[string]string{"WWW-Authenticate": `Bearer error="insufficient_scope"`}},
		{name: "optional route with a scope, no token", method: "GET", path: "/optscoped", status: 401, code: "unauthenticated"},
		{name: "optional route with a scope, token", method: "GET", path: "/optscoped", token: "admin", status: 200},
		{name: "scope present", method: "GET", path: "/admin", token: "admin", status: 200},
		{name: "client sets a pattern key", method: "POST", path: "/echo", body: `{"cmd":"other"}`, status: 400, code: "invalid_argument", message: "cmd"},
		{name: "client sets a pattern key in the query", method: "GET", path: "/echo?role=x", status: 400, code: "invalid_argument", message: "role"},
		{name: "client sets metadata", method: "POST", path: "/echo", body: `{"auth-subject$":"root"}`, status: 400, code: "invalid_argument", message: "auth-subject$"},
		{name: "bad timeout hint", method: "GET", path: "/echo", hint: "soon", status: 400, code: "invalid_argument", message: TimeoutHeader, httpOnly: "timeout_ms is a number: the decoder refuses a string"},
		{name: "body too large", method: "POST", path: "/echo", body: `{"a":"` + strings.Repeat("x", 2048) + `"}`, status: 413, code: "invalid_argument", httpOnly: "a frame over the size limit closes the connection (1009): TestWebSocketFrameTooBig"},
		{name: "not JSON", method: "POST", path: "/echo", body: "a=b", contentType: "application/x-www-form-urlencoded", status: 415, code: "invalid_argument", httpOnly: "frames are JSON"},
		{name: "panic", method: "GET", path: "/panic", status: 500, code: "internal", message: "internal error"},
		{name: "plain error", method: "GET", path: "/err?code=mine", status: 500, code: "unknown", message: "internal error"},
	}
	for _, c := range []struct {
		code   runtime.Code
		status int
	}{
		{runtime.CodeInvalidArgument, 400}, {runtime.CodeNotFound, 404}, {runtime.CodeAlreadyExists, 409},
		{runtime.CodePermissionDenied, 403}, {runtime.CodeFailedPrecondition, 400}, {runtime.CodeUnimplemented, 501},
		{runtime.CodeUnauthenticated, 401}, {runtime.CodeUnavailable, 503}, {runtime.CodeDeadlineExceeded, 504},
		{runtime.CodeInternal, 500}, {runtime.CodeUnknown, 500}, {runtime.CodeDataLoss, 500},
		{runtime.CodeResourceExhausted, 503}, {runtime.CodeAborted, 409}, {runtime.CodeOutOfRange, 400}, {runtime.CodeCanceled, 499},
	} {
		msg := "handler says " + c.code.String()
		if c.status == 500 {
			msg = "internal error"
		}
		cases = append(cases, statusCase{name: "handler " + c.code.String(), method: "GET", path: "/err?code=" + c.code.String(), status: c.status, code: c.code.String(), message: msg})
	}
	return cases
}

func TestStatusTable(t *testing.T) {
	tg := newTestGateway(t, settings{maxBody: 1024, perSubject: rateSpec{rate: 0.001, burst: 100}})
	for _, via := range []struct {
		name string
		do   func(t *testing.T, tg *testGateway, c statusCase) outcome
	}{{"http", doHTTP}, {"websocket", doWebSocket}} {
		t.Run(via.name, func(t *testing.T) {
			for _, c := range statusCases() {
				if via.name == "websocket" && c.httpOnly != "" {
					continue // the row has no WebSocket form (c.httpOnly says why): not a skip
				}
				t.Run(c.name, func(t *testing.T) {
					if c.setup != nil {
						t.Cleanup(c.setup(t, tg))
					}
					got := via.do(t, tg, c)
					if got.status != c.status || got.code != c.code || !strings.Contains(got.message, c.message) {
						t.Fatalf("%s %s: got %d %q %q, want %d %q containing %q", c.method, c.path, got.status, got.code, got.message, c.status, c.code, c.message)
					}
					if c.status >= 500 && strings.Contains(got.message, "wizard:") || strings.Contains(got.message, "secret") || strings.Contains(got.message, "127.0.0.1") {
						t.Errorf("the message %q leaks the mesh's own words", got.message)
					}
					if !validRequestID(got.requestID) {
						t.Errorf("request id %q", got.requestID)
					}
					if via.name == "http" {
						if got.header.Get("X-Request-Id") != got.requestID && c.status != 200 {
							t.Errorf("X-Request-Id %q, body's request_id %q", got.header.Get("X-Request-Id"), got.requestID)
						}
						for k, v := range c.headers {
							if h := got.header.Get(k); h == "" || !strings.HasPrefix(h, v) {
								t.Errorf("header %s = %q, want it to start with %q", k, h, v)
							}
						}
					}
				})
			}
		})
	}
}

func doHTTP(t *testing.T, tg *testGateway, c statusCase) outcome {
	t.Helper()
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequestWithContext(t.Context(), c.method, tg.base+c.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if c.body != "" {
		ct := c.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.hint != "" {
		req.Header.Set(TimeoutHeader, c.hint)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := outcome{status: res.StatusCode, header: res.Header, requestID: res.Header.Get("X-Request-Id"), body: b}
	if res.StatusCode != 200 {
		var env struct {
			Error     errorBody `json:"error"`
			RequestID string    `json:"request_id"`
		}
		if err := json.Unmarshal(b, &env); err != nil {
			t.Fatalf("error body %q: %v", b, err)
		}
		if ct := res.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		out.code, out.message, out.requestID = env.Error.Code, env.Error.Message, env.RequestID
	}
	return out
}

// wsFrame is a server frame as a test reads it.
type wsFrame struct {
	Type      string          `json:"type"`
	ID        *string         `json:"id"`
	OK        *bool           `json:"ok"`
	Subject   string          `json:"subject"`
	ExpiresAt string          `json:"expires_at"`
	Status    int             `json:"status"`
	RequestID string          `json:"request_id"`
	Body      json.RawMessage `json:"body"`
	Error     *errorBody      `json:"error"`
	// RetryAfterMs is a 429's or 503's retry_after_ms.
	RetryAfterMs int64 `json:"retry_after_ms"`
	// Pattern is a sub frame's answer's, or an event frame's; Sub and
	// Data an event frame's.
	Pattern string          `json:"pattern"`
	Sub     string          `json:"sub"`
	Data    json.RawMessage `json:"data"`
}

func dialWS(t *testing.T, url string, opts *websocket.DialOptions) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	c, res, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", url, err, res)
	}
	c.SetReadLimit(1 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return c
}

func sendFrame(t *testing.T, c *websocket.Conn, f any) {
	t.Helper()
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	sendRaw(t, c, b)
}

func sendRaw(t *testing.T, c *websocket.Conn, b []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
}

func readFrame(t *testing.T, c *websocket.Conn) (wsFrame, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	_, b, err := c.Read(ctx)
	if err != nil {
		return wsFrame{}, err
	}
	var f wsFrame
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("frame %s: %v", b, err)
	}
	return f, nil
}

func mustReadFrame(t *testing.T, c *websocket.Conn) wsFrame {
	t.Helper()
	f, err := readFrame(t, c)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func doWebSocket(t *testing.T, tg *testGateway, c statusCase) outcome {
	t.Helper()
	conn := dialWS(t, tg.ws, nil)
	defer conn.Close(websocket.StatusNormalClosure, "")
	if c.token != "" {
		sendFrame(t, conn, map[string]any{"type": "auth", "id": "a1", "token": c.token})
		f := mustReadFrame(t, conn)
		if f.Type != "auth" || f.ID == nil || *f.ID != "a1" {
			t.Fatalf("auth reply %+v", f)
		}
		if !*f.OK {
			return outcome{status: f.Status, code: f.Error.Code, message: f.Error.Message, requestID: newRequestID()}
		}
	}
	req := map[string]any{"type": "req", "id": "r1", "method": c.method, "path": c.path}
	if c.body != "" {
		req["body"] = json.RawMessage(c.body)
	}
	if c.hint != "" {
		req["timeout_ms"] = json.RawMessage(c.hint)
	}
	sendFrame(t, conn, req)
	f := mustReadFrame(t, conn)
	if f.Type != "res" || f.ID == nil || *f.ID != "r1" {
		t.Fatalf("reply %+v, want a res for r1", f)
	}
	out := outcome{status: f.Status, requestID: f.RequestID, body: f.Body}
	if f.Error != nil {
		out.code, out.message = f.Error.Code, f.Error.Message
	}
	return out
}

// TestEchoBody checks what a handler receives and what the client reads.
func TestEchoBody(t *testing.T) {
	tg := newTestGateway(t, settings{})
	got := doHTTP(t, tg, statusCase{method: "POST", path: "/echo?q=1", body: `{"a":"b","n":2}`})
	var m map[string]any
	if err := json.Unmarshal(got.body, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": "b", "n": 2.0, "q": "1", "role": "t", "cmd": "echo"}
	if d := cmp.Diff(want, m); d != "" {
		t.Errorf("echo (-want +got):\n%s", d)
	}
	_ = time.Second
}
