package auth_test

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/wizardmesh/wizard/gateway/auth"
)

func newJWT(t testing.TB, o auth.JWTOptions) *auth.JWT {
	t.Helper()
	j, err := auth.NewJWT(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	return j
}

func TestJWTVerifiesEachKeyKind(t *testing.T) {
	rsaKey, ec, ed, secret := rsaKeys()[0], ecKey(), edKey(), hmacSecret()
	tests := []struct {
		name   string
		key    auth.Key
		method jwt.SigningMethod
		signer any
	}{
		{"RS256", auth.Key{PEM: pemOf(t, &rsaKey.PublicKey)}, jwt.SigningMethodRS256, rsaKey},
		{"RS512", auth.Key{PEM: pemOf(t, &rsaKey.PublicKey)}, jwt.SigningMethodRS512, rsaKey},
		{"PS256", auth.Key{PEM: pemOf(t, &rsaKey.PublicKey)}, jwt.SigningMethodPS256, rsaKey},
		{"ES256", auth.Key{PEM: pemOf(t, &ec.PublicKey)}, jwt.SigningMethodES256, ec},
		{"ES384", auth.Key{PEM: pemOf(t, &ec384().PublicKey)}, jwt.SigningMethodES384, ec384()},
		{"EdDSA", auth.Key{PEM: pemOf(t, ed.Public())}, jwt.SigningMethodEdDSA, ed},
		{"HS256", auth.Key{Secret: secret}, jwt.SigningMethodHS256, secret},
		{"HS512", auth.Key{Secret: secret}, jwt.SigningMethodHS512, secret},
		{"RS256 PKCS1", auth.Key{PEM: pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&rsaKey.PublicKey)})}, jwt.SigningMethodRS256, rsaKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := newJWT(t, auth.JWTOptions{Keys: []auth.Key{tt.key}, Issuer: "https://id.test", Audience: []string{"other", "shop"}})
			c := claims(map[string]any{"scp": []any{"admin", "orders:read"}})
			id, err := j.Verify(t.Context(), sign(t, tt.method, tt.signer, "", c))
			if err != nil {
				t.Fatal(err)
			}
			want := &auth.Identity{
				Subject:   "u_1",
				Issuer:    "https://id.test",
				Audience:  []string{"shop"},
				Scopes:    []string{"orders:read", "orders:write", "admin"},
				ExpiresAt: time.Unix(c["exp"].(int64), 0),
			}
			if diff := cmp.Diff(want, id, cmpopts.IgnoreFields(auth.Identity{}, "Claims")); diff != "" {
				t.Errorf("identity (-want +got):\n%s", diff)
			}
			if id.Claims["sub"] != "u_1" {
				t.Errorf("Claims[sub] = %v, want u_1", id.Claims["sub"])
			}
		})
	}
}

func TestJWTKeyFiles(t *testing.T) {
	dir := t.TempDir()
	pemFile, secretFile := filepath.Join(dir, "k.pem"), filepath.Join(dir, "secret")
	if err := os.WriteFile(pemFile, pemOf(t, &ecKey().PublicKey), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secretFile, append(append([]byte(nil), hmacSecret()...), '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, keys := range [][]auth.Key{
		{{ID: "ec", PEMFile: pemFile}, {ID: "hs", SecretFile: secretFile}},
		{{ID: "ec", File: pemFile}, {ID: "hs", File: secretFile}},
	} {
		j := newJWT(t, auth.JWTOptions{Keys: keys})
		for _, tok := range []string{
			sign(t, jwt.SigningMethodES256, ecKey(), "ec", claims(nil)),
			sign(t, jwt.SigningMethodHS256, hmacSecret(), "hs", claims(nil)),
		} {
			if _, err := j.Verify(t.Context(), tok); err != nil {
				t.Error(err)
			}
		}
		if diff := cmp.Diff([]string{"HS256", "HS384", "HS512", "ES256"}, j.Algorithms()); diff != "" {
			t.Errorf("default algorithms (-want +got):\n%s", diff)
		}
	}
	// A damaged PEM file is an error, never an HMAC secret made of public text.
	damaged := filepath.Join(dir, "damaged.pem")
	b := pemOf(t, &rsaKeys()[0].PublicKey)
	if err := os.WriteFile(damaged, b[:len(b)-40], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.NewJWT(auth.JWTOptions{Keys: []auth.Key{{File: damaged}}, Algorithms: []string{"HS256"}}); err == nil || !strings.Contains(err.Error(), "damaged.pem: no PEM block") {
		t.Errorf("damaged PEM file: %v, want an error naming it", err)
	}
}

// reject is a token a verifier must refuse, with the reason.
type reject struct {
	name   string
	token  string
	reason auth.Reason
}

func checkRejects(t *testing.T, j *auth.JWT, tests []reject) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := j.Verify(t.Context(), tt.token)
			if err == nil {
				t.Fatalf("Verify = %+v, want an error of reason %q", id, tt.reason)
			}
			var e *auth.Error
			if !errors.As(err, &e) {
				t.Fatalf("Verify error %v is a %T, not an *auth.Error", err, err)
			}
			if e.Reason != tt.reason {
				t.Errorf("reason %q (%v), want %q", e.Reason, err, tt.reason)
			}
			if e.Status() != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", e.Status())
			}
			h := e.WWWAuthenticate()
			if tt.reason == auth.ReasonMissing {
				if h != "Bearer" {
					t.Errorf("WWW-Authenticate %q for no token, want Bearer", h)
				}
			} else if !strings.HasPrefix(h, `Bearer error="invalid_token", error_description="`) {
				t.Errorf("WWW-Authenticate %q", h)
			}
			if tt.token != "" && (strings.Contains(err.Error(), tt.token) || strings.Contains(h, tt.token) || strings.Contains(e.Public(), tt.token)) {
				t.Errorf("the error echoes the token: %v", err)
			}
		})
	}
}

func TestJWTRejects(t *testing.T) {
	rsaKey, other, secret := rsaKeys()[0], rsaKeys()[1], hmacSecret()
	rsaPEM := pemOf(t, &rsaKey.PublicKey)
	j := newJWT(t, auth.JWTOptions{
		Keys:     []auth.Key{{ID: "r1", PEM: rsaPEM}, {ID: "e1", PEM: pemOf(t, &ecKey().PublicKey)}},
		Issuer:   "https://id.test",
		Audience: []string{"shop"},
	})
	now := time.Now()
	rs := func(kid string, c jwt.MapClaims) string { return sign(t, jwt.SigningMethodRS256, rsaKey, kid, c) }
	good := rs("r1", claims(nil))
	parts := strings.Split(good, ".")
	none := sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "r1", claims(nil))
	checkRejects(t, j, []reject{
		{"alg none", none, auth.ReasonAlgorithm},
		{"alg none without kid", sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", claims(nil)), auth.ReasonAlgorithm},
		{"alg none with the signature cut", parts[0] + "." + parts[1] + ".", auth.ReasonSignature},
		{"HS256 signed with the RSA key's PEM", sign(t, jwt.SigningMethodHS256, rsaPEM, "r1", claims(nil)), auth.ReasonAlgorithm},
		{"HS256 signed with the RSA key's PEM, no kid", sign(t, jwt.SigningMethodHS256, rsaPEM, "", claims(nil)), auth.ReasonAlgorithm},
		{"HS256 signed with a secret", sign(t, jwt.SigningMethodHS256, secret, "", claims(nil)), auth.ReasonAlgorithm},
		{"ES256 token of the RSA kid", sign(t, jwt.SigningMethodES256, ecKey(), "r1", claims(nil)), auth.ReasonAlgorithm},
		{"signed by another key", sign(t, jwt.SigningMethodRS256, other, "r1", claims(nil)), auth.ReasonSignature},
		{"claims swapped under a good signature", parts[0] + "." + strings.Split(rs("r1", claims(map[string]any{"sub": "admin"})), ".")[1] + "." + parts[2], auth.ReasonSignature},
		{"unknown kid", rs("r9", claims(nil)), auth.ReasonUnknownKey},
		{"expired", rs("r1", claims(map[string]any{"exp": now.Add(-time.Minute).Unix()})), auth.ReasonExpired},
		{"not valid yet", rs("r1", claims(map[string]any{"nbf": now.Add(time.Hour).Unix()})), auth.ReasonNotYetValid},
		{"issued in the future", rs("r1", claims(map[string]any{"iat": now.Add(time.Hour).Unix()})), auth.ReasonNotYetValid},
		{"wrong iss", rs("r1", claims(map[string]any{"iss": "https://evil.test"})), auth.ReasonIssuer},
		{"no iss", rs("r1", claims(map[string]any{"iss": nil})), auth.ReasonIssuer},
		{"wrong aud", rs("r1", claims(map[string]any{"aud": []string{"admin", "billing"}})), auth.ReasonAudience},
		{"no aud", rs("r1", claims(map[string]any{"aud": nil})), auth.ReasonAudience},
		{"no exp", rs("r1", claims(map[string]any{"exp": nil})), auth.ReasonClaims},
		{"exp a string", rs("r1", claims(map[string]any{"exp": "tomorrow"})), auth.ReasonClaims},
		{"sub a number", rs("r1", claims(map[string]any{"sub": 7})), auth.ReasonClaims},
		{"no sub", rs("r1", claims(map[string]any{"sub": nil})), auth.ReasonClaims},
		{"empty sub", rs("r1", claims(map[string]any{"sub": ""})), auth.ReasonClaims},
		{"kid a number", strings.Join([]string{b64json(t, map[string]any{"alg": "RS256", "kid": 1}), parts[1], parts[2]}, "."), auth.ReasonMalformed},
		{"crit header", func() string {
			tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims(nil))
			tok.Header["kid"], tok.Header["crit"] = "r1", []string{"exp"}
			return must(tok.SignedString(rsaKey))
		}(), auth.ReasonMalformed},
		{"unknown alg", strings.Join([]string{b64json(t, map[string]any{"alg": "XS256"}), parts[1], parts[2]}, "."), auth.ReasonAlgorithm},
		{"garbage", "not a token", auth.ReasonMalformed},
		{"two segments", parts[0] + "." + parts[1], auth.ReasonMalformed},
		{"too large", good + strings.Repeat("A", 16<<10), auth.ReasonMalformed},
		{"empty", "", auth.ReasonMissing},
	})
}

// TestJWTAllowNoSubject: AllowNoSubject accepts a token without sub, as
// an identity with an empty subject.
func TestJWTAllowNoSubject(t *testing.T) {
	secret := hmacSecret()
	j := newJWT(t, auth.JWTOptions{Keys: []auth.Key{{Secret: secret}}, AllowNoSubject: true})
	id, err := j.Verify(t.Context(), sign(t, jwt.SigningMethodHS256, secret, "", claims(map[string]any{"sub": nil})))
	if err != nil || id.Subject != "" {
		t.Errorf("no sub, allowed: %+v, %v", id, err)
	}
}

func b64json(t *testing.T, v any) string {
	t.Helper()
	b, err := jsonMarshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// TestJWTHMACNeverTakesAnRSAKey has both an HMAC secret and an RSA key and
// both families allowed: a token signed HS256 with the RSA key's PEM still
// fails, as only the HMAC secret is tried for it.
func TestJWTHMACNeverTakesAnRSAKey(t *testing.T) {
	rsaKey := rsaKeys()[0]
	rsaPEM := pemOf(t, &rsaKey.PublicKey)
	j := newJWT(t, auth.JWTOptions{
		Keys:       []auth.Key{{PEM: rsaPEM}, {Secret: hmacSecret()}},
		Algorithms: []string{"RS256", "HS256"},
	})
	checkRejects(t, j, []reject{
		{"HS256 with the RSA PEM", sign(t, jwt.SigningMethodHS256, rsaPEM, "", claims(nil)), auth.ReasonSignature},
		{"HS256 with the RSA PEM and a kid", sign(t, jwt.SigningMethodHS256, rsaPEM, "anything", claims(nil)), auth.ReasonSignature},
		{"RS384 not allowed", sign(t, jwt.SigningMethodRS384, rsaKey, "", claims(nil)), auth.ReasonAlgorithm},
	})
	for _, tok := range []string{
		sign(t, jwt.SigningMethodRS256, rsaKey, "", claims(nil)),
		sign(t, jwt.SigningMethodHS256, hmacSecret(), "", claims(nil)),
	} {
		if _, err := j.Verify(t.Context(), tok); err != nil {
			t.Error(err)
		}
	}
}

func TestJWTLeeway(t *testing.T) {
	j := newJWT(t, auth.JWTOptions{Keys: []auth.Key{{Secret: hmacSecret()}}, Leeway: 30 * time.Second})
	now := time.Now()
	tests := []struct {
		name string
		over map[string]any
		want auth.Reason // 0: valid
	}{
		{"expired within the leeway", map[string]any{"exp": now.Add(-10 * time.Second).Unix()}, 0},
		{"expired beyond the leeway", map[string]any{"exp": now.Add(-time.Minute).Unix()}, auth.ReasonExpired},
		{"nbf within the leeway", map[string]any{"nbf": now.Add(10 * time.Second).Unix()}, 0},
		{"nbf beyond the leeway", map[string]any{"nbf": now.Add(time.Minute).Unix()}, auth.ReasonNotYetValid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := j.Verify(t.Context(), sign(t, jwt.SigningMethodHS256, hmacSecret(), "", claims(tt.over)))
			if got := reasonOf(err); got != tt.want {
				t.Errorf("reason %q (%v), want %q", got, err, tt.want)
			}
		})
	}
}

// reasonOf returns err's reason, 0 for nil.
func reasonOf(err error) auth.Reason {
	if err == nil {
		return 0
	}
	return auth.ErrorOf(err).Reason
}

func TestNewJWTErrors(t *testing.T) {
	priv := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: must(x509.MarshalPKCS8PrivateKey(ecKey()))})
	small := must(rsaGenerate(1024))
	dead := deadURL(t)
	tests := []struct {
		name string
		o    auth.JWTOptions
		want string
	}{
		{"no keys", auth.JWTOptions{}, "no keys: set Keys or JWKSURL"},
		{"none allowed", auth.JWTOptions{Keys: []auth.Key{{Secret: hmacSecret()}}, Algorithms: []string{"HS256", "none"}}, `algorithm 2: "none" is never allowed`},
		{"unknown algorithm", auth.JWTOptions{Keys: []auth.Key{{Secret: hmacSecret()}}, Algorithms: []string{"HS1"}}, `algorithm 1: "HS1" is not one of`},
		{"twice", auth.JWTOptions{Keys: []auth.Key{{Secret: hmacSecret()}}, Algorithms: []string{"HS256", "HS256"}}, "algorithm 2: HS256 is listed twice"},
		{"HS256 without a secret", auth.JWTOptions{Keys: []auth.Key{{PEM: pemOf(t, &ecKey().PublicKey)}}, Algorithms: []string{"ES256", "HS256"}}, "algorithm 2: HS256 needs an HMAC secret"},
		{"ES384 without its key", auth.JWTOptions{Keys: []auth.Key{{PEM: pemOf(t, &ecKey().PublicKey)}}, Algorithms: []string{"ES256", "ES384"}}, "algorithm 2: ES384 needs a ECDSA P-384 key"},
		{"key outside the algorithms", auth.JWTOptions{Keys: []auth.Key{{Secret: hmacSecret()}, {ID: "e", PEM: pemOf(t, &ecKey().PublicKey)}}, Algorithms: []string{"HS256"}}, `key 2 (kid "e"): a ECDSA P-256 key, but Algorithms allow none of ES256`},
		{"private key", auth.JWTOptions{Keys: []auth.Key{{PEM: priv}}}, `key 1: PEM block "PRIVATE KEY" is a private key; give the public key`},
		{"not PEM", auth.JWTOptions{Keys: []auth.Key{{PEM: []byte("hello")}}}, "key 1: no PEM block"},
		{"small RSA", auth.JWTOptions{Keys: []auth.Key{{PEM: pemOf(t, &small.PublicKey)}}}, "key 1: RSA key has 1024 bits, fewer than 2048"},
		{"short secret", auth.JWTOptions{Keys: []auth.Key{{Secret: []byte("password")}}}, "key 1: HMAC secret has 8 bytes, fewer than 32"},
		{"two sources", auth.JWTOptions{Keys: []auth.Key{{Secret: hmacSecret(), PEMFile: "x.pem"}}}, "key 1: exactly one of PEM, PEMFile, Secret, SecretFile and File must be set (2 are)"},
		{"missing file", auth.JWTOptions{Keys: []auth.Key{{PEMFile: filepath.Join(t.TempDir(), "none.pem")}}}, "none.pem: no such file"},
		{"negative leeway", auth.JWTOptions{Keys: []auth.Key{{Secret: hmacSecret()}}, Leeway: -time.Second}, "Leeway -1s is negative"},
		{"negative cache entries", auth.JWTOptions{Keys: []auth.Key{{Secret: hmacSecret()}}, CacheEntries: -1}, "CacheEntries -1 is negative"},
		{"negative cache bytes", auth.JWTOptions{Keys: []auth.Key{{Secret: hmacSecret()}}, CacheBytes: -1}, "CacheBytes -1 is negative"},
		{"empty audience", auth.JWTOptions{Keys: []auth.Key{{Secret: hmacSecret()}}, Audience: []string{""}}, "Audience 1 is empty"},
		{"http JWKS elsewhere", auth.JWTOptions{JWKSURL: "http://id.example.com/jwks.json"}, "http is allowed for loopback hosts only"},
		{"JWKS scheme", auth.JWTOptions{JWKSURL: "ftp://127.0.0.1/jwks.json"}, `scheme "ftp" is not https`},
		{"JWKS unreachable", auth.JWTOptions{JWKSURL: dead, JWKSTimeout: 5 * time.Second}, "jwks_url " + dead + ": "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, err := auth.NewJWT(tt.o)
			if err == nil {
				_ = j.Close()
				t.Fatalf("NewJWT succeeded, want an error with %q", tt.want)
			}
			if !strings.HasPrefix(err.Error(), "wizard: gateway: auth: ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want one with %q", err, tt.want)
			}
		})
	}
}
