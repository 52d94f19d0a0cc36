package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// hs256 signs claims with secret.
func hs256(t *testing.T, secret []byte, c jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestJWTCacheClockBack: on an injected clock that goes back, a cached
// token is refused before the later of its nbf and iat, less the leeway,
// as a first verification would refuse it; not before.
func TestJWTCacheClockBack(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	t0 := time.Unix(1_800_000_000, 0)
	for _, tt := range []struct {
		name     string
		nbf, iat int64 // seconds after t0; 0: none
	}{
		{"nbf", 5, 0},
		{"iat", 0, 5},
		{"nbf after iat", 5, 3},
		{"iat after nbf", 3, 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j, err := NewJWT(JWTOptions{Keys: []Key{{Secret: secret}}, Leeway: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			now := t0.Add(4 * time.Second) // the later of nbf and iat (5s) less the leeway
			j.now = func() time.Time { return now }
			c := jwt.MapClaims{"sub": "u", "exp": t0.Add(time.Hour).Unix()}
			if tt.nbf != 0 {
				c["nbf"] = t0.Unix() + tt.nbf
			}
			if tt.iat != 0 {
				c["iat"] = t0.Unix() + tt.iat
			}
			tok := hs256(t, secret, c)
			if _, err := j.Verify(t.Context(), tok); err != nil {
				t.Fatalf("at its start: %v", err)
			}
			now = now.Add(-time.Nanosecond)
			if _, err := j.Verify(t.Context(), tok); !isReason(err, ReasonNotYetValid) {
				t.Fatalf("cached, the clock 1ns back: %v, want %q", err, ReasonNotYetValid)
			}
			if s := j.CacheStats(); s.Hits != 0 || s.Misses != 2 || s.Entries != 0 {
				t.Errorf("%+v, want 2 misses and no entry", s)
			}
		})
	}
}

func isReason(err error, r Reason) bool {
	e := ErrorOf(err)
	return err != nil && e.Reason == r
}

// TestValidFrom: the later of nbf and iat less the leeway; zero without
// either.
func TestValidFrom(t *testing.T) {
	for _, tt := range []struct {
		c    jwt.MapClaims
		want int64 // unix seconds; 0: the zero time
	}{
		{jwt.MapClaims{}, 0},
		{jwt.MapClaims{"nbf": 100.0}, 98},
		{jwt.MapClaims{"iat": 100.0}, 98},
		{jwt.MapClaims{"nbf": 100.0, "iat": 90.0}, 98},
		{jwt.MapClaims{"nbf": 90, "iat": 100.0}, 98},
	} {
		got := validFrom(tt.c, 2*time.Second)
		if tt.want == 0 && !got.IsZero() || tt.want != 0 && !got.Equal(time.Unix(tt.want, 0)) {
			t.Errorf("validFrom(%v) = %v, want %v", tt.c, got, time.Unix(tt.want, 0))
		}
	}
}

// TestSameKeys: a fetch of the same keys keeps the key set, and so the
// cache; any difference of kid, kind, pinned algorithm or key material
// makes a new one.
func TestSameKeys(t *testing.T) {
	ec := func() verifyKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		vk, err := publicKey(&k.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		vk.kid = "e"
		return vk
	}
	e1, e2 := ec(), ec()
	e1again := e1
	pub := *e1.key.(*ecdsa.PublicKey)
	e1again.key = &pub // an equal key, another value
	h1 := must(hmacKey("h", []byte("0123456789abcdef0123456789abcdef")))
	h2 := must(hmacKey("h", []byte("0123456789abcdef0123456789abcdeX")))
	with := func(k verifyKey, f func(*verifyKey)) verifyKey { f(&k); return k }
	for _, tt := range []struct {
		name string
		a, b []verifyKey
		same bool
	}{
		{"equal", []verifyKey{h1, e1}, []verifyKey{h1, e1again}, true},
		{"none", nil, nil, true},
		{"one more", []verifyKey{e1}, []verifyKey{e1, e2}, false},
		{"one less", []verifyKey{e1, e2}, []verifyKey{e1}, false},
		{"other material", []verifyKey{e1}, []verifyKey{e2}, false},
		{"other secret", []verifyKey{h1}, []verifyKey{h2}, false},
		{"other kid", []verifyKey{e1}, []verifyKey{with(e1, func(k *verifyKey) { k.kid = "f" })}, false},
		{"other alg", []verifyKey{e1}, []verifyKey{with(e1, func(k *verifyKey) { k.alg = "ES256" })}, false},
		{"other kind", []verifyKey{e1}, []verifyKey{with(e1, func(k *verifyKey) { k.kind = kindP384 })}, false},
		{"secret against a public key", []verifyKey{with(h1, func(k *verifyKey) { k.kid = "e"; k.kind = kindP256 })}, []verifyKey{e1}, false},
		{"public key against a secret", []verifyKey{e1}, []verifyKey{with(h1, func(k *verifyKey) { k.kid = "e"; k.kind = kindP256 })}, false},
		{"unknown key type", []verifyKey{with(e1, func(k *verifyKey) { k.key = 1 })}, []verifyKey{with(e1, func(k *verifyKey) { k.key = 1 })}, false},
	} {
		if got := sameKeys(tt.a, tt.b); got != tt.same {
			t.Errorf("%s: sameKeys %v, want %v", tt.name, got, tt.same)
		}
	}

	j, err := NewJWT(JWTOptions{Keys: []Key{{ID: "h", Secret: []byte("0123456789abcdef0123456789abcdef")}}})
	if err != nil {
		t.Fatal(err)
	}
	ks := j.keys.Load()
	j.setJWKS([]verifyKey{e1})
	ks1 := j.keys.Load()
	if ks1 == ks {
		t.Fatal("a JWKS with a new key kept the key set")
	}
	j.setJWKS([]verifyKey{e1again})
	if j.keys.Load() != ks1 {
		t.Error("a JWKS of the same keys made a new key set")
	}
	j.setJWKS([]verifyKey{e2})
	if j.keys.Load() == ks1 {
		t.Error("a JWKS of another key kept the key set")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
