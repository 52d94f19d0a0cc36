package auth_test

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/wizardmesh/wizard/gateway/auth"
)

// TestJWKAlgPinsTheAlgorithm: a JWK with an "alg" verifies tokens of that
// algorithm only, though its kind (RSA) fits others the allow-list has; a
// JWK of the same key without "alg" verifies them all.
func TestJWKAlgPinsTheAlgorithm(t *testing.T) {
	k := rsaKeys()[0]
	pinned := jwkOf(t, "pinned", &k.PublicKey)
	pinned["alg"] = "RS256"
	ks := newKeyServer(jwksOf(t, pinned, jwkOf(t, "free", &k.PublicKey)))
	j := newJWT(t, auth.JWTOptions{JWKSURL: ks.serve(t)})
	for _, tt := range []struct {
		kid    string
		method jwt.SigningMethod
		reason auth.Reason // zero: verifies
	}{
		{"pinned", jwt.SigningMethodRS256, 0},
		{"pinned", jwt.SigningMethodPS256, auth.ReasonAlgorithm},
		{"pinned", jwt.SigningMethodRS512, auth.ReasonAlgorithm},
		{"free", jwt.SigningMethodRS256, 0},
		{"free", jwt.SigningMethodPS256, 0},
		{"free", jwt.SigningMethodRS512, 0},
	} {
		t.Run(tt.kid+"/"+tt.method.Alg(), func(t *testing.T) {
			_, err := j.Verify(t.Context(), sign(t, tt.method, k, tt.kid, claims(nil)))
			if tt.reason == 0 && err != nil {
				t.Fatalf("Verify: %v, want the token verified", err)
			}
			if tt.reason != 0 && reasonOf(err) != tt.reason {
				t.Fatalf("Verify: %v, want reason %q", err, tt.reason)
			}
		})
	}
}

// TestCertificatePEMLoads: a key given as a "CERTIFICATE" PEM block, inline
// or in a file, verifies with the certificate's public key.
func TestCertificatePEMLoads(t *testing.T) {
	ec := ecKey()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "id.test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &ec.PublicKey, ec)
	if err != nil {
		t.Fatal(err)
	}
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	file := filepath.Join(t.TempDir(), "id.crt")
	if err := os.WriteFile(file, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	tok := sign(t, jwt.SigningMethodES256, ec, "", claims(nil))
	other := sign(t, jwt.SigningMethodES256, ecOther(), "", claims(nil))
	for name, key := range map[string]auth.Key{"PEM": {PEM: cert}, "PEMFile": {PEMFile: file}, "File": {File: file}} {
		t.Run(name, func(t *testing.T) {
			j, err := auth.NewJWT(auth.JWTOptions{Keys: []auth.Key{key}})
			if err != nil {
				t.Fatalf("NewJWT with a certificate: %v", err)
			}
			t.Cleanup(func() { _ = j.Close() })
			if _, err := j.Verify(t.Context(), tok); err != nil {
				t.Errorf("token of the certificate's key: %v", err)
			}
			if _, err := j.Verify(t.Context(), other); reasonOf(err) != auth.ReasonSignature {
				t.Errorf("token of another key: %v, want reason %q", err, auth.ReasonSignature)
			}
		})
	}
}
