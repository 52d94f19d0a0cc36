package gateway

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/golang-jwt/jwt/v5"

	"github.com/wizardmesh/wizard/gateway/config"
	"github.com/wizardmesh/wizard/internal/testkit/need"
	"github.com/wizardmesh/wizard/runtime"
)

// browserPage is the page a browser runs in TestBrowser.
//
//go:embed testdata/browser.html
var browserPage []byte

// chromium finds a Chromium or Chrome on PATH.
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// newBrowser starts a headless Chromium for t, closed at its end: the
// flags a headless machine without a network needs (no sandbox as root,
// no GPU, none of the browser's own connections), and a fresh profile.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path := chromium()
	if path == "" {
		need.Skipf(t, "no Chromium on PATH (chromium, chromium-browser or google-chrome): apt-get install -y chromium")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()),
	}
	// Not t.Context(): it ends before the cleanups, and the browser is
	// closed by them, in order.
	base, stop := context.WithTimeout(context.Background(), 2*guard)
	actx, cancelAlloc := chromedp.NewExecAllocator(base, opts...)
	ctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc() // waits for the browser's process to end
		stop()
	})
	if err := chromedp.Do(ctx); err != nil {
		need.Skipf(t, "Chromium at %s does not start: %v", path, err)
	}
	return ctx
}

// pageServer serves the test page on its own 127.0.0.1 origin (another
// port: another origin, to the browser).
func pageServer(t *testing.T, ln net.Listener) {
	t.Helper()
	srv := &http.Server{Handler: http.HandlerFunc(servePage)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

func servePage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(browserPage)
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// browserYAML is the gateway of TestBrowser: JWT auth (HS256), CORS for
// one origin, WebSocket upgrades from the gateway's own origin.
const browserYAML = `
defaults: {timeout: 2s, max_timeout: 10s, auth: required}
auth:
  jwt: {keys: ["$DIR/hs.key"], algorithms: [HS256], issuer: test-issuer, audience: [browser]}
cors: {origins: ["$ALLOWED"]}
websocket: {path: /ws, origins: ["$SELF"]}
routes:
  - name: t
    method: POST
    path: /api/t/{action}
    pattern: "role:t,cmd:{action}"
    vars: {action: {allow: [echo, meta, slow]}}
  - name: s
    method: GET
    path: /api/s/{action}
    pattern: "role:s,cmd:{action}"
    vars: {action: {allow: [count, hold, flood]}}
    auth: none
    stream: server
  - name: matches
    method: GET
    path: /api/matches
    pattern: "role:match,cmd:list"
    events: ["role:match,event:found,user:{auth.subject}"]
`

// TestBrowser: a real browser (headless Chromium) loads a page from the
// gateway's origin that opens a WebSocket, authenticates with an auth
// frame (a JWT the gateway verifies), sends several requests at once to
// a mesh over TCP, cancels the slow one once its handler runs; and, from
// two other origins, makes a cross-origin fetch that CORS allows for the
// listed origin and refuses for the other. The page also receives server
// streams over the WebSocket and over EventSource and cancels one of
// each (the handlers' ctx ends), and a slow page does not grow the
// gateway's memory: the service is held back instead.
func TestBrowser(t *testing.T) {
	ctx := newBrowser(t)
	gwLn, allowedLn, refusedLn := listen(t), listen(t), listen(t)
	self, allowed, refused := "http://"+gwLn.Addr().String(), "http://"+allowedLn.Addr().String(), "http://"+refusedLn.Addr().String()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hs.key"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := strings.NewReplacer("$DIR", dir, "$ALLOWED", allowed, "$SELF", self).Replace(browserYAML)
	cfg, err := config.Parse("browser.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	b := newBackend(t)
	sb := newStreamBackend(t)
	node := gatewayNode(t, b, sb.svc.Addr())
	waitCtx, cancelWait := context.WithTimeout(t.Context(), guard)
	defer cancelWait()
	if err := node.WaitFor(waitCtx, "role:s,cmd:count"); err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	g, err := New(node, cfg, WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	// The gateway's origin serves the page beside the gateway: the test's
	// handler, not the gateway's.
	mux := http.NewServeMux()
	mux.HandleFunc("GET /browser.html", servePage)
	mux.Handle("/", g)
	srv := &http.Server{Handler: mux}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(gwLn) }()
	t.Cleanup(func() {
		g.Close()
		srv.Close()
		if err := recv(t, served); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
	})
	pageServer(t, allowedLn)
	pageServer(t, refusedLn)
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "browser-user", "iss": "test-issuer", "aud": "browser", "exp": time.Now().Add(time.Hour).Unix(), "scope": "read",
	}).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("websocket", func(t *testing.T) {
		ws := "ws://" + gwLn.Addr().String() + "/ws"
		page := self + "/browser.html?" + url.Values{"mode": {"ws"}, "ws": {ws}, "token": {token}}.Encode()
		ready := navigatePoll(t, ctx, page, "window.ready")
		replies := decodeReplies(t, ready)
		if a := replies["a1"]; a.OK == nil || !*a.OK || a.Subject != "browser-user" {
			t.Fatalf("auth frame answered %+v, want ok for browser-user", a)
		}
		for i, id := range []string{"e1", "e2", "e3"} {
			r := replies[id]
			var body map[string]any
			json.Unmarshal(r.Body, &body)
			if r.Status != 200 || body["n"] != float64(i+1) {
				t.Errorf("%s: %d %s, want 200 with n=%d", id, r.Status, r.Body, i+1)
			}
		}
		if body := string(replies["e2"].Body); !strings.Contains(body, `"q":"2"`) {
			t.Errorf("e2's query is not in the message: %s", body)
		}
		if body := string(replies["e3"].Body); !strings.Contains(body, `"s":"é"`) {
			t.Errorf("e3's UTF-8 did not survive: %s", body)
		}
		var meta map[string]any
		json.Unmarshal(replies["meta"].Body, &meta)
		if meta["auth-subject"] != "browser-user" || meta["auth-scopes"] != "read" {
			t.Errorf("meta: the handler saw %v, want the token's subject and scopes", meta)
		}
		if r := replies["nope"]; r.Status != 404 || r.Error == nil || r.Error.Code != "not_found" {
			t.Errorf("nope: %+v, want 404 not_found", r)
		}
		if _, ok := replies["slow"]; ok {
			t.Fatalf("the slow request answered before its cancel: %+v", replies["slow"])
		}
		recv(t, b.slowStarted)
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void]("window.cancelSlow()")); err != nil {
			t.Fatal(err)
		}
		results := navigatePoll(t, ctx, "", "window.results")
		if err := recv(t, b.slowDone); !errors.Is(err, context.Canceled) {
			t.Errorf("the slow handler's ctx ended with %v, want context.Canceled", err)
		}
		if r := decodeReplies(t, results)["slow"]; r.Status != StatusClientClosed || r.Error == nil || r.Error.Code != "canceled" {
			t.Errorf("slow: %+v, want 499 canceled", r)
		}
	})

	t.Run("streams", func(t *testing.T) { browserStreams(t, ctx, self, sb) })
	t.Run("events", func(t *testing.T) { browserEvents(t, ctx, self, node) })
	t.Run("slow page", func(t *testing.T) { browserSlowPage(t, ctx, self, sb) })

	for _, c := range []struct {
		name, origin string
		allowed      bool
	}{{"cors allowed", allowed, true}, {"cors refused", refused, false}} {
		t.Run(c.name, func(t *testing.T) {
			page := c.origin + "/browser.html?" + url.Values{"mode": {"cors"}, "url": {self + "/api/t/echo"}, "token": {token}}.Encode()
			results := navigatePoll(t, ctx, page, "window.results")
			var got struct {
				Status    int            `json:"status"`
				RequestID string         `json:"request_id"`
				Body      map[string]any `json:"body"`
				Refused   string         `json:"refused"`
			}
			if err := json.Unmarshal([]byte(results), &got); err != nil {
				t.Fatalf("results %s: %v", results, err)
			}
			// The preflight reached the gateway either way: a refusal is
			// the gateway's (403), not a lost connection.
			want := http.StatusNoContent
			if !c.allowed {
				want = http.StatusForbidden
			}
			// The access log's record follows the answer.
			until(t, fmt.Sprintf("a preflight answered %d in the access log", want), func() bool {
				return len(logs.find("gateway: request", "method", "OPTIONS", "status", int64(want))) > 0
			})
			if c.allowed {
				if got.Status != 200 || got.Body["n"] != float64(7) || got.RequestID != "from-the-browser" {
					t.Errorf("allowed origin: %s, want 200 with n=7 and the X-Request-Id exposed", results)
				}
				return
			}
			if got.Refused == "" || !strings.HasPrefix(got.Refused, "TypeError") {
				t.Errorf("unlisted origin: %s, want the fetch refused (TypeError)", results)
			}
		})
	}
}

func decodeReplies(t *testing.T, s string) map[string]wsFrame {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		t.Fatalf("replies %s: %v", s, err)
	}
	if e, ok := raw["error"]; ok {
		t.Fatalf("the page failed: %s", e)
	}
	m := make(map[string]wsFrame, len(raw))
	for id, b := range raw {
		var f wsFrame
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatalf("reply %s: %s: %v", id, b, err)
		}
		m[id] = f
	}
	return m
}

// navigatePoll loads page (unless "") and waits for the expression to be
// truthy: the page's JSON string.
func navigatePoll(t *testing.T, ctx context.Context, page, expr string) string {
	t.Helper()
	if page != "" {
		if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
			t.Fatalf("navigate to %s: %v", page, err)
		}
	}
	deadline := time.Now().Add(guard)
	for {
		s, err := chromedp.Run(ctx, chromedp.Poll[string](expr, chromedp.WithPollingTimeout(time.Until(deadline))))
		if err == nil {
			return s
		}
		// The poll runs in the frame's execution context as it was when
		// the poll began; a navigation that replaces the context after
		// Navigate returned (the page's own load steps) fails it with
		// this error, and a new poll finds the new context.
		if !strings.Contains(err.Error(), "Cannot find context with specified id") || time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", expr, err)
		}
	}
}

// browserStreams: the page receives a server stream over the WebSocket
// and over EventSource, to their end events, and cancels a stream of
// each kind once it has a message (a cancel frame; EventSource.close):
// both handlers' ctx ends.
func browserStreams(t *testing.T, ctx context.Context, self string, sb *streamBackend) {
	ws := "ws://" + strings.TrimPrefix(self, "http://") + "/ws"
	page := self + "/browser.html?" + url.Values{"mode": {"stream"}, "ws": {ws}}.Encode()
	navigatePoll(t, ctx, page, "window.held")
	recv(t, sb.held)
	recv(t, sb.held)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void]("window.cancelHolds()")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := recv(t, sb.heldDone); !errors.Is(err, context.Canceled) {
			t.Errorf("a hold handler's ctx ended with %v, want context.Canceled", err)
		}
	}
	results := navigatePoll(t, ctx, "", "window.results")
	type stream struct {
		Msgs []struct {
			I int `json:"i"`
		} `json:"msgs"`
		End struct {
			Status  int                 `json:"status"`
			Error   *errorBody          `json:"error"`
			Trailer map[string][]string `json:"trailer"`
		} `json:"end"`
		LastEventID string `json:"lastEventId"`
	}
	var got struct{ WS, SSE, WSHold stream }
	if err := json.Unmarshal([]byte(results), &got); err != nil {
		t.Fatalf("results %s: %v", results, err)
	}
	for name, s := range map[string]stream{"websocket": got.WS, "EventSource": got.SSE} {
		ok := len(s.Msgs) == 5 && s.End.Status == 200 && slices.Equal(s.End.Trailer["count"], []string{"5"})
		for i, m := range s.Msgs {
			ok = ok && m.I == i
		}
		if !ok {
			t.Errorf("%s: %+v, want messages 0 to 4 and the end 200 with the trailer count: 5", name, s)
		}
	}
	if got.SSE.LastEventID != sseEndID {
		t.Errorf("EventSource's end event has the id %q, want %q", got.SSE.LastEventID, sseEndID)
	}
	if e := got.WSHold.End; e.Status != StatusClientClosed || e.Error == nil || e.Error.Code != "canceled" {
		t.Errorf("the cancelled WebSocket stream ended %+v, want 499 canceled", e)
	}
}

// browserEvents: two pages, with JWTs of two users, subscribe to the
// route's events (user:{auth.subject}); an emitter node, over TCP, emits
// events for each user, the last of each marked: each page receives its
// user's events, in order, and none of the other's (an event routed
// wrongly would come before the marker, on one socket's ordered queue).
func browserEvents(t *testing.T, ctx context.Context, self string, gw *runtime.Node) {
	emitter := newNode(t, runtime.WithService("match"), runtime.WithDiscovery(runtime.StaticPeers(gw.Addr())))
	ws := "ws://" + strings.TrimPrefix(self, "http://") + "/ws"
	users := []string{"alice", "bob"}
	tabs := make([]context.Context, len(users))
	for i, user := range users {
		tab, closeTab := chromedp.NewContext(ctx)
		t.Cleanup(closeTab)
		tabs[i] = tab
		token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
			"sub": user, "iss": "test-issuer", "aud": "browser", "exp": time.Now().Add(time.Hour).Unix(),
		}).SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		page := self + "/browser.html?" + url.Values{"mode": {"events"}, "ws": {ws}, "token": {token}}.Encode()
		sub := navigatePoll(t, tab, page, "window.subscribed")
		if want := `"pattern":"event:found,role:match,user:` + user + `"`; !strings.Contains(sub, want) {
			t.Fatalf("%s's sub answered %s, want %s", user, sub, want)
		}
	}
	ctxEmit, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	emit := func(user string, n int, last bool) {
		t.Helper()
		pat := "role:match,event:found,user:" + user
		if err := emitter.WaitForSubscribers(ctxEmit, pat); err != nil {
			t.Fatal(err)
		}
		if _, err := emitter.Emit(ctxEmit, pat, map[string]any{"match": map[string]any{"n": n, "for": user}, "last": last}); err != nil {
			t.Fatalf("emit for %s: %v", user, err)
		}
	}
	emit("alice", 1, false)
	emit("bob", 2, false)
	emit("alice", 3, false)
	emit("bob", 4, true)
	emit("alice", 5, true)
	want := map[string][]int{"alice": {1, 3, 5}, "bob": {2, 4}}
	for i, user := range users {
		results := navigatePoll(t, tabs[i], "", "window.results")
		var got []struct {
			Type, Sub, Pattern string
			Data               struct {
				Match struct {
					N   int    `json:"n"`
					For string `json:"for"`
				} `json:"match"`
				User string `json:"user"`
			}
		}
		if err := json.Unmarshal([]byte(results), &got); err != nil {
			t.Fatalf("%s's events %s: %v", user, results, err)
		}
		var ns []int
		for _, e := range got {
			ns = append(ns, e.Data.Match.N)
			if e.Type != "event" || e.Sub != "m1" || e.Data.Match.For != user || e.Data.User != user || e.Pattern != "event:found,role:match,user:"+user {
				t.Errorf("%s's page received %+v", user, e)
			}
		}
		if !slices.Equal(ns, want[user]) {
			t.Errorf("%s's page received events %v, want %v", user, ns, want[user])
		}
	}
}

// browserSlowPage: a page kept busy 20ms a message reads a stream whose
// handler sends 64 KiB messages as fast as it may: the gateway's live
// heap stays flat and the handler is held back.
func browserSlowPage(t *testing.T, ctx context.Context, self string, sb *streamBackend) {
	const n = 60
	ws := "ws://" + strings.TrimPrefix(self, "http://") + "/ws"
	page := self + "/browser.html?" + url.Values{"mode": {"slow"}, "ws": {ws}, "n": {strconv.Itoa(n)}}.Encode()
	sb.sent.Store(0)
	base := liveHeap()
	stop, sampled := make(chan struct{}), make(chan uint64)
	go func() {
		var peak uint64
		tick := time.NewTicker(50 * time.Millisecond) // a sampling interval, not synchronisation
		defer tick.Stop()
		for {
			peak = max(peak, liveHeap())
			select {
			case <-stop:
				sampled <- peak
				return
			case <-tick.C:
			}
		}
	}()
	results := navigatePoll(t, ctx, page, "window.results")
	sent := sb.sent.Load()
	close(stop)
	growth := int64(recv(t, sampled)) - int64(base)
	var got struct{ Count, Last int }
	if err := json.Unmarshal([]byte(results), &got); err != nil || got.Count != n || got.Last != n-1 {
		t.Fatalf("results %s (%v), want %d messages", results, err, n)
	}
	t.Logf("slow page: read %d messages of %d KiB while the handler sent %d of %d; live heap grew by %.1f MiB at most",
		n, floodSize>>10, sent, floodCount, float64(growth)/(1<<20))
	if sent >= floodCount {
		t.Errorf("the handler sent all %d messages to a page that read %d: nothing held it back", sent, n)
	}
	if growth > 32<<20 {
		t.Errorf("the live heap grew by %d bytes with a slow page, want at most 32 MiB", growth)
	}
	if err := recv(t, sb.floodEnd); err == nil {
		t.Error("the flood handler sent everything: the page's leaving did not end it")
	}
}
