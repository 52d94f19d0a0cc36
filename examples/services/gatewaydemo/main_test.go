package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"
	"github.com/wizardmesh/wizard/runtime"
)

// TestDemo runs the demo on a free port and does what it prints: each
// curl line with net/http, and the wscat line with a Go WebSocket
// client, checking the answers, so that the lines docs/gateway.md copies stay
// true.
func TestDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	addrs := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-listen", "127.0.0.1:0"}, &out, io.Discard, func(a string) { addrs <- a })
	}()
	select {
	case <-addrs:
	case err := <-done:
		t.Fatalf("the demo ended before serving: %v\n%s", err, out.String())
	}
	printed := out.String() // complete: run prints before it calls serving
	var curls []string
	var wscat string
	for line := range strings.Lines(printed) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "curl "):
			curls = append(curls, line)
		case strings.HasPrefix(line, "npx -y wscat "):
			wscat = line
		}
	}
	if len(curls) != 2 || wscat == "" {
		t.Fatalf("the demo printed %d curl lines and wscat line %q, want 2 and 1:\n%s", len(curls), wscat, printed)
	}
	wants := []string{
		`{"sum":6.5}`,
		`{"user":{"id":"ada","name":"Ada Lovelace","points":[3,4.5],"status":"active"},"totalPoints":7.5}`,
	}
	for i, line := range curls {
		t.Run(fmt.Sprint("curl ", i+1), func(t *testing.T) {
			t.Log(line)
			status, body := doCurl(t, ctx, shellWords(t, line))
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			if d := jsonDiff(t, wants[i], body); d != "" {
				t.Errorf("answer (-want +got):\n%s", d)
			}
		})
	}
	t.Run("wscat", func(t *testing.T) {
		t.Log(wscat)
		w := shellWords(t, wscat)
		url, msg := flagValue(t, w, "-c"), flagValue(t, w, "-x")
		c, _, err := websocket.Dial(ctx, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var f map[string]any
		json.Unmarshal(b, &f)
		delete(f, "request_id") // random
		got, _ := json.Marshal(f)
		if d := jsonDiff(t, `{"type":"res","id":"1","status":200,"body":{"sum":3}}`, string(got)); d != "" {
			t.Errorf("reply %s (-want +got):\n%s", b, d)
		}
		c.Close(websocket.StatusNormalClosure, "")
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("the demo's shutdown: %v", err)
	}
}

// doCurl does what the curl command line w asks (-s, -X, -H, -d and a
// URL, all the demo prints).
func doCurl(t *testing.T, ctx context.Context, w []string) (int, string) {
	t.Helper()
	method, url, body := "GET", "", ""
	header := http.Header{}
	for i := 1; i < len(w); i++ {
		switch w[i] {
		case "-s":
		case "-X":
			i++
			method = w[i]
		case "-H":
			i++
			k, v, _ := strings.Cut(w[i], ":")
			header.Add(k, strings.TrimSpace(v))
		case "-d":
			i++
			body = w[i]
			if method == "GET" {
				method = "POST"
			}
		default:
			if strings.HasPrefix(w[i], "-") || url != "" {
				t.Fatalf("curl: %q is not handled by this test", w[i])
			}
			url = w[i]
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

// shellWords splits a command line as a POSIX shell does, for the
// quoting the demo prints: words, and 'single-quoted' strings.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	in, quoted := false, false
	for _, r := range line {
		switch {
		case r == '\'':
			quoted, in = !quoted, true
		case r == ' ' && !quoted:
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quote in %q", line)
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

func flagValue(t *testing.T, w []string, name string) string {
	t.Helper()
	for i := range len(w) - 1 {
		if w[i] == name {
			return w[i+1]
		}
	}
	t.Fatalf("no %s in %q", name, w)
	return ""
}

// jsonDiff compares two JSON texts as values (protojson's spacing is not
// stable, on purpose).
func jsonDiff(t *testing.T, want, got string) string {
	t.Helper()
	var w, g any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %s: %v", want, err)
	}
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		return "not JSON: " + got
	}
	return cmp.Diff(w, g)
}

// TestDemoServesWhenTheMeshIsUp holds the users node's dials to math
// back for a while: the demo may serve only once the users node sees
// math (GetUser calls it), so the first GET /api/users/ada it answers is
// a 200, not the 503 of a peer known but not connected yet. (Before the
// fix, the demo waited only for the gateway's node and served at once.)
// The hold's length only bounds how long a fixed demo waits; a demo that
// does not wait serves within it and fails.
func TestDemoServesWhenTheMeshIsUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	hold := make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	wrapTransport = func(role string, tr runtime.Transport) runtime.Transport {
		if role != "users" {
			return tr
		}
		return heldDial{tr, hold}
	}
	t.Cleanup(func() { wrapTransport = nil })
	timer := time.AfterFunc(time.Second, release)
	defer timer.Stop()
	var out bytes.Buffer
	addrs := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-listen", "127.0.0.1:0"}, &out, io.Discard, func(a string) { addrs <- a })
	}()
	var addr string
	select {
	case addr = <-addrs:
	case err := <-done:
		t.Fatalf("the demo ended before serving: %v\n%s", err, out.String())
	}
	status, body := doCurl(t, ctx, []string{"curl", "-s", "http://" + addr + "/api/users/ada"})
	release()
	if status != 200 {
		t.Errorf("the first GET /api/users/ada: status %d: %s", status, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("the demo's shutdown: %v", err)
	}
}

// heldDial is a transport whose dials wait until hold is closed.
type heldDial struct {
	runtime.Transport
	hold <-chan struct{}
}

func (h heldDial) Dial(ctx context.Context, addr string) (runtime.Conn, error) {
	select {
	case <-h.hold:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.Transport.Dial(ctx, addr)
}
