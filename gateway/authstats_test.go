package gateway

import (
	"testing"
	"time"

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
