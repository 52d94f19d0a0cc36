package auth_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/wizardmesh/wizard/gateway/auth"
)

// FuzzVerify feeds arbitrary strings to a JWT verifier with HMAC, RSA,
// ECDSA and Ed25519 keys: it never panics, always answers an *auth.Error
// of status 401, and succeeds only for the valid tokens it was seeded
// with, never for a mutation of one.
func FuzzVerify(f *testing.F) {
	rsaKey, ec, ed, secret := rsaKeys()[0], ecKey(), edKey(), hmacSecret()
	j, err := auth.NewJWT(auth.JWTOptions{
		Keys: []auth.Key{
			{ID: "r", PEM: pemOf(f, &rsaKey.PublicKey)},
			{ID: "e", PEM: pemOf(f, &ec.PublicKey)},
			{ID: "d", PEM: pemOf(f, ed.Public())},
			{ID: "h", Secret: secret},
		},
		Issuer:   "https://id.test",
		Audience: []string{"shop"},
	})
	if err != nil {
		f.Fatal(err)
	}
	valid := []string{
		sign(f, jwt.SigningMethodRS256, rsaKey, "r", claims(nil)),
		sign(f, jwt.SigningMethodPS384, rsaKey, "r", claims(nil)),
		sign(f, jwt.SigningMethodES256, ec, "e", claims(nil)),
		sign(f, jwt.SigningMethodEdDSA, ed, "d", claims(nil)),
		sign(f, jwt.SigningMethodHS256, secret, "h", claims(nil)),
		sign(f, jwt.SigningMethodHS512, secret, "", claims(nil)),
	}
	for _, s := range valid {
		f.Add(s)
		p := strings.Split(s, ".")
		f.Add(p[0] + "." + p[1] + ".")
		f.Add(p[0] + "." + p[1] + "." + p[2] + "A")
	}
	for _, s := range []string{
		sign(f, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "r", claims(nil)),
		sign(f, jwt.SigningMethodHS256, pemOf(f, &rsaKey.PublicKey), "r", claims(nil)),
		"", ".", "..", "a.b.c", "eyJhbGciOiJIUzI1NiJ9..", "eyJ9.eyJ9.eyJ9", strings.Repeat("A", 100),
	} {
		f.Add(s)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, tok string) {
		id, err := j.Verify(ctx, tok)
		if err == nil {
			if !slices.Contains(valid, tok) {
				t.Fatalf("Verify accepted a token it was not seeded with: %q (identity %+v)", tok, id)
			}
			return
		}
		if e := auth.ErrorOf(err); e.Status() != 401 {
			t.Fatalf("status %d for %v", e.Status(), err)
		}
	})
}
