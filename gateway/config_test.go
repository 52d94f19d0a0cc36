package gateway

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/wizardmesh/wizard/gateway/config"
)

const secret = "0123456789abcdef0123456789abcdef"

// configGateway is a gateway made by New from YAML ($DIR: a directory
// holding hs.key, an HMAC secret), in front of a backend.
func configGateway(t *testing.T, yaml string) *testGateway {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hs.key"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("gateway.yaml", []byte(strings.ReplaceAll(yaml, "$DIR", dir)))
	if err != nil {
		t.Fatal(err)
	}
	b := newBackend(t)
	logs := &logBuffer{}
	g, err := New(gatewayNode(t, b), cfg, WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	return serveTestGateway(t, g, b, logs)
}

func signHS(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const usersYAML = `
defaults: {timeout: 2s, max_timeout: 5s}
auth:
  jwt: {keys: ["$DIR/hs.key"], algorithms: [HS256], issuer: test-issuer}
websocket: {path: /ws}
routes:
  - name: users
    method: POST
    path: /api/users/{action}
    pattern: "role:t,cmd:{action}"
    vars: {action: {allow: [echo, meta]}}
    auth: optional
  - name: private
    method: GET
    path: /private/{action}
    pattern: "role:t,cmd:{action}"
    vars: {action: {allow: [echo]}}
    scopes: [admin]
`

// TestNewFromConfig: routes, templates, allow lists and JWT auth from
// the YAML, over HTTP and WebSocket.
func TestNewFromConfig(t *testing.T) {
	tg := configGateway(t, usersYAML)
	exp := time.Now().Add(time.Hour).Unix()
	admin := signHS(t, jwt.MapClaims{"sub": "u9", "iss": "test-issuer", "exp": exp, "scope": "admin read"})
	plain := signHS(t, jwt.MapClaims{"sub": "u8", "iss": "test-issuer", "exp": exp})
	expired := signHS(t, jwt.MapClaims{"sub": "u8", "iss": "test-issuer", "exp": time.Now().Add(-time.Hour).Unix()})
	wrongIss := signHS(t, jwt.MapClaims{"sub": "u8", "iss": "other", "exp": exp})
	none := "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJ1OCIsImlzcyI6InRlc3QtaXNzdWVyIiwiZXhwIjo0MTAyNDQ0ODAwfQ."
	cases := []statusCase{
		{name: "template", method: "POST", path: "/api/users/echo", body: `{"a":1}`, status: 200},
		{name: "escaped segment", method: "POST", path: "/api/users/ec%68o", status: 200},
		{name: "escaped slash stays in its segment", method: "POST", path: "/api/users/ec%2Fho", status: 404, code: "not_found", message: "action"},
		{name: "dot segment", method: "POST", path: "/api/users/%2E%2E", status: 400, code: "invalid_argument"},
		{name: "outside allow", method: "POST", path: "/api/users/delete", status: 404, code: "not_found", message: "action"},
		{name: "wrong method", method: "GET", path: "/api/users/echo", status: 405, code: "unimplemented", headers: map[string]string{"Allow": "POST"}},
		{name: "no route", method: "GET", path: "/nowhere", status: 404, code: "not_found", message: "GET /nowhere"},
		{name: "client sets the pattern key", method: "POST", path: "/api/users/echo", body: `{"cmd":"panic"}`, status: 400, code: "invalid_argument", message: "cmd"},
		{name: "client sets a path variable", method: "POST", path: "/api/users/echo?action=meta", status: 400, code: "invalid_argument", message: "action"},
		{name: "client sets metadata", method: "POST", path: "/api/users/echo", body: `{"request-id$":"x"}`, status: 400, code: "invalid_argument"},
		{name: "scope", method: "GET", path: "/private/echo", token: admin, status: 200},
		{name: "scope missing", method: "GET", path: "/private/echo", token: plain, status: 403, code: "permission_denied", headers: map[string]string{"WWW-Authenticate": `Bearer error="insufficient_scope"`}},
		{name: "token missing", method: "GET", path: "/private/echo", status: 401, code: "unauthenticated", headers: map[string]string{"WWW-Authenticate": "Bearer"}},
		{name: "expired", method: "GET", path: "/private/echo", token: expired, status: 401, code: "unauthenticated", message: "expired"},
		{name: "wrong issuer", method: "GET", path: "/private/echo", token: wrongIss, status: 401, code: "unauthenticated"},
		{name: "alg none", method: "GET", path: "/private/echo", token: none, status: 401, code: "unauthenticated"},
	}
	for _, via := range []struct {
		name string
		do   func(t *testing.T, tg *testGateway, c statusCase) outcome
	}{{"http", doHTTP}, {"websocket", doWebSocket}} {
		t.Run(via.name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					got := via.do(t, tg, c)
					if got.status != c.status || got.code != c.code || !strings.Contains(got.message, c.message) {
						t.Fatalf("%s %s: got %d %q %q, want %d %q containing %q", c.method, c.path, got.status, got.code, got.message, c.status, c.code, c.message)
					}
					if via.name == "http" {
						for k, v := range c.headers {
							if h := got.header.Get(k); !strings.HasPrefix(h, v) {
								t.Errorf("header %s = %q, want it to start with %q", k, h, v)
							}
						}
					}
				})
			}
		})
	}
	// The identity reaches the handler as metadata.
	got := doHTTP(t, tg, statusCase{method: "POST", path: "/api/users/meta", token: admin})
	var m map[string]any
	json.Unmarshal(got.body, &m)
	if m["auth-subject"] != "u9" || m["auth-issuer"] != "test-issuer" || m["auth-scopes"] != "admin read" {
		t.Errorf("metadata %v", m)
	}
}

// TestClientFieldsDoNotRoute: a client's body field that a narrower
// pattern names does not reach it; the handler sees the route's pattern
// pairs in its message.
func TestClientFieldsDoNotRoute(t *testing.T) {
	tg := configGateway(t, usersYAML)
	for _, via := range []struct {
		name string
		do   func(t *testing.T, tg *testGateway, c statusCase) outcome
	}{{"http", doHTTP}, {"websocket", doWebSocket}} {
		t.Run(via.name, func(t *testing.T) {
			got := via.do(t, tg, statusCase{method: "POST", path: "/api/users/echo", body: `{"admin":true,"a":1}`})
			var m map[string]any
			if err := json.Unmarshal(got.body, &m); err != nil || got.status != 200 {
				t.Fatalf("%d %s: %v", got.status, got.body, err)
			}
			want := map[string]any{"admin": true, "a": 1.0, "action": "echo", "role": "t", "cmd": "echo"}
			if diff := cmp.Diff(want, m); diff != "" {
				t.Errorf("the echo handler's message (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReload: a reload swaps the route table at once.
func TestReload(t *testing.T) {
	tg := configGateway(t, usersYAML)
	if got := doHTTP(t, tg, statusCase{method: "POST", path: "/api/users/echo"}); got.status != 200 {
		t.Fatalf("before: %d", got.status)
	}
	cfg, err := config.Parse("new.yaml", []byte(`
routes:
  - {name: only, method: GET, path: /v2/echo, pattern: "role:t,cmd:echo", auth: none}
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tg.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if got := doHTTP(t, tg, statusCase{method: "POST", path: "/api/users/echo"}); got.status != 404 {
		t.Errorf("the old route after the reload: %d, want 404", got.status)
	}
	if got := doHTTP(t, tg, statusCase{method: "GET", path: "/v2/echo"}); got.status != 200 {
		t.Errorf("the new route: %d, want 200", got.status)
	}
}

// TestDelegatedAuthFailsClosed: an auth pattern that does not answer in
// time is a 503, never a pass.
func TestDelegatedAuthFailsClosed(t *testing.T) {
	tg := configGateway(t, `
auth:
  delegate: {pattern: "role:t,cmd:slow", timeout: 50ms}
websocket: {path: /ws}
routes:
  - {name: private, method: GET, path: /private, pattern: "role:t,cmd:echo"}
`)
	for _, via := range []func(t *testing.T, tg *testGateway, c statusCase) outcome{doHTTP, doWebSocket} {
		got := via(t, tg, statusCase{method: "GET", path: "/private", token: "some-token"})
		if got.status != 503 || got.code != "unavailable" {
			t.Errorf("delegate timing out: %d %q %q, want 503 unavailable", got.status, got.code, got.message)
		}
	}
	c := dialWS(t, tg.ws, nil)
	sendFrame(t, c, map[string]any{"type": "auth", "id": "a", "token": "some-token"})
	if f := mustReadFrame(t, c); *f.OK || f.Status != 503 {
		t.Errorf("auth frame: %+v, want 503", f)
	}
	sendRaw(t, c, []byte(`{}`)) // the connection stays
	if f := mustReadFrame(t, c); f.Type != "" {
		t.Errorf("ping after a 503 auth: %+v", f)
	}
	if got := doHTTP(t, tg, statusCase{method: "GET", path: "/private"}); got.status != 401 {
		t.Errorf("no token: %d, want 401", got.status)
	}
}
