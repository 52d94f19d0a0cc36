package gwbench

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// The JWT the load generator signs and the gateway verifies.
const (
	jwtIssuer   = "wizard-bench"
	jwtAudience = "wizard-bench"
)

// signer signs the clients' tokens with one algorithm; keyFile is the
// verification key for the gateway's auth.jwt.keys (an HMAC secret or a
// PEM public key).
type signer struct {
	alg     string // HS256 or ES256
	secret  []byte
	ec      *ecdsa.PrivateKey
	keyFile string
}

// newSigner makes a fresh key for alg and writes its verification key
// into dir.
func newSigner(alg, dir string) (*signer, error) {
	s := &signer{alg: alg}
	switch alg {
	case "HS256":
		b := make([]byte, 32)
		rand.Read(b)
		s.secret = []byte(hex.EncodeToString(b)) // 64 bytes, no line break
		s.keyFile = filepath.Join(dir, "hs256.secret")
		if err := os.WriteFile(s.keyFile, s.secret, 0o600); err != nil {
			return nil, err
		}
	case "ES256":
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
		if err != nil {
			return nil, err
		}
		s.ec = k
		s.keyFile = filepath.Join(dir, "es256.pub.pem")
		if err := os.WriteFile(s.keyFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("gwbench: JWT algorithm %q: want HS256 or ES256", alg)
	}
	return s, nil
}

// token signs a token for subject that expires after ttl.
func (s *signer) token(subject string, ttl time.Duration) (string, error) {
	now := time.Now()
	h, _ := json.Marshal(map[string]string{"alg": s.alg, "typ": "JWT"})
	c, _ := json.Marshal(map[string]any{"sub": subject, "iss": jwtIssuer, "aud": jwtAudience, "iat": now.Unix(), "exp": now.Add(ttl).Unix()})
	enc := base64.RawURLEncoding
	input := enc.EncodeToString(h) + "." + enc.EncodeToString(c)
	var sig []byte
	switch s.alg {
	case "HS256":
		m := hmac.New(sha256.New, s.secret)
		m.Write([]byte(input))
		sig = m.Sum(nil)
	case "ES256":
		d := sha256.Sum256([]byte(input))
		r, ss, err := ecdsa.Sign(rand.Reader, s.ec, d[:])
		if err != nil {
			return "", err
		}
		sig = make([]byte, 64) // JWS: r and s, 32 bytes each, big-endian
		r.FillBytes(sig[:32])
		ss.FillBytes(sig[32:])
	}
	return input + "." + enc.EncodeToString(sig), nil
}
