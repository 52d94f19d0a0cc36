package gateway

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
)

// TestJWTWithoutSubject: a JWT without sub is refused (401) by default,
// and accepted with auth.jwt.allow_no_subject.
func TestJWTWithoutSubject(t *testing.T) {
	exp := time.Now().Add(time.Hour).Unix()
	for _, tc := range []struct {
		name, yaml string
		want       int
	}{
		{"default", usersYAML, 401},
		{"allow_no_subject", strings.Replace(usersYAML, "issuer: test-issuer}", "issuer: test-issuer, allow_no_subject: true}", 1), 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := configGateway(t, tc.yaml)
			token := signHS(t, jwt.MapClaims{"iss": "test-issuer", "exp": exp})
			if got := doHTTP(t, tg, statusCase{method: "POST", path: "/api/users/echo", token: token}); got.status != tc.want {
				t.Errorf("a token without sub: %d, want %d", got.status, tc.want)
			}
			if got := doHTTP(t, tg, statusCase{method: "POST", path: "/api/users/echo", token: signHS(t, jwt.MapClaims{"iss": "test-issuer", "exp": exp, "sub": "u1"})}); got.status != 200 {
				t.Errorf("a token with sub: %d", got.status)
			}
		})
	}
}

// TestWebSocketSubjectStays: a second auth frame of another subject is
// refused (403) and the connection keeps its subject and scopes; one of
// the same subject refreshes them.
func TestWebSocketSubjectStays(t *testing.T) {
	tg := newTestGateway(t, settings{})
	tg.now().auth = authVerifier{testVerifier{
		"u1-read":  {Subject: "u1", Issuer: "test", Scopes: []string{"read"}},
		"u1-admin": {Subject: "u1", Issuer: "test", Scopes: []string{"read", "admin"}},
		"u2-admin": {Subject: "u2", Issuer: "test", Scopes: []string{"read", "admin"}},
	}}
	c := dialWS(t, tg.ws, nil)
	type step struct {
		Type, Subject string
		OK            bool
		Status        int
	}
	do := func(f map[string]any) step {
		t.Helper()
		sendFrame(t, c, f)
		r := mustReadFrame(t, c)
		return step{r.Type, r.Subject, r.OK != nil && *r.OK, r.Status}
	}
	admin := map[string]any{"type": "req", "id": "r", "method": "GET", "path": "/admin"}
	got := []step{
		do(map[string]any{"type": "auth", "id": "a1", "token": "u1-read"}),
		do(map[string]any{"type": "auth", "id": "a2", "token": "u2-admin"}),
		do(admin),
		do(map[string]any{"type": "auth", "id": "a3", "token": "u1-admin"}),
		do(admin),
	}
	want := []step{
		{Type: "auth", Subject: "u1", OK: true},
		{Type: "auth", Status: 403},             // another subject: refused
		{Type: "res", Status: 403},              // still u1, without admin
		{Type: "auth", Subject: "u1", OK: true}, // the same subject: refreshed
		{Type: "res", Status: 200},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("frames (-want +got):\n%s", d)
	}
}

// TestCORSVary: with a CORS policy every answer says Vary: Origin, those
// without CORS headers (no Origin, another origin, an error) and with
// "*" too; a preflight varies on its request headers; without a policy
// nothing varies.
func TestCORSVary(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy corsPolicy
		want   string
	}{
		{"origins", corsPolicy{origins: []string{"https://app.example.com"}}, "Origin"},
		{"credentials", corsPolicy{origins: []string{"https://app.example.com"}, credentials: true}, "Origin"},
		{"any", corsPolicy{origins: []string{"*"}}, "Origin"},
		{"none", corsPolicy{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := newTestGateway(t, settings{cors: tc.policy})
			for _, r := range []struct{ method, path, origin string }{
				{"GET", "/echo", ""},
				{"GET", "/echo", "https://app.example.com"},
				{"GET", "/echo", "https://evil.example.com"},
				{"GET", "/nowhere", "https://app.example.com"},
				{"GET", "/private", ""},
			} {
				req, _ := http.NewRequestWithContext(t.Context(), r.method, tg.base+r.path, nil)
				if r.origin != "" {
					req.Header.Set("Origin", r.origin)
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				if got := strings.Join(res.Header.Values("Vary"), ", "); got != tc.want {
					t.Errorf("%s %s from %q: %d, Vary %q, want %q", r.method, r.path, r.origin, res.StatusCode, got, tc.want)
				}
			}
			if tc.want == "" {
				return
			}
			for _, origin := range []string{"https://app.example.com", "https://evil.example.com"} {
				req, _ := http.NewRequestWithContext(t.Context(), "OPTIONS", tg.base+"/echo", nil)
				req.Header.Set("Origin", origin)
				req.Header.Set("Access-Control-Request-Method", "POST")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				if got := strings.Join(res.Header.Values("Vary"), ", "); got != "Origin, Access-Control-Request-Method, Access-Control-Request-Headers" {
					t.Errorf("preflight from %s: %d, Vary %q", origin, res.StatusCode, got)
				}
			}
		})
	}
}
