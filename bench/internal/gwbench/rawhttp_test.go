package gwbench

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRawHTTPCaller: the raw client's echo calls pass against net/http's
// server answering with a Content-Length, chunked, and Connection:
// close (each needs its own reading of the body, and the last a new
// connection); the request carries the token, type and body; a kept
// connection that ends while idle costs no error; a 401 is an error
// starting with its status, as the JWT passes' check expects.
func TestRawHTTPCaller(t *testing.T) {
	var conns atomic.Int64
	idle := make(chan net.Conn, 100) // the server's connections as they go idle
	srv := &http.Server{
		ConnState: func(c net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				conns.Add(1)
			case http.StateIdle:
				idle <- c
			}
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if r.Method != http.MethodPost || r.URL.Path != "/echo" || r.Header.Get("Content-Type") != "application/json" {
				http.Error(w, "bad request line or type", http.StatusBadRequest)
				return
			}
			if r.Header.Get("Authorization") != "Bearer tok" {
				http.Error(w, `{"error":"no token"}`, http.StatusUnauthorized)
				return
			}
			switch r.URL.Query().Get("mode") {
			case "chunked":
				w.Write(body[:3])
				w.(http.Flusher).Flush() // the rest goes in a second chunk
				w.Write(body[3:])
			case "close":
				w.Header().Set("Connection", "close")
				w.Write(body)
			default:
				w.Write(body)
			}
		}),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	base := "http://" + ln.Addr().String() + "/echo"
	for _, mode := range []string{"length", "chunked", "close"} {
		t.Run(mode, func(t *testing.T) {
			c, err := newRawHTTPCaller(base+"?mode="+mode, "tok")
			if err != nil {
				t.Fatal(err)
			}
			defer c.close()
			before := conns.Load()
			for n := range int64(3) {
				if err := c.call(t.Context(), n<<32|n); err != nil {
					t.Fatalf("call %d: %v", n, err)
				}
			}
			want := int64(1)
			if mode == "close" {
				want = 3
			}
			if got := conns.Load() - before; got != want {
				t.Errorf("3 calls took %d connections, want %d", got, want)
			}
		})
	}
	t.Run("closed while idle", func(t *testing.T) {
		c, err := newRawHTTPCaller(base, "tok")
		if err != nil {
			t.Fatal(err)
		}
		defer c.close()
		for len(idle) > 0 { // the other subtests' connections
			<-idle
		}
		if err := c.call(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		select {
		case sc := <-idle:
			sc.Close() // the server ends the kept connection, as Node.js does after 5 s
		case <-time.After(10 * time.Second):
			t.Fatal("the server's connection never went idle")
		}
		if err := c.call(t.Context(), 2); err != nil {
			t.Errorf("a call on a kept connection closed while idle: %v (want it made again on a new one)", err)
		}
	})
	c, err := newRawHTTPCaller(base, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if err := c.call(t.Context(), 1); err == nil || !strings.HasPrefix(err.Error(), "401 ") {
		t.Errorf("a call without the token: %v, want a 401 error", err)
	}
	if _, err := newRawHTTPCaller("https://x/echo", ""); err == nil {
		t.Error("an https URL was accepted")
	}
}
