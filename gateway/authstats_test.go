package gateway

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"

	"github.com/wizardmesh/wizard/gateway/auth"
)

// TestAuthStats: the JWT verifier's cache counts reach Gateway.AuthStats;
// a refused token is a miss and no entry.
func TestAuthStats(t *testing.T) {
	tg := configGateway(t, usersYAML)
	if s := tg.AuthStats(); s != (auth.CacheStats{}) {
		t.Fatalf("before any request: %+v", s)
	}
	admin := signHS(t, jwt.MapClaims{"sub": "u9", "iss": "test-issuer", "exp": time.Now().Add(time.Hour).Unix(), "scope": "admin"})
	expired := signHS(t, jwt.MapClaims{"sub": "u9", "iss": "test-issuer", "exp": time.Now().Add(-time.Hour).Unix(), "scope": "admin"})
	for _, c := range []struct {
		token  string
		status int
	}{{admin, 200}, {admin, 200}, {expired, 401}} {
		if got := doHTTP(t, tg, statusCase{method: "GET", path: "/private/echo", token: c.token}); got.status != c.status {
			t.Fatalf("status %d, want %d", got.status, c.status)
		}
	}
	if s := tg.AuthStats(); s.Hits != 1 || s.Misses != 2 || s.Entries != 1 {
		t.Errorf("%+v, want 1 hit, 2 misses, 1 entry", s)
	}
}

// TestAuthCacheSettings: auth.jwt.cache's bounds reach the verifier: one
// entry holds one token however many verify, and off caches none.
func TestAuthCacheSettings(t *testing.T) {
	const jwtLine = `  jwt: {keys: ["$DIR/hs.key"], algorithms: [HS256], issuer: test-issuer}`
	if !strings.Contains(usersYAML, jwtLine) {
		t.Fatal("usersYAML's jwt line changed; update this test")
	}
	exp := time.Now().Add(time.Hour).Unix()
	tokens := []string{
		signHS(t, jwt.MapClaims{"sub": "u1", "iss": "test-issuer", "exp": exp, "scope": "admin"}),
		signHS(t, jwt.MapClaims{"sub": "u2", "iss": "test-issuer", "exp": exp, "scope": "admin"}),
	}
	for _, c := range []struct {
		cache string
		want  auth.CacheStats
	}{
		// u1, u2 (evicts u1), u1 again: a miss (evicts u2), u1: a hit.
		{"cache: {entries: 1}", auth.CacheStats{Hits: 1, Misses: 3, Entries: 1}},
		{"cache: {off: true}", auth.CacheStats{}},
	} {
		t.Run(c.cache, func(t *testing.T) {
			yaml := strings.Replace(usersYAML, jwtLine, jwtLine[:len(jwtLine)-1]+", "+c.cache+"}", 1)
			tg := configGateway(t, yaml)
			for _, tok := range []string{tokens[0], tokens[1], tokens[0], tokens[0]} {
				if got := doHTTP(t, tg, statusCase{method: "GET", path: "/private/echo", token: tok}); got.status != 200 {
					t.Fatalf("status %d, want 200", got.status)
				}
			}
			s := tg.AuthStats()
			s.Bytes = 0
			if s != c.want {
				t.Errorf("%+v, want %+v", s, c.want)
			}
		})
	}
}

// TestAuthStatsWebSocketNotCached: a WebSocket connection's token, given
// with the upgrade or by an auth frame, is verified without entering the
// JWT cache (the connection keeps its identity itself); an HTTP request's
// token enters it, and a connection's token already cached is a hit.
func TestAuthStatsWebSocketNotCached(t *testing.T) {
	tg := configGateway(t, usersYAML)
	exp := time.Now().Add(time.Hour).Unix()
	upgrade := signHS(t, jwt.MapClaims{"sub": "u1", "iss": "test-issuer", "exp": exp})
	frame := signHS(t, jwt.MapClaims{"sub": "u1", "iss": "test-issuer", "exp": exp, "scope": "read"})
	c := dialWS(t, tg.ws, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + upgrade}}})
	sendFrame(t, c, map[string]any{"type": "auth", "id": "a", "token": frame})
	if f := mustReadFrame(t, c); f.Type != frameAuth || !*f.OK {
		t.Fatalf("auth answered %+v", f)
	}
	if s := tg.AuthStats(); s.Hits != 0 || s.Misses != 2 || s.Entries != 0 {
		t.Fatalf("after a connection's two tokens: %+v, want 2 misses, no entry", s)
	}
	admin := signHS(t, jwt.MapClaims{"sub": "u1", "iss": "test-issuer", "exp": exp, "scope": "admin"})
	if got := doHTTP(t, tg, statusCase{method: "GET", path: "/private/echo", token: admin}); got.status != 200 {
		t.Fatalf("status %d, want 200", got.status)
	}
	sendFrame(t, c, map[string]any{"type": "auth", "id": "b", "token": admin})
	if f := mustReadFrame(t, c); f.Type != frameAuth || !*f.OK {
		t.Fatalf("auth answered %+v", f)
	}
	if s := tg.AuthStats(); s.Hits != 1 || s.Misses != 3 || s.Entries != 1 {
		t.Errorf("after an HTTP request's token, then the same by an auth frame: %+v, want 1 hit, 3 misses, 1 entry", s)
	}
}
