package auth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/wizardmesh/wizard/gateway/auth"
)

// TestMaxTokenSizeBoundary: a token of exactly MaxTokenSize bytes is
// verified, one byte more is refused as malformed, for both verifiers.
func TestMaxTokenSizeBoundary(t *testing.T) {
	tok := sign(t, jwt.SigningMethodHS256, hmacSecret(), "", claims(nil))
	for _, tt := range []struct {
		max    int
		reason auth.Reason // zero: verifies
	}{{len(tok), 0}, {len(tok) - 1, auth.ReasonMalformed}} {
		j := newJWT(t, auth.JWTOptions{Keys: []auth.Key{{Secret: hmacSecret()}}, MaxTokenSize: tt.max})
		if _, err := j.Verify(t.Context(), tok); reasonOf(err) != tt.reason {
			t.Errorf("JWT, MaxTokenSize %d, token of %d bytes: %v, want reason %q", tt.max, len(tok), err, tt.reason)
		}
	}
	svc := newAuthService(t, answerFor(time.Now().Add(time.Hour).Unix()))
	for _, tt := range []struct {
		max    int
		reason auth.Reason
	}{{4, 0}, {3, auth.ReasonMalformed}} {
		d := newDelegate(t, auth.DelegateOptions{Caller: svc.node, MaxTokenSize: tt.max})
		if _, err := d.Verify(t.Context(), "good"); reasonOf(err) != tt.reason {
			t.Errorf("delegate, MaxTokenSize %d, token of 4 bytes: %v, want reason %q", tt.max, err, tt.reason)
		}
	}
}

// TestDelegateExpiresAtRange: expires_at as unix seconds must be above 0
// and at most 2^40; a fraction of a second is kept.
func TestDelegateExpiresAtRange(t *testing.T) {
	for _, tt := range []struct {
		name string
		exp  any
		want time.Time // zero: refused (503, the answer cannot be read)
	}{
		{"zero", 0, time.Time{}},
		{"negative", -1, time.Time{}},
		{"2^40", float64(1 << 40), time.Unix(1<<40, 0)},
		{"past 2^40", float64(1<<40) + 1, time.Time{}},
		{"a fraction", 4102444800.5, time.Unix(4102444800, 5e8)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			svc := newAuthService(t, answers(map[string]any{"subject": "u", "expires_at": tt.exp}))
			d := newDelegate(t, auth.DelegateOptions{Caller: svc.node})
			id, err := d.Verify(t.Context(), "tok")
			if tt.want.IsZero() {
				if reasonOf(err) != auth.ReasonUnavailable {
					t.Fatalf("expires_at %v: %v, want reason %q", tt.exp, err, auth.ReasonUnavailable)
				}
				return
			}
			if err != nil || !id.ExpiresAt.Equal(tt.want) {
				t.Fatalf("expires_at %v: %v, %v; want expiry %v", tt.exp, id, err, tt.want)
			}
		})
	}
}

// TestSeveralKeysOfAKid: with several keys that a token's kid (or its
// lack of one) selects, a token of any of them verifies, and one of
// another key does not.
func TestSeveralKeysOfAKid(t *testing.T) {
	a, b := ecKey(), ecOther()
	c := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	for _, kid := range []string{"", "k"} {
		j := newJWT(t, auth.JWTOptions{Keys: []auth.Key{{ID: kid, PEM: pemOf(t, &a.PublicKey)}, {ID: kid, PEM: pemOf(t, &b.PublicKey)}}})
		for i, k := range []any{a, b} {
			if _, err := j.Verify(t.Context(), sign(t, jwt.SigningMethodES256, k, kid, claims(nil))); err != nil {
				t.Errorf("kid %q, token of key %d: %v", kid, i+1, err)
			}
		}
		if _, err := j.Verify(t.Context(), sign(t, jwt.SigningMethodES256, c, kid, claims(nil))); err == nil {
			t.Errorf("kid %q: a token of another key verified", kid)
		}
	}
}

// TestErrorEdges: a reason past the known ones has a message of its own,
// a scope error without scopes names none, and '~' (the last character
// RFC 6750 allows in a quoted value) stays in the challenge.
func TestErrorEdges(t *testing.T) {
	if s := (auth.ReasonUnavailable + 1).String(); s == "" {
		t.Error("a reason past the known ones has an empty message")
	}
	if h := (&auth.Error{Reason: auth.ReasonScope}).WWWAuthenticate(); strings.Contains(h, "scope=") {
		t.Errorf("scope error without scopes: %q names a scope", h)
	}
	h := (&auth.Error{Reason: auth.ReasonRejected, Message: "a~b\x7f\"c"}).WWWAuthenticate()
	if !strings.Contains(h, `error_description="a~bc"`) {
		t.Errorf("challenge %q, want the description a~bc", h)
	}
}
