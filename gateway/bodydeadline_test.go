package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestSlowBody: connections that trickle a request body, a byte at a
// time, are answered 408 (or, for a body nobody reads, just closed) and
// closed once the body's bound has passed, on a route, on no route and
// chunked; a client sending its body at once meanwhile is served.
func TestSlowBody(t *testing.T) {
	const bound = 300 * time.Millisecond
	tg := newTestGateway(t, settings{readBodyTimeout: bound})
	addr := strings.TrimPrefix(tg.base, "http://")
	heads := map[string]string{
		"route":    "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n",
		"no route": "POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n",
		"chunked":  "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
	}
	type closed struct {
		name, status string
		held         bool // still open when the guard passed
		after        time.Duration
	}
	done := make(chan closed, len(heads))
	for name, head := range heads {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		go trickle(c, name == "chunked")
		go func() {
			c.SetReadDeadline(time.Now().Add(5 * time.Second)) // a guard: the bound is far shorter
			br := bufio.NewReader(c)
			status, _ := br.ReadString('\n')
			_, err := io.Copy(io.Discard, br) // EOF or a reset: closed
			held := errors.Is(err, os.ErrDeadlineExceeded)
			done <- closed{name, strings.TrimSpace(status), held, time.Since(start)}
		}()
	}
	res, err := http.Post(tg.base+"/echo", "application/json", bytes.NewReader([]byte(`{"n":1}`)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("a client sending its body at once: %d %s", res.StatusCode, body)
	}
	want := map[string]string{"route": "HTTP/1.1 408 Request Timeout", "no route": "HTTP/1.1 404 Not Found", "chunked": "HTTP/1.1 408 Request Timeout"}
	for range heads {
		c := recv(t, done)
		if c.status != want[c.name] || c.held {
			t.Errorf("%s: answered %q, closed after %v; want %q and closed within the %v bound", c.name, c.status, c.after.Round(time.Millisecond), want[c.name], bound)
		}
	}
}

// trickle sends a body a byte every 20ms until the connection fails.
func trickle(c net.Conn, chunked bool) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	b := []byte("1")
	if chunked {
		b = []byte("1\r\n1\r\n")
	}
	for range tick.C {
		if _, err := c.Write(b); err != nil {
			return
		}
	}
}

// TestBodyBoundEndsWithTheBody: the body's bound covers reading the body
// only: a call that outlasts it after the body has arrived is answered
// as any other (here the route's 504), its request not taken for gone.
func TestBodyBoundEndsWithTheBody(t *testing.T) {
	tg := newTestGateway(t, settings{readBodyTimeout: 100 * time.Millisecond})
	for name, body := range map[string]io.Reader{
		"with a length": strings.NewReader(`{}`),
		"chunked":       io.MultiReader(strings.NewReader(`{}`)), // no length: sent chunked, read to its end
	} {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", tg.base+"/slow", body)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(TimeoutHeader, "600")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: a call outlasting the body's bound: %v", name, err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusGatewayTimeout {
			t.Errorf("%s: a call outlasting the body's bound: %d, want 504", name, res.StatusCode)
		}
	}
}

// deadlineWriter records the read deadline set through it.
type deadlineWriter struct {
	http.ResponseWriter
	set time.Time
}

func (w *deadlineWriter) SetReadDeadline(t time.Time) error { w.set = t; return nil }

// wrappedWriter is a middleware's writer: it hides the methods of the
// writer it wraps but unwraps to it.
type wrappedWriter struct{ http.ResponseWriter }

func (w wrappedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestBoundBodyWriters: the body's bound is set through net/http's own
// writer and through a middleware's writer that unwraps to it; a writer
// that can do neither is left alone; a request without a body sets none.
func TestBoundBodyWriters(t *testing.T) {
	g := &Gateway{}
	const d = time.Minute
	withBody := func() *http.Request {
		r, _ := http.NewRequest("POST", "/echo", strings.NewReader("{}"))
		return r
	}
	before := time.Now()
	direct := &deadlineWriter{}
	g.boundBody(direct, withBody(), d)
	if direct.set.Before(before.Add(d)) {
		t.Errorf("direct: deadline %v, want at least %v", direct.set, before.Add(d))
	}
	inner := &deadlineWriter{}
	g.boundBody(wrappedWriter{inner}, withBody(), d)
	if inner.set.Before(before.Add(d)) {
		t.Errorf("wrapped: deadline %v, want at least %v", inner.set, before.Add(d))
	}
	g.boundBody(wrappedWriter{}, withBody(), d) // nothing to set it on: no panic
	none := &deadlineWriter{}
	r, _ := http.NewRequest("GET", "/echo", nil)
	g.boundBody(none, r, d)
	if !none.set.IsZero() {
		t.Errorf("no body: deadline %v set", none.set)
	}
}
