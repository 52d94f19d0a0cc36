package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/runtime"
)

// streamBackend is a service node with stream handlers, behind its own
// gateway node.
type streamBackend struct {
	svc      *runtime.Node
	held     chan struct{} // a hold handler sent its message and waits
	heldDone chan error    // its ctx ended (ctx.Err())
	sent     atomic.Int64  // the flood handler's messages sent
	floodEnd chan error    // the flood handler returned
}

// floodSize is the flood handler's message size: 64 KiB of padding.
const floodSize = 64 << 10

// floodCount is how many messages the flood handler tries to send:
// far more than any bound of the gateway's lets through a slow client.
const floodCount = 1600

var floodPad = strings.Repeat("x", floodSize)

// count reads n from a query (a string) or a body (a number).
func count(req runtime.Request) int {
	if n, ok := req.Int64("n"); ok {
		return int(n)
	}
	s, _ := req.String("n")
	n, _ := strconv.Atoi(s)
	return n
}

func newStreamBackend(t testing.TB) *streamBackend {
	t.Helper()
	b := &streamBackend{held: make(chan struct{}, 16), heldDone: make(chan error, 16), floodEnd: make(chan error, 16)}
	b.svc = newNode(t)
	add := func(pattern string, fn func(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error) {
		t.Helper()
		if err := b.svc.Add(pattern, runtime.NewStreamHandler(fn)); err != nil {
			t.Fatal(err)
		}
	}
	// count: n messages {"i":i}, the trailer count: n.
	add("role:s,cmd:count", func(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error {
		req, err := s.Recv()
		if err != nil {
			return err
		}
		n := count(req)
		for i := range n {
			if err := s.Send(map[string]any{"i": i, "text": "line\nbreak"}); err != nil {
				return err
			}
		}
		s.SetTrailer("count", strconv.Itoa(n))
		return nil
	})
	// fail: two messages, then not_found; failfirst: permission_denied
	// before any.
	add("role:s,cmd:fail", func(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error {
		for i := range 2 {
			if err := s.Send(map[string]any{"i": i}); err != nil {
				return err
			}
		}
		return runtime.NewError(runtime.CodeNotFound, "the rest is gone")
	})
	add("role:s,cmd:failfirst", func(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error {
		return runtime.NewError(runtime.CodePermissionDenied, "not for you")
	})
	// hold: one message, then waits for its ctx's end.
	add("role:s,cmd:hold", func(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error {
		if err := s.Send(map[string]any{"held": true}); err != nil {
			return err
		}
		b.held <- struct{}{}
		<-ctx.Done()
		b.heldDone <- ctx.Err()
		return ctx.Err()
	})
	// flood: floodCount messages of floodSize as fast as flow control
	// lets it.
	add("role:s,cmd:flood", func(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error {
		var err error
		for i := range floodCount {
			if err = s.Send(map[string]any{"i": i, "pad": floodPad}); err != nil {
				break
			}
			b.sent.Add(1)
		}
		b.floodEnd <- err
		return err
	})
	// meta: the open's metadata as one message.
	add("role:s,cmd:meta", func(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error {
		out := map[string]any{}
		for k, v := range runtime.IncomingMetadata(ctx).All() {
			out[k] = v
		}
		if dl, ok := ctx.Deadline(); ok {
			out["deadline_ms"] = strconv.FormatInt(time.Until(dl).Milliseconds(), 10)
		}
		return s.Send(out)
	})
	// sum: a client stream, the sum of the messages' v.
	add("role:s,cmd:sum", func(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error {
		sum := 0.0
		for {
			req, err := s.Recv()
			if errors.Is(err, io.EOF) {
				return s.Send(map[string]any{"sum": sum})
			}
			if err != nil {
				return err
			}
			v, _ := req.Float64("v")
			sum += v
		}
	})
	// echo: a bidi stream, each message back as {"echo": v}.
	add("role:s,cmd:echo", func(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error {
		for {
			req, err := s.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if err := s.Send(map[string]any{"echo": req.Get("v")}); err != nil {
				return err
			}
		}
	})
	return b
}

func streamRoute(methods, path, pattern string, kind streamKind) testRoute {
	return testRoute{methods: strings.Split(methods, ","), path: path, pattern: pattern,
		policy: policy{name: strings.TrimPrefix(path, "/"), auth: authOptional, maxTimeout: 10 * time.Second, stream: kind}}
}

func streamRoutes() testTable {
	return testTable{
		streamRoute("GET,POST", "/s/count", "role:s,cmd:count", streamServer),
		streamRoute("GET", "/s/fail", "role:s,cmd:fail", streamServer),
		streamRoute("GET", "/s/failfirst", "role:s,cmd:failfirst", streamServer),
		streamRoute("GET", "/s/hold", "role:s,cmd:hold", streamServer),
		streamRoute("GET", "/s/flood", "role:s,cmd:flood", streamServer),
		streamRoute("GET", "/s/meta", "role:s,cmd:meta", streamServer),
		streamRoute("POST", "/s/sum", "role:s,cmd:sum", streamClient),
		streamRoute("POST", "/s/echo", "role:s,cmd:echo", streamBidi),
		streamRoute("GET", "/s/absent", "role:s,cmd:absent", streamServer),
	}
}

// streamGateway is a gateway with streamRoutes in front of a
// streamBackend over TCP.
func newStreamGateway(t testing.TB, set settings) (*testGateway, *streamBackend) {
	t.Helper()
	b := newStreamBackend(t)
	n := newNode(t, runtime.WithDiscovery(runtime.StaticPeers(b.svc.Addr())))
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	if err := n.WaitFor(ctx, "role:s,cmd:count"); err != nil {
		t.Fatal(err)
	}
	return newTestGatewayOn(t, nil, n, streamRoutes(), set), b
}

// streamFrame is a frame of a stream the gateway sends.
type streamFrame struct {
	Type      string              `json:"type"`
	ID        *string             `json:"id"`
	Status    int                 `json:"status"`
	RequestID string              `json:"request_id"`
	Body      json.RawMessage     `json:"body"`
	Error     *errorBody          `json:"error"`
	Trailer   map[string][]string `json:"trailer"`
	// RetryAfterMs is a 429's retry_after_ms.
	RetryAfterMs int64 `json:"retry_after_ms"`
}

func readStreamFrame(t testing.TB, c *websocket.Conn) streamFrame {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var f streamFrame
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("frame %s: %v", b, err)
	}
	return f
}

// readStream reads frames of stream id until its end frame: the bodies
// of its msg frames, and the end.
func readStream(t testing.TB, c *websocket.Conn, id string) ([]string, streamFrame) {
	t.Helper()
	var msgs []string
	for {
		f := readStreamFrame(t, c)
		if f.ID == nil || *f.ID != id {
			t.Fatalf("frame %+v, want one of stream %s", f, id)
		}
		switch f.Type {
		case frameMsg:
			msgs = append(msgs, string(f.Body))
		case frameEnd:
			return msgs, f
		default:
			t.Fatalf("frame %+v, want msg or end", f)
		}
	}
}

func TestStreamWebSocketServer(t *testing.T) {
	tg, _ := newStreamGateway(t, settings{})
	c := dialWS(t, tg.ws, nil)
	sendFrame(t, c, map[string]any{"type": "req", "id": "s1", "method": "GET", "path": "/s/count?n=5"})
	msgs, end := readStream(t, c, "s1")
	var want []string
	for i := range 5 {
		want = append(want, `{"i":`+strconv.Itoa(i)+`,"text":"line\nbreak"}`)
	}
	if d := cmp.Diff(want, msgs); d != "" {
		t.Errorf("messages (-want +got):\n%s", d)
	}
	if end.Status != 200 || end.Error != nil || end.RequestID == "" || !cmp.Equal(end.Trailer, map[string][]string{"count": {"5"}}) {
		t.Errorf("end %+v, want 200 with the trailer count: 5", end)
	}
	// The connection goes on: a stream that fails midway, one refused
	// before its first message, and a pattern nobody serves.
	sendFrame(t, c, map[string]any{"type": "req", "id": "s2", "method": "GET", "path": "/s/fail"})
	msgs, end = readStream(t, c, "s2")
	if len(msgs) != 2 || end.Status != 404 || end.Error == nil || end.Error.Code != "not_found" || end.Error.Message != "the rest is gone" {
		t.Errorf("fail: %d messages, end %+v; want 2, then 404 not_found", len(msgs), end)
	}
	sendFrame(t, c, map[string]any{"type": "req", "id": "s3", "method": "GET", "path": "/s/failfirst"})
	if msgs, end = readStream(t, c, "s3"); len(msgs) != 0 || end.Status != 403 || end.Error.Code != "permission_denied" {
		t.Errorf("failfirst: %d messages, end %+v; want none, then 403", len(msgs), end)
	}
	sendFrame(t, c, map[string]any{"type": "req", "id": "s4", "method": "GET", "path": "/s/absent"})
	if _, end = readStream(t, c, "s4"); end.Status != 503 || end.Error.Code != "unavailable" {
		t.Errorf("absent: end %+v, want 503 unavailable", end)
	}
	// The open carries the call's metadata.
	sendFrame(t, c, map[string]any{"type": "auth", "id": "a1", "token": "good"})
	mustReadFrame(t, c)
	sendFrame(t, c, map[string]any{"type": "req", "id": "s5", "method": "GET", "path": "/s/meta"})
	msgs, end = readStream(t, c, "s5")
	var meta map[string]string
	if len(msgs) != 1 || json.Unmarshal([]byte(msgs[0]), &meta) != nil || meta[MetaAuthSubject] != "u1" || meta[MetaRequestID] != end.RequestID {
		t.Errorf("meta: %v, end %+v; want the subject u1 and the end's request id", msgs, end)
	}
}

func TestStreamWebSocketClientAndBidi(t *testing.T) {
	tg, _ := newStreamGateway(t, settings{})
	c := dialWS(t, tg.ws, nil)
	t.Run("client", func(t *testing.T) {
		sendFrame(t, c, map[string]any{"type": "req", "id": "c1", "method": "POST", "path": "/s/sum"})
		for i := 1; i <= 10; i++ {
			sendFrame(t, c, map[string]any{"type": "msg", "id": "c1", "body": map[string]any{"v": i}})
		}
		sendFrame(t, c, map[string]any{"type": "end", "id": "c1"})
		msgs, end := readStream(t, c, "c1")
		if d := cmp.Diff([]string{`{"sum":55}`}, msgs); d != "" || end.Status != 200 {
			t.Errorf("sum: end %+v, messages (-want +got):\n%s", end, d)
		}
	})
	t.Run("bidi", func(t *testing.T) {
		// The req frame's body is the first message.
		sendFrame(t, c, map[string]any{"type": "req", "id": "b1", "method": "POST", "path": "/s/echo", "body": map[string]any{"v": "zero"}})
		if f := readStreamFrame(t, c); f.Type != frameMsg || string(f.Body) != `{"echo":"zero"}` {
			t.Fatalf("first echo %+v", f)
		}
		for _, v := range []string{"one", "two", "three"} {
			sendFrame(t, c, map[string]any{"type": "msg", "id": "b1", "body": map[string]any{"v": v}})
			if f := readStreamFrame(t, c); f.Type != frameMsg || string(f.Body) != `{"echo":"`+v+`"}` {
				t.Fatalf("echo of %s: %+v", v, f)
			}
		}
		sendFrame(t, c, map[string]any{"type": "end", "id": "b1"})
		if msgs, end := readStream(t, c, "b1"); len(msgs) != 0 || end.Status != 200 {
			t.Errorf("after the end frame: %v, %+v; want the end, 200", msgs, end)
		}
	})
	t.Run("misuse", func(t *testing.T) {
		// A metadata key in a message ends the stream, 400.
		sendFrame(t, c, map[string]any{"type": "req", "id": "m1", "method": "POST", "path": "/s/echo"})
		sendFrame(t, c, map[string]any{"type": "msg", "id": "m1", "body": map[string]any{"v": 1, "auth$": "root"}})
		if _, end := readStream(t, c, "m1"); end.Status != 400 || !strings.Contains(end.Error.Message, `"auth$"`) {
			t.Errorf("a metadata key: %+v, want 400 naming it", end)
		}
		// A msg frame to a server stream ends it, 400.
		sendFrame(t, c, map[string]any{"type": "req", "id": "m2", "method": "GET", "path": "/s/hold"})
		readStreamFrame(t, c)
		sendFrame(t, c, map[string]any{"type": "msg", "id": "m2", "body": 1})
		if msgs, end := readStream(t, c, "m2"); len(msgs) != 0 || end.Status != 400 || end.Error.Code != "invalid_argument" {
			t.Errorf("msg to a server stream: %v %+v, want the end 400", msgs, end)
		}
		// A msg frame for no stream is answered, 400.
		sendFrame(t, c, map[string]any{"type": "msg", "id": "nope", "body": 1})
		if f := mustReadFrame(t, c); f.Type != frameRes || f.Status != 400 || *f.ID != "nope" {
			t.Errorf("msg for no stream: %+v, want res 400", f)
		}
	})
}

func TestStreamWebSocketCancelAndDisconnect(t *testing.T) {
	tg, b := newStreamGateway(t, settings{})
	t.Run("cancel", func(t *testing.T) {
		c := dialWS(t, tg.ws, nil)
		sendFrame(t, c, map[string]any{"type": "req", "id": "h1", "method": "GET", "path": "/s/hold"})
		if f := readStreamFrame(t, c); f.Type != frameMsg {
			t.Fatalf("first frame %+v", f)
		}
		recv(t, b.held)
		sendFrame(t, c, map[string]any{"type": "cancel", "id": "h1"})
		if err := recv(t, b.heldDone); !errors.Is(err, context.Canceled) {
			t.Errorf("the handler's ctx ended with %v, want context.Canceled", err)
		}
		if _, end := readStream(t, c, "h1"); end.Status != StatusClientClosed || end.Error.Code != "canceled" {
			t.Errorf("end %+v, want 499 canceled", end)
		}
	})
	t.Run("disconnect", func(t *testing.T) {
		c := dialWS(t, tg.ws, nil)
		for _, id := range []string{"h1", "h2"} {
			sendFrame(t, c, map[string]any{"type": "req", "id": id, "method": "GET", "path": "/s/hold"})
			recv(t, b.held)
		}
		c.CloseNow()
		for range 2 {
			if err := recv(t, b.heldDone); !errors.Is(err, context.Canceled) {
				t.Errorf("a handler's ctx ended with %v, want context.Canceled", err)
			}
		}
	})
	t.Run("limit", func(t *testing.T) {
		tg, b := newStreamGateway(t, settings{ws: wsSettings{maxStreams: 2}})
		c := dialWS(t, tg.ws, nil)
		for _, id := range []string{"h1", "h2"} {
			sendFrame(t, c, map[string]any{"type": "req", "id": id, "method": "GET", "path": "/s/hold"})
			readStreamFrame(t, c)
			recv(t, b.held)
		}
		sendFrame(t, c, map[string]any{"type": "req", "id": "h3", "method": "GET", "path": "/s/hold"})
		if _, end := readStream(t, c, "h3"); end.Status != 429 || end.Error.Code != "resource_exhausted" || !strings.Contains(end.Error.Message, "too many streams") {
			t.Errorf("a third stream: %+v, want the end 429", end)
		}
		// Unary requests are not streams.
		sendFrame(t, c, map[string]any{"type": "cancel", "id": "h1"})
		readStream(t, c, "h1")
		recv(t, b.heldDone)
		sendFrame(t, c, map[string]any{"type": "req", "id": "h3", "method": "GET", "path": "/s/count?n=1"})
		if msgs, end := readStream(t, c, "h3"); len(msgs) != 1 || end.Status != 200 {
			t.Errorf("under the limit again: %v %+v", msgs, end)
		}
	})
}

// getStream GETs path with accept, returning the response.
func getStream(t testing.TB, ctx context.Context, url, accept string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

func TestStreamNDJSON(t *testing.T) {
	tg, _ := newStreamGateway(t, settings{})
	for _, accept := range []string{"", "application/x-ndjson", "*/*"} {
		res := getStream(t, t.Context(), tg.base+"/s/count?n=3", accept)
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != contentNDJSON {
			t.Fatalf("Accept %q: %d %s", accept, res.StatusCode, res.Header.Get("Content-Type"))
		}
		rid := res.Header.Get("X-Request-Id")
		want := `{"type":"msg","body":{"i":0,"text":"line\nbreak"}}
{"type":"msg","body":{"i":1,"text":"line\nbreak"}}
{"type":"msg","body":{"i":2,"text":"line\nbreak"}}
{"type":"end","status":200,"request_id":"` + rid + `","trailer":{"count":["3"]}}
`
		if d := cmp.Diff(want, string(body)); d != "" {
			t.Errorf("Accept %q (-want +got):\n%s", accept, d)
		}
	}
	// A stream without messages is its end line.
	res0 := getStream(t, t.Context(), tg.base+"/s/count?n=0", "")
	body0, _ := io.ReadAll(res0.Body)
	if want := `{"type":"end","status":200,"request_id":"` + res0.Header.Get("X-Request-Id") + `","trailer":{"count":["0"]}}` + "\n"; res0.StatusCode != 200 || string(body0) != want {
		t.Errorf("no messages: %d %s, want 200 %s", res0.StatusCode, body0, want)
	}
	// An error before the first message is an error answer; after it,
	// the end line.
	res := getStream(t, t.Context(), tg.base+"/s/failfirst", "")
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 403 || !strings.Contains(string(body), `"permission_denied"`) {
		t.Errorf("failfirst: %d %s, want 403", res.StatusCode, body)
	}
	res = getStream(t, t.Context(), tg.base+"/s/fail", "")
	body, _ = io.ReadAll(res.Body)
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if res.StatusCode != 200 || len(lines) != 3 || !strings.HasPrefix(lines[2], `{"type":"end","status":404,`) {
		t.Errorf("fail: %d %q, want 200, two messages and the end 404", res.StatusCode, lines)
	}
	// Client and bidi streams are the WebSocket's.
	req, _ := http.NewRequestWithContext(t.Context(), "POST", tg.base+"/s/echo", nil)
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(r2.Body)
	r2.Body.Close()
	if r2.StatusCode != 400 || !strings.Contains(string(body), "failed_precondition") || !strings.Contains(string(body), "WebSocket") {
		t.Errorf("bidi over HTTP: %d %s, want 400 failed_precondition", r2.StatusCode, body)
	}
}

// sseEvent is one Server-Sent Event.
type sseEvent struct{ event, id, data string }

// readEvent reads the next event from r.
func readEvent(t testing.TB, r *bufio.Reader) sseEvent {
	t.Helper()
	var ev sseEvent
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading an event: %v (so far %+v)", err, ev)
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			return ev
		}
		k, v, _ := strings.Cut(line, ": ")
		switch k {
		case "event":
			ev.event = v
		case "id":
			ev.id = v
		case "data":
			ev.data += v
		default:
			t.Fatalf("line %q", line)
		}
	}
}

func TestStreamSSE(t *testing.T) {
	tg, b := newStreamGateway(t, settings{})
	res := getStream(t, t.Context(), tg.base+"/s/count?n=3", "text/event-stream")
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != contentSSE || res.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("%d %v", res.StatusCode, res.Header)
	}
	r := bufio.NewReader(res.Body)
	for i := range 3 {
		if ev := readEvent(t, r); ev != (sseEvent{data: `{"i":` + strconv.Itoa(i) + `,"text":"line\nbreak"}`}) {
			t.Errorf("event %d: %+v", i, ev)
		}
	}
	want := sseEvent{event: "end", id: sseEndID, data: `{"status":200,"request_id":"` + res.Header.Get("X-Request-Id") + `","trailer":{"count":["3"]}}`}
	if ev := readEvent(t, r); ev != want {
		t.Errorf("end event %+v, want %+v", ev, want)
	}
	// EventSource's reconnection after the end is told to stop.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", tg.base+"/s/count?n=3", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", sseEndID)
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusNoContent {
		t.Errorf("a reconnection after the end: %d, want 204", r2.StatusCode)
	}
	// The client's leaving cancels the stream.
	ctx, cancel := context.WithCancel(t.Context())
	res = getStream(t, ctx, tg.base+"/s/hold", "text/event-stream")
	if ev := readEvent(t, bufio.NewReader(res.Body)); ev.data != `{"held":true}` {
		t.Errorf("hold's event %+v", ev)
	}
	recv(t, b.held)
	cancel()
	if err := recv(t, b.heldDone); !errors.Is(err, context.Canceled) {
		t.Errorf("the handler's ctx ended with %v, want context.Canceled", err)
	}
}

// liveHeap returns the heap's live bytes after a collection.
func liveHeap() uint64 {
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// slowClientBound is the most messages the flood handler may have sent
// beyond what a slow client read: the mesh's stream window, the message
// the gateway holds, and the kernel's socket buffers between them
// (the client's receive buffer is small). Without flow control the
// handler would send all floodCount at once.
const slowClientBound = 200

// TestStreamSlowClient: a handler that sends as fast as it may and a
// client that reads slowly, over the WebSocket and over SSE: the
// handler is held back to what the client read plus a bound, and the
// process's live heap (the gateway, its node and the service) does not
// grow with what the handler tried to send.
func TestStreamSlowClient(t *testing.T) {
	small := &http.Client{Transport: &http.Transport{DialContext: smallBufferDialer().DialContext}}
	t.Cleanup(small.CloseIdleConnections)
	for _, via := range []string{"websocket", "sse"} {
		t.Run(via, func(t *testing.T) {
			tg, b := newStreamGateway(t, settings{})
			base := liveHeap()
			var next func() int // reads the next message: its i
			var stop func()
			switch via {
			case "websocket":
				c := dialWS(t, tg.ws, &websocket.DialOptions{HTTPClient: small})
				sendFrame(t, c, map[string]any{"type": "req", "id": "f", "method": "GET", "path": "/s/flood"})
				next = func() int {
					f := readStreamFrame(t, c)
					var m struct{ I int }
					if f.Type != frameMsg || json.Unmarshal(f.Body, &m) != nil {
						t.Fatalf("frame %s %d %v", f.Type, f.Status, f.Error)
					}
					return m.I
				}
				stop = func() { c.CloseNow() }
			case "sse":
				ctx, cancel := context.WithCancel(t.Context())
				req, _ := http.NewRequestWithContext(ctx, "GET", tg.base+"/s/flood", nil)
				req.Header.Set("Accept", contentSSE)
				res, err := small.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				r := bufio.NewReader(res.Body)
				next = func() int {
					ev := readEvent(t, r)
					var m struct{ I int }
					if json.Unmarshal([]byte(ev.data), &m) != nil {
						t.Fatalf("event %+v", ev)
					}
					return m.I
				}
				stop = func() { cancel(); res.Body.Close() }
			}
			const reads = 150
			var ahead int64
			var peak uint64
			for i := range reads {
				if got := next(); got != i {
					t.Fatalf("message %d, want %d", got, i)
				}
				ahead = max(ahead, b.sent.Load()-int64(i+1))
				if i%30 == 0 {
					peak = max(peak, liveHeap())
				}
				time.Sleep(2 * time.Millisecond) // the slow client's pace, not synchronisation
			}
			peak = max(peak, liveHeap())
			growth := int64(peak) - int64(base)
			t.Logf("%s: read %d of %d messages of %d KiB; the handler sent at most %d ahead; live heap grew by %.1f MiB at most",
				via, reads, floodCount, floodSize>>10, ahead, float64(growth)/(1<<20))
			if ahead > slowClientBound {
				t.Errorf("the handler sent %d messages ahead of the client, want at most %d", ahead, slowClientBound)
			}
			if growth > 32<<20 {
				t.Errorf("the live heap grew by %d bytes with a slow client, want at most 32 MiB", growth)
			}
			stop()
			if err := recv(t, b.floodEnd); err == nil {
				t.Error("the flood handler sent everything: the client's leaving did not end it")
			}
		})
	}
}

// TestStreamDeadline: a stream has no deadline but the client's hint,
// clamped to the route's max_timeout.
func TestStreamDeadline(t *testing.T) {
	tg, _ := newStreamGateway(t, settings{})
	for _, tc := range []struct {
		hint     string
		min, max int64 // the deadline's bounds, in ms; 0: none
	}{
		{"", 0, 0},
		{"3000", 1, 3000},
		{"60000", 9000, 10000}, // max_timeout 10s
	} {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", tg.base+"/s/meta", nil)
		if tc.hint != "" {
			req.Header.Set(TimeoutHeader, tc.hint)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var line struct{ Body map[string]string }
		err = json.NewDecoder(res.Body).Decode(&line)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		dl, has := line.Body["deadline_ms"]
		ms, _ := strconv.ParseInt(dl, 10, 64)
		if has != (tc.max > 0) || has && (ms < tc.min || ms > tc.max) {
			t.Errorf("hint %q: the handler's deadline %q, want between %dms and %dms", tc.hint, dl, tc.min, tc.max)
		}
	}
}

// TestStreamShutdown: a shutdown past its grace ends the open streams,
// over the WebSocket and over HTTP: their handlers' ctx ends.
func TestStreamShutdown(t *testing.T) {
	tg, b := newStreamGateway(t, settings{})
	c := dialWS(t, tg.ws, nil)
	sendFrame(t, c, map[string]any{"type": "req", "id": "h1", "method": "GET", "path": "/s/hold"})
	recv(t, b.held)
	getStream(t, t.Context(), tg.base+"/s/hold", contentSSE)
	recv(t, b.held)
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // no grace: what is open is ended at once
	shut := make(chan error, 1)
	go func() { shut <- tg.Shutdown(ctx) }()
	wantClose(t, c, closeGoingAway) // the client answers the close handshake
	if err := recv(t, shut); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown = %v, want context.Canceled", err)
	}
	for range 2 {
		if err := recv(t, b.heldDone); !errors.Is(err, context.Canceled) {
			t.Errorf("a handler's ctx ended with %v, want context.Canceled", err)
		}
	}
}

// TestStreamMessageTooLarge: a client's message larger than the mesh's
// frames ends its stream with 413, over HTTP (the first message) and
// over the WebSocket (a msg frame).
func TestStreamMessageTooLarge(t *testing.T) {
	tg, _ := newStreamGateway(t, settings{maxBody: 8 << 20, ws: wsSettings{maxMessage: 8 << 20}})
	pad := strings.Repeat("x", 5<<20)
	req, _ := http.NewRequestWithContext(t.Context(), "POST", tg.base+"/s/count", strings.NewReader(`{"n":1,"pad":"`+pad+`"}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 413 || !strings.Contains(string(body), "resource_exhausted") {
		t.Errorf("HTTP: %d %s, want 413", res.StatusCode, body)
	}
	c := dialWS(t, tg.ws, nil)
	sendFrame(t, c, map[string]any{"type": "req", "id": "c1", "method": "POST", "path": "/s/sum"})
	sendFrame(t, c, map[string]any{"type": "msg", "id": "c1", "body": map[string]any{"v": 1, "pad": pad}})
	if _, end := readStream(t, c, "c1"); end.Status != 413 || end.Error.Code != "resource_exhausted" {
		t.Errorf("WebSocket: %+v, want the end 413", end)
	}
}
