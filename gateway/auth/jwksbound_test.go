package auth_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/wizardmesh/wizard/gateway/auth"
)

// TestJWKSMissedKidsBounded: the kids a fetch did not bring are
// remembered up to a bound (1,024); past it, any unknown kid fails at
// once until the next fetch, instead of waiting for it.
func TestJWKSMissedKidsBounded(t *testing.T) {
	a, b := rsaKeys()[0], rsaKeys()[1]
	synctest.Test(t, func(t *testing.T) {
		ks := newKeyServer(jwksOf(t, jwkOf(t, "a", &a.PublicKey)))
		j := jwksVerifier(t, ks)
		var wg sync.WaitGroup
		for i := range 1024 {
			tok := sign(t, jwt.SigningMethodRS256, b, fmt.Sprintf("garbage-%d", i), claims(nil))
			wg.Go(func() { j.Verify(t.Context(), tok) }) // all wait for the fetch at 3s, which misses them
		}
		wg.Wait()
		if got := ks.requests.Load(); got != 2 {
			t.Fatalf("%d JWKS requests, want 2", got)
		}
		start := time.Now()
		_, err := j.Verify(t.Context(), sign(t, jwt.SigningMethodRS256, b, "one more", claims(nil)))
		if reasonOf(err) != auth.ReasonUnknownKey || time.Since(start) != 0 {
			t.Errorf("a new kid with 1,024 missed: %v after %v, want %q at once", err, time.Since(start), auth.ReasonUnknownKey)
		}
	})
}

// jwksVerifier is a JWT verifier of the keys ks serves, fetched at most
// every 3s, closed when the test ends.
func jwksVerifier(t *testing.T, ks *keyServer) *auth.JWT {
	t.Helper()
	j, err := auth.NewJWT(auth.JWTOptions{JWKSURL: "https://id.test/jwks.json", HTTPClient: &http.Client{Transport: ks}, JWKSMinRefresh: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}
