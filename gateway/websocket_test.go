package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/wizardmesh/wizard/gateway/auth"
)

func strp(s string) *string { return &s }

// wantClose reads until the connection ends and checks its close code.
func wantClose(t *testing.T, c *websocket.Conn, code websocket.StatusCode) {
	t.Helper()
	for {
		_, err := readFrame(t, c)
		if err == nil {
			continue
		}
		if got := websocket.CloseStatus(err); got != code {
			t.Fatalf("connection ended with %v (status %d), want close %d", err, got, code)
		}
		return
	}
}

func TestWebSocketManyInFlight(t *testing.T) {
	tg := newTestGateway(t, settings{})
	c := dialWS(t, tg.ws, nil)
	const n = 20
	for i := range n {
		sendFrame(t, c, map[string]any{"type": "req", "id": fmt.Sprint("e", i), "method": "POST", "path": "/echo", "body": map[string]any{"i": i}})
	}
	seen := map[string]bool{}
	for range n {
		f := mustReadFrame(t, c)
		if f.Status != 200 || f.ID == nil || seen[*f.ID] {
			t.Fatalf("reply %+v", f)
		}
		seen[*f.ID] = true
		if !strings.Contains(string(f.Body), `"i":`+strings.TrimPrefix(*f.ID, "e")+`,`) && !strings.Contains(string(f.Body), `"i":`+strings.TrimPrefix(*f.ID, "e")+`}`) {
			t.Errorf("reply %s has the body %s of another request", *f.ID, f.Body)
		}
	}
	sendRaw(t, c, []byte(`{}`))
	if f := mustReadFrame(t, c); f.Type != "" || f.ID != nil {
		t.Errorf("ping answered %+v, want {}", f)
	}
}

func TestWebSocketCancelReachesHandler(t *testing.T) {
	tg := newTestGateway(t, settings{})
	c := dialWS(t, tg.ws, nil)
	sendFrame(t, c, map[string]any{"type": "req", "id": "s1", "method": "GET", "path": "/slow", "timeout_ms": 60000})
	recv(t, tg.b.slowStarted)
	sendFrame(t, c, map[string]any{"type": "cancel", "id": "s1"})
	if err := recv(t, tg.b.slowDone); !errors.Is(err, context.Canceled) {
		t.Errorf("the handler's ctx ended with %v, want context.Canceled", err)
	}
	f := mustReadFrame(t, c)
	if f.ID == nil || *f.ID != "s1" || f.Status != StatusClientClosed || f.Error == nil || f.Error.Code != "canceled" {
		t.Errorf("reply %+v, want s1 499 canceled", f)
	}
}

func TestHTTPClientGoneReachesHandler(t *testing.T) {
	tg := newTestGateway(t, settings{})
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "GET", tg.base+"/slow", nil)
	req.Header.Set(TimeoutHeader, "60000")
	done := make(chan error, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	recv(t, tg.b.slowStarted)
	cancel()
	if err := recv(t, tg.b.slowDone); !errors.Is(err, context.Canceled) {
		t.Errorf("the handler's ctx ended with %v, want context.Canceled", err)
	}
	recv(t, done)
	until(t, "the access log's 499", func() bool {
		return len(tg.logs.find("gateway: request", "path", "/slow", "status", int64(StatusClientClosed))) == 1
	})
}

func TestWebSocketInFlightLimit(t *testing.T) {
	tg := newTestGateway(t, settings{ws: wsSettings{maxInflight: 2}})
	c := dialWS(t, tg.ws, nil)
	for _, id := range []string{"s1", "s2"} {
		sendFrame(t, c, map[string]any{"type": "req", "id": id, "method": "GET", "path": "/slow", "timeout_ms": 60000})
		recv(t, tg.b.slowStarted)
	}
	sendFrame(t, c, map[string]any{"type": "req", "id": "s1", "method": "GET", "path": "/echo"})
	if f := mustReadFrame(t, c); f.Status != 400 || *f.ID != "s1" {
		t.Errorf("an id in flight again: %+v, want 400", f)
	}
	sendFrame(t, c, map[string]any{"type": "req", "id": "s3", "method": "GET", "path": "/echo"})
	if f := mustReadFrame(t, c); f.Status != 429 || *f.ID != "s3" || f.Error.Code != "resource_exhausted" {
		t.Errorf("over the limit: %+v, want 429", f)
	}
	sendFrame(t, c, map[string]any{"type": "cancel", "id": "s1"})
	if f := mustReadFrame(t, c); *f.ID != "s1" || f.Status != StatusClientClosed {
		t.Errorf("canceled: %+v", f)
	}
	sendFrame(t, c, map[string]any{"type": "req", "id": "s3", "method": "GET", "path": "/echo"})
	if f := mustReadFrame(t, c); f.Status != 200 || *f.ID != "s3" {
		t.Errorf("under the limit again: %+v, want 200", f)
	}
}

func TestWebSocketGarbage(t *testing.T) {
	tg := newTestGateway(t, settings{})
	c := dialWS(t, tg.ws, nil)
	for i, tc := range []struct {
		frame string
		id    *string
		msg   string
	}{
		{`not json`, nil, "not valid JSON"},
		{`{"type":"req","id":"x1"}`, strp("x1"), "method"},
		{`{"type":"req","id":"x2","method":"GET","path":"/echo","subject":"root"}`, strp("x2"), "unknown field"},
	} {
		sendRaw(t, c, []byte(tc.frame))
		if i == 2 {
			f, err := readFrame(t, c)
			if err == nil && (f.Status != 400 || f.ID == nil || *f.ID != *tc.id) {
				t.Errorf("%s: %+v", tc.frame, f)
			}
			wantClose(t, c, closePolicy)
			return
		}
		f := mustReadFrame(t, c)
		if f.Status != 400 || f.Error == nil || f.Error.Code != "invalid_argument" || !strings.Contains(f.Error.Message, tc.msg) {
			t.Errorf("%s: %+v", tc.frame, f)
		}
		if (f.ID == nil) != (tc.id == nil) || f.ID != nil && *f.ID != *tc.id {
			t.Errorf("%s: id %v, want %v", tc.frame, f.ID, tc.id)
		}
	}
}

func TestWebSocketFrameTooBig(t *testing.T) {
	tg := newTestGateway(t, settings{ws: wsSettings{maxMessage: 1024}})
	c := dialWS(t, tg.ws, nil)
	sendFrame(t, c, map[string]any{"type": "req", "id": "b", "method": "POST", "path": "/echo", "body": map[string]any{"x": strings.Repeat("x", 2048)}})
	wantClose(t, c, closeTooBig)
}

func TestWebSocketSlowConsumer(t *testing.T) {
	tg := newTestGateway(t, settings{ws: wsSettings{sendQueue: 2, maxInflight: 1000}})
	// A small receive buffer: the gateway's writes block sooner.
	client := &http.Client{Transport: &http.Transport{DialContext: smallBufferDialer().DialContext}}
	c := dialWS(t, tg.ws, &websocket.DialOptions{HTTPClient: client})
	c.SetReadLimit(-1)
	slow := func() bool { return len(tg.logs.find("gateway: websocket slow consumer")) > 0 }
	// Replies of 128 KiB each, never read until the gateway gives up: the
	// socket's buffers fill, then the send queue.
	for i := 0; i < 2000 && !slow(); i++ {
		sendFrame(t, c, map[string]any{"type": "req", "id": fmt.Sprint(i), "method": "GET", "path": "/big?n=131072"})
	}
	until(t, "the slow consumer's close", slow)
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	for {
		_, _, err := c.Read(ctx)
		if err == nil {
			continue
		}
		// The close frame follows the replies written before it.
		if got := websocket.CloseStatus(err); got != closeSlowConsumer {
			t.Fatalf("connection ended with %v (status %d), want close 4008", err, got)
		}
		return
	}
}

func TestWebSocketOrigin(t *testing.T) {
	tg := newTestGateway(t, settings{ws: wsSettings{origins: []string{"https://app.example.com"}}})
	for _, tc := range []struct {
		origin string
		ok     bool
	}{{"https://app.example.com", true}, {"https://evil.example.com", false}, {"", true}} {
		h := http.Header{}
		if tc.origin != "" {
			h.Set("Origin", tc.origin)
		}
		c, res, err := websocket.Dial(t.Context(), tg.ws, &websocket.DialOptions{HTTPHeader: h})
		if tc.ok {
			if err != nil {
				t.Errorf("origin %q: %v", tc.origin, err)
				continue
			}
			c.CloseNow()
			continue
		}
		if err == nil {
			c.CloseNow()
			t.Errorf("origin %q: upgraded, want 403", tc.origin)
		} else if res == nil || res.StatusCode != http.StatusForbidden {
			t.Errorf("origin %q: %v, want 403", tc.origin, err)
		}
	}
	// Without an allow-list, only the same origin.
	tg2 := newTestGateway(t, settings{})
	_, res, err := websocket.Dial(t.Context(), tg2.ws, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://evil.example.com"}}})
	if err == nil || res == nil || res.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin without an allow-list: %v, want 403", err)
	}
}

func TestWebSocketAuth(t *testing.T) {
	tg := newTestGateway(t, settings{})
	private := map[string]any{"type": "req", "id": "p", "method": "GET", "path": "/private"}
	t.Run("header at the upgrade", func(t *testing.T) {
		c := dialWS(t, tg.ws, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer good"}}})
		sendFrame(t, c, private)
		if f := mustReadFrame(t, c); f.Status != 200 {
			t.Errorf("%+v", f)
		}
	})
	t.Run("query at the upgrade", func(t *testing.T) {
		c := dialWS(t, tg.ws+"?access_token=good", nil)
		sendFrame(t, c, private)
		if f := mustReadFrame(t, c); f.Status != 200 {
			t.Errorf("%+v", f)
		}
	})
	t.Run("invalid at the upgrade", func(t *testing.T) {
		_, res, err := websocket.Dial(t.Context(), tg.ws+"?access_token=bad", nil)
		if err == nil || res == nil || res.StatusCode != 401 || !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%v %v, want 401 with WWW-Authenticate", err, res)
		}
	})
	t.Run("frame", func(t *testing.T) {
		c := dialWS(t, tg.ws, nil)
		sendFrame(t, c, private)
		if f := mustReadFrame(t, c); f.Status != 401 {
			t.Errorf("before auth: %+v", f)
		}
		sendFrame(t, c, map[string]any{"type": "auth", "id": "a", "token": "good"})
		if f := mustReadFrame(t, c); !*f.OK || f.Subject != "u1" {
			t.Errorf("auth: %+v", f)
		}
		sendFrame(t, c, private)
		if f := mustReadFrame(t, c); f.Status != 200 {
			t.Errorf("after auth: %+v", f)
		}
	})
	t.Run("invalid frame", func(t *testing.T) {
		c := dialWS(t, tg.ws, nil)
		sendFrame(t, c, map[string]any{"type": "auth", "id": "a", "token": "bad"})
		if f := mustReadFrame(t, c); *f.OK || f.Status != 401 {
			t.Errorf("auth: %+v", f)
		}
		wantClose(t, c, closeInvalidToken)
	})
}

func TestWebSocketTokenExpiry(t *testing.T) {
	tg := newTestGateway(t, settings{})
	tg.now().auth = authVerifier{testVerifier{"soon": {Subject: "s", ExpiresAt: time.Now().Add(200 * time.Millisecond)}}}
	c := dialWS(t, tg.ws, nil)
	sendFrame(t, c, map[string]any{"type": "auth", "id": "a", "token": "soon"})
	if f := mustReadFrame(t, c); !*f.OK || f.Subject != "s" {
		t.Fatalf("auth: %+v", f)
	}
	wantClose(t, c, closeTokenExpired)
	_ = auth.ErrExpired
}

// TestWebSocketIdle: a client that sends nothing and answers no ping is
// closed after the idle timeout; one whose library answers pings stays.
func TestWebSocketIdle(t *testing.T) {
	tg := newTestGateway(t, settings{ws: wsSettings{idle: 100 * time.Millisecond}})
	c := dialWS(t, tg.ws, nil)
	wantClose(t, c, closeGoingAway)

	tg2 := newTestGateway(t, settings{ws: wsSettings{idle: 500 * time.Millisecond, ping: 50 * time.Millisecond}})
	c2 := dialWS(t, tg2.ws, nil)
	go func() { // a reader answers the pings
		for {
			if _, _, err := c2.Read(context.Background()); err != nil {
				return
			}
		}
	}()
	// Well past the idle timeout, with pings answered, the connection
	// still serves.
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if err := c2.Ping(t.Context()); err != nil {
			t.Fatalf("the connection closed though its pings were answered: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // pacing, not synchronisation
	}
}

// TestWebSocketRateLimitedCloses: a rate-limited frame is answered 429
// with retry_after_ms; after ws.maxLimited of them in a row the
// connection is closed with 4029.
func TestWebSocketRateLimitedCloses(t *testing.T) {
	tg := newTestGateway(t, settings{perIP: rateSpec{rate: 0.001, burst: 2}, ws: wsSettings{maxLimited: 3}})
	c := dialWS(t, tg.ws, nil) // the upgrade takes a token
	sendFrame(t, c, map[string]any{"type": "req", "id": "ok", "method": "GET", "path": "/echo"})
	if f := mustReadFrame(t, c); f.Status != 200 {
		t.Fatalf("within the burst: %+v", f)
	}
	for i := range 3 {
		sendFrame(t, c, map[string]any{"type": "req", "id": fmt.Sprint("r", i), "method": "GET", "path": "/echo"})
		f := mustReadFrame(t, c)
		if f.Status != 429 || f.Error == nil || f.Error.Code != "resource_exhausted" {
			t.Fatalf("frame %d past the burst: %+v, want 429", i, f)
		}
		// 1/0.001 s = 1000 s for the next token.
		if f.RetryAfterMs < 900_000 || f.RetryAfterMs > 1_000_000 {
			t.Errorf("frame %d: retry_after_ms %d, want about 1,000,000", i, f.RetryAfterMs)
		}
	}
	wantClose(t, c, closeRateLimited)
}

// TestWebSocketRateLimitedResets: a frame that passes the limits resets
// the count of 429s in a row; the in-flight limit's 429s do not count.
func TestWebSocketRateLimitedResets(t *testing.T) {
	tg := newTestGateway(t, settings{ws: wsSettings{maxLimited: 2, maxInflight: 1}})
	c := dialWS(t, tg.ws, nil)
	sendFrame(t, c, map[string]any{"type": "req", "id": "s", "method": "GET", "path": "/slow", "timeout_ms": 60000})
	recv(t, tg.b.slowStarted)
	for i := range 5 {
		sendFrame(t, c, map[string]any{"type": "req", "id": fmt.Sprint("r", i), "method": "GET", "path": "/echo"})
		if f := mustReadFrame(t, c); f.Status != 429 || f.RetryAfterMs != 1000 {
			t.Fatalf("over the in-flight limit: %+v, want 429 with retry_after_ms 1000", f)
		}
	}
	sendFrame(t, c, map[string]any{"type": "cancel", "id": "s"})
	mustReadFrame(t, c)
	sendFrame(t, c, map[string]any{"type": "req", "id": "e", "method": "GET", "path": "/echo"})
	if f := mustReadFrame(t, c); f.Status != 200 {
		t.Fatalf("after the in-flight 429s: %+v, want 200 (the connection stays)", f)
	}
}

// TestWebSocketRetryAfter503: a 503 frame carries retry_after_ms, as the
// HTTP answer carries Retry-After.
func TestWebSocketRetryAfter503(t *testing.T) {
	tg := newTestGateway(t, settings{})
	c := dialWS(t, tg.ws, nil)
	sendFrame(t, c, map[string]any{"type": "req", "id": "a", "method": "GET", "path": "/absent"})
	if f := mustReadFrame(t, c); f.Status != 503 || f.RetryAfterMs != 1000 {
		t.Errorf("unserved: %+v, want 503 with retry_after_ms 1000", f)
	}
	sendFrame(t, c, map[string]any{"type": "req", "id": "e", "method": "GET", "path": "/echo"})
	if f := mustReadFrame(t, c); f.Status != 200 || f.RetryAfterMs != 0 {
		t.Errorf("a 200: %+v, want no retry_after_ms", f)
	}
}

// TestIDFreeWithItsReply: a client that sends the next request with the
// id of the one just answered is served. The reply's own goroutine writes
// it; before the id was freed first, the next request could meet it
// still in flight (400).
func TestIDFreeWithItsReply(t *testing.T) {
	tg := newTestGateway(t, settings{})
	c := dialWS(t, tg.ws, nil)
	for i := range 200 {
		sendFrame(t, c, map[string]any{"type": "req", "id": "same", "method": "POST", "path": "/echo", "body": map[string]any{"n": i}})
		if f := mustReadFrame(t, c); f.Status != 200 {
			t.Fatalf("request %d: %+v %+v", i, f, f.Error)
		}
	}
}
