package auth_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Keys made once per test binary: RSA generation is slow.
var (
	rsaKeys = sync.OnceValue(func() [3]*rsa.PrivateKey {
		var ks [3]*rsa.PrivateKey
		for i := range ks {
			ks[i] = must(rsa.GenerateKey(rand.Reader, 2048))
		}
		return ks
	})
	ecKey   = sync.OnceValue(func() *ecdsa.PrivateKey { return must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader)) })
	ec384   = sync.OnceValue(func() *ecdsa.PrivateKey { return must(ecdsa.GenerateKey(elliptic.P384(), rand.Reader)) })
	ecOther = sync.OnceValue(func() *ecdsa.PrivateKey { return must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader)) })
	edKey   = sync.OnceValue(func() ed25519.PrivateKey {
		_, k := must2(ed25519.GenerateKey(rand.Reader))
		return k
	})
	hmacSecret = sync.OnceValue(func() []byte {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		// Not a line end at the end: TestJWTKeyFiles writes it to a file
		// with a newline, and a file's one trailing "\n" or "\r\n" is
		// not the secret's (it failed when a draw ended in '\r').
		b[len(b)-1] = 'k'
		return b
	})
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func must2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}

// pemOf returns pub as a PKIX "PUBLIC KEY" PEM block.
func pemOf(t testing.TB, pub crypto.PublicKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// claims returns valid claims for the tests' issuer and audience, with
// over applied (a nil value deletes the claim).
func claims(over map[string]any) jwt.MapClaims {
	now := time.Now()
	c := jwt.MapClaims{
		"sub":   "u_1",
		"iss":   "https://id.test",
		"aud":   "shop",
		"exp":   now.Add(time.Hour).Unix(),
		"iat":   now.Unix(),
		"scope": "orders:read orders:write",
	}
	for k, v := range over {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// sign returns a token of c signed by key with method, with kid in its
// header if not empty.
func sign(t testing.TB, m jwt.SigningMethod, key any, kid string, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// jwkOf returns the JWK of a public key, with kid.
func jwkOf(t testing.TB, kid string, pub crypto.PublicKey) map[string]any {
	t.Helper()
	enc := base64.RawURLEncoding.EncodeToString
	switch p := pub.(type) {
	case *rsa.PublicKey:
		return map[string]any{"kty": "RSA", "kid": kid, "use": "sig", "n": enc(p.N.Bytes()), "e": enc(big.NewInt(int64(p.E)).Bytes())}
	case *ecdsa.PublicKey:
		b, err := p.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		size := (p.Curve.Params().BitSize + 7) / 8
		return map[string]any{"kty": "EC", "kid": kid, "crv": p.Curve.Params().Name, "x": enc(b[1 : 1+size]), "y": enc(b[1+size:])}
	case ed25519.PublicKey:
		return map[string]any{"kty": "OKP", "kid": kid, "crv": "Ed25519", "x": enc(p)}
	}
	t.Fatalf("no JWK for %T", pub)
	return nil
}

// jwksOf returns a JWKS document of keys.
func jwksOf(t testing.TB, keys ...map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func rsaGenerate(bits int) (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, bits) }

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
