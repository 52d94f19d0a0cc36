package auth_test

import (
	"context"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/wizardmesh/wizard/gateway/auth"
)

// BenchmarkVerify measures a verification: JWT signatures of RS256
// (2048-bit key), ES256 and HS256, each uncached (NoCache: the signature
// is checked every time) and cached (the token verified once, then served
// from the cache with its exp, nbf, iat and key set checked), and a
// delegate's cache hit.
func BenchmarkVerify(b *testing.B) {
	rsaKey, ec := rsaKeys()[0], ecKey()
	for _, bc := range []struct {
		name   string
		key    auth.Key
		method jwt.SigningMethod
		signer any
	}{
		{"RS256", auth.Key{ID: "r", PEM: pemOf(b, &rsaKey.PublicKey)}, jwt.SigningMethodRS256, rsaKey},
		{"ES256", auth.Key{ID: "e", PEM: pemOf(b, &ec.PublicKey)}, jwt.SigningMethodES256, ec},
		{"HS256", auth.Key{ID: "h", Secret: hmacSecret()}, jwt.SigningMethodHS256, hmacSecret()},
	} {
		for _, cache := range []string{"uncached", "cached"} {
			b.Run(bc.name+"/"+cache, func(b *testing.B) {
				j := newJWT(b, auth.JWTOptions{Keys: []auth.Key{bc.key}, Issuer: "https://id.test", Audience: []string{"shop"}, NoCache: cache == "uncached"})
				tok := sign(b, bc.method, bc.signer, bc.key.ID, claims(nil))
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					if _, err := j.Verify(ctx, tok); err != nil {
						b.Fatal(err)
					}
				}
				if s := j.CacheStats(); cache == "cached" && s.Misses != 1 {
					b.Errorf("%d misses, want 1", s.Misses)
				}
			})
		}
	}
	b.Run("delegate-cached", func(b *testing.B) {
		svc := newAuthService(b, func(context.Context, string) (any, error) {
			return map[string]any{"subject": "u_1", "scopes": "a b", "expires_at": time.Now().Add(time.Hour).Unix()}, nil
		})
		d, err := auth.NewDelegate(auth.DelegateOptions{Caller: svc.node, Pattern: authPattern})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = d.Close() })
		tok := sign(b, jwt.SigningMethodRS256, rsaKey, "r", claims(nil)) // a token of realistic length
		ctx := context.Background()
		if _, err := d.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := d.Verify(ctx, tok); err != nil {
				b.Fatal(err)
			}
		}
		if n := svc.calls.Load(); n != 1 {
			b.Errorf("%d handler calls, want 1", n)
		}
	})
}
