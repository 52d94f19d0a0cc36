package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseJWKS(t *testing.T) {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	point, _ := ek.PublicKey.Bytes()
	rsaJWK := map[string]any{"kty": "RSA", "kid": "r", "n": enc(rk.N.Bytes()), "e": "AQAB"}
	ecJWK := map[string]any{"kty": "EC", "kid": "e", "crv": "P-256", "x": enc(point[1:33]), "y": enc(point[33:])}
	with := func(m map[string]any, k string, v any) map[string]any {
		c := map[string]any{}
		for kk, vv := range m {
			c[kk] = vv
		}
		c[k] = v
		return c
	}
	offCurve := with(ecJWK, "y", enc(make([]byte, 32)))
	doc := func(keys ...map[string]any) []byte {
		b, _ := json.Marshal(map[string]any{"keys": keys})
		return b
	}
	tests := []struct {
		name    string
		doc     []byte
		kids    []string // kids of the keys taken
		skipped int
		err     string
	}{
		{"rsa and ec", doc(rsaJWK, ecJWK), []string{"r", "e"}, 0, ""},
		{"alg fits", doc(with(rsaJWK, "alg", "PS256")), []string{"r"}, 0, ""},
		{"alg does not fit", doc(with(rsaJWK, "alg", "ES256"), ecJWK), []string{"e"}, 1, ""},
		{"use enc", doc(with(rsaJWK, "use", "enc"), ecJWK), []string{"e"}, 1, ""},
		{"oct", doc(map[string]any{"kty": "oct", "k": "c2VjcmV0"}, ecJWK), []string{"e"}, 1, ""},
		{"off the curve", doc(offCurve, rsaJWK), []string{"r"}, 1, ""},
		{"small rsa", doc(with(rsaJWK, "n", enc(big.NewInt(0).Lsh(big.NewInt(1), 1023).Bytes())), ecJWK), []string{"e"}, 1, ""},
		{"even exponent", doc(with(rsaJWK, "e", enc([]byte{2})), ecJWK), []string{"e"}, 1, ""},
		{"exponent 3", doc(with(rsaJWK, "e", enc([]byte{3}))), []string{"r"}, 0, ""},
		{"exponent in 4 bytes", doc(with(rsaJWK, "e", enc([]byte{0, 1, 0, 1}))), []string{"r"}, 0, ""},
		{"exponent in 5 bytes", doc(with(rsaJWK, "e", enc([]byte{0, 0, 1, 0, 1})), ecJWK), []string{"e"}, 1, ""},
		{"large even exponent", doc(with(rsaJWK, "e", enc([]byte{1, 0, 2})), ecJWK), []string{"e"}, 1, ""},
		{"as many keys as allowed", doc(func() []map[string]any {
			var ks []map[string]any
			for i := range maxJWKSKeys {
				ks = append(ks, with(ecJWK, "kid", fmt.Sprint(i)))
			}
			return ks
		}()...), func() []string {
			var kids []string
			for i := range maxJWKSKeys {
				kids = append(kids, fmt.Sprint(i))
			}
			return kids
		}(), 0, ""},
		{"nothing usable", doc(with(rsaJWK, "use", "enc")), nil, 0, "key set has no usable signature key (1 skipped)"},
		{"not json", []byte("<html>"), nil, 0, "key set is not a JWKS"},
		{"too many", doc(func() []map[string]any {
			var ks []map[string]any
			for i := range maxJWKSKeys + 1 {
				ks = append(ks, with(ecJWK, "kid", fmt.Sprint(i)))
			}
			return ks
		}()...), nil, 0, "key set has 65 keys, more than 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, skipped, err := parseJWKS(tt.doc)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var kids []string
			for _, k := range keys {
				kids = append(kids, k.kid)
			}
			if diff := cmp.Diff(tt.kids, kids); diff != "" {
				t.Errorf("kids (-want +got):\n%s", diff)
			}
			if len(skipped) != tt.skipped {
				t.Errorf("skipped %q, want %d", skipped, tt.skipped)
			}
		})
	}
}

func FuzzParseJWKS(f *testing.F) {
	for _, s := range []string{
		`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}`,
		`{"keys":[{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}]}`,
		`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`,
		`{"keys":[]}`, `[]`, `{"keys":[1,"x",null]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, _, err := parseJWKS(b)
		if err == nil && len(keys) == 0 {
			t.Fatal("no error and no keys")
		}
		for _, k := range keys {
			if k.kind == 0 || k.key == nil {
				t.Fatalf("key without kind or value: %+v", k)
			}
		}
	})
}

func FuzzReadAnswer(f *testing.F) {
	for _, s := range []string{
		`{"subject":"u","expires_at":"2030-01-01T00:00:00Z","scopes":"a b"}`,
		`{"subject":"u","expires_at":1900000000.5,"scopes":["a",1],"claims":{"x":1},"audience":"x"}`,
		`{"subject":"u","expires_at":"1900000000"}`, `{}`, `null`, `[1]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := readAnswer(b)
		if err == nil && (id.Subject == "" || id.ExpiresAt.IsZero()) {
			t.Fatalf("accepted an answer without subject or expiry: %+v", id)
		}
	})
}
