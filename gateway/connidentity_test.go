package gateway

import (
	"testing"
	"time"

	"github.com/wizardmesh/wizard/gateway/auth"
)

// TestConnIdentityKeepsWhatCallsNeed checks that a WebSocket connection
// keeps the subject, issuer, scopes and expiry of its identity and drops
// the claims map and the audience, which nothing after the auth frame
// reads.
func TestConnIdentityKeepsWhatCallsNeed(t *testing.T) {
	exp := time.Unix(2_000_000_000, 0)
	id := &auth.Identity{
		Subject: "ada", Issuer: "iss", Audience: []string{"gw"},
		Scopes: append(make([]string, 0, 8), "read", "write"), ExpiresAt: exp,
		Claims: map[string]any{"sub": "ada", "big": "value"},
	}
	got := connIdentity(id)
	if got.Subject != "ada" || got.Issuer != "iss" || !got.ExpiresAt.Equal(exp) {
		t.Fatalf("connIdentity = %+v; want subject ada, issuer iss, expiry %v", got, exp)
	}
	if len(got.Scopes) != 2 || got.Scopes[0] != "read" || got.Scopes[1] != "write" || cap(got.Scopes) != 2 {
		t.Fatalf("scopes %q (cap %d); want [read write] clipped", got.Scopes, cap(got.Scopes))
	}
	if got.Claims != nil || got.Audience != nil {
		t.Fatalf("connIdentity kept claims %v and audience %v; want neither", got.Claims, got.Audience)
	}
	if id.Claims == nil {
		t.Fatal("connIdentity changed the verifier's identity")
	}
	trim := &auth.Identity{Subject: "ada"}
	if connIdentity(trim) != trim {
		t.Fatal("connIdentity copied an identity that has nothing to drop")
	}
}
