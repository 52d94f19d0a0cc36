package auth

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/golang-jwt/jwt/v5"
)

// Key is one verification key of [JWTOptions.Keys]: exactly one of PEM,
// PEMFile, Secret, SecretFile and File is set.
//
// PEM and PEMFile hold one public key: a "PUBLIC KEY" (PKIX: RSA, ECDSA
// P-256/P-384/P-521 or Ed25519), an "RSA PUBLIC KEY" (PKCS #1) or a
// "CERTIFICATE" block, whose public key is used. A private key is refused:
// the gateway only verifies. RSA keys have at least 2048 bits.
//
// Secret and SecretFile hold an HMAC secret of at least 32 bytes; a line
// break at the end of a SecretFile is removed.
//
// File is either, as the gateway's YAML gives keys as file names alone: a
// file with "-----BEGIN" in it is read as PEMFile (and fails if it is not a
// good PEM public key: a damaged public key is never taken for a secret),
// any other as SecretFile.
type Key struct {
	ID         string // kid: the key verifies tokens with this kid; empty: any kid
	PEM        []byte
	PEMFile    string
	Secret     []byte
	SecretFile string
	File       string
}

// keyKind is the kind of a key, which decides the algorithms it may verify.
type keyKind uint8

const (
	kindHMAC keyKind = iota + 1
	kindRSA
	kindP256
	kindP384
	kindP521
	kindEd25519
)

// algKinds maps each supported algorithm to the kind of key it needs.
var algKinds = map[string]keyKind{
	"HS256": kindHMAC, "HS384": kindHMAC, "HS512": kindHMAC,
	"RS256": kindRSA, "RS384": kindRSA, "RS512": kindRSA,
	"PS256": kindRSA, "PS384": kindRSA, "PS512": kindRSA,
	"ES256": kindP256, "ES384": kindP384, "ES512": kindP521,
	"EdDSA": kindEd25519,
}

// algOrder lists the algorithms in a stable order for messages and
// defaults.
var algOrder = []string{
	"HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
	"ES256", "ES384", "ES512", "EdDSA",
}

var kindNames = [...]string{
	kindHMAC: "HMAC secret", kindRSA: "RSA key", kindP256: "ECDSA P-256 key",
	kindP384: "ECDSA P-384 key", kindP521: "ECDSA P-521 key", kindEd25519: "Ed25519 key",
}

func (k keyKind) String() string { return kindNames[k] }

// algs returns the algorithms a key of kind k can verify.
func (k keyKind) algs() []string {
	var out []string
	for _, a := range algOrder {
		if algKinds[a] == k {
			out = append(out, a)
		}
	}
	return out
}

const (
	minRSABits   = 2048
	minHMACBytes = 32
)

// verifyKey is a key ready to verify: its kid, kind, the value golang-jwt
// verifies with, and, for a JWK with an "alg", the one algorithm it allows.
type verifyKey struct {
	kid  string
	kind keyKind
	key  any
	alg  string
}

// allows reports whether k may verify a token of algorithm alg.
func (k *verifyKey) allows(alg string) bool {
	return algKinds[alg] == k.kind && (k.alg == "" || k.alg == alg)
}

// load reads the key described by k.
func (k Key) load() (verifyKey, error) {
	set := 0
	for _, b := range []bool{len(k.PEM) > 0, k.PEMFile != "", len(k.Secret) > 0, k.SecretFile != "", k.File != ""} {
		if b {
			set++
		}
	}
	if set != 1 {
		return verifyKey{}, fmt.Errorf("exactly one of PEM, PEMFile, Secret, SecretFile and File must be set (%d are)", set)
	}
	if k.File != "" {
		b, err := os.ReadFile(k.File)
		if err != nil {
			return verifyKey{}, err
		}
		if bytes.Contains(b, []byte("-----BEGIN")) {
			vk, err := parsePEM(b)
			if err != nil {
				return verifyKey{}, fmt.Errorf("%s: %w", k.File, err)
			}
			vk.kid = k.ID
			return vk, nil
		}
		return secretKey(k.ID, b)
	}
	switch {
	case k.PEMFile != "":
		b, err := os.ReadFile(k.PEMFile)
		if err != nil {
			return verifyKey{}, err
		}
		vk, err := parsePEM(b)
		if err != nil {
			return verifyKey{}, fmt.Errorf("%s: %w", k.PEMFile, err)
		}
		vk.kid = k.ID
		return vk, nil
	case len(k.PEM) > 0:
		vk, err := parsePEM(k.PEM)
		vk.kid = k.ID
		return vk, err
	}
	if k.SecretFile != "" {
		b, err := os.ReadFile(k.SecretFile)
		if err != nil {
			return verifyKey{}, err
		}
		return secretKey(k.ID, b)
	}
	return hmacKey(k.ID, k.Secret)
}

// secretKey is the HMAC key of a secret file's content, without the line
// break at its end.
func secretKey(kid string, b []byte) (verifyKey, error) {
	return hmacKey(kid, bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r")))
}

func hmacKey(kid string, secret []byte) (verifyKey, error) {
	if len(secret) < minHMACBytes {
		return verifyKey{}, fmt.Errorf("HMAC secret has %d bytes, fewer than %d", len(secret), minHMACBytes)
	}
	return verifyKey{kid: kid, kind: kindHMAC, key: slices.Clone(secret)}, nil
}

// parsePEM reads the one public key of a PEM document.
func parsePEM(b []byte) (verifyKey, error) {
	block, rest := pem.Decode(b)
	if block == nil {
		return verifyKey{}, errors.New("no PEM block")
	}
	if next, _ := pem.Decode(rest); next != nil {
		return verifyKey{}, errors.New("more than one PEM block (give one key per entry)")
	}
	var pub any
	var err error
	switch block.Type {
	case "PUBLIC KEY":
		pub, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		pub, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
			pub = cert.PublicKey
		}
	case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY":
		return verifyKey{}, fmt.Errorf("PEM block %q is a private key; give the public key", block.Type)
	default:
		return verifyKey{}, fmt.Errorf("PEM block %q is not a public key or certificate", block.Type)
	}
	if err != nil {
		return verifyKey{}, fmt.Errorf("PEM block %q: %w", block.Type, err)
	}
	return publicKey(pub)
}

// publicKey checks pub and returns it as a verifyKey.
func publicKey(pub any) (verifyKey, error) {
	switch p := pub.(type) {
	case *rsa.PublicKey:
		if p.N.BitLen() < minRSABits {
			return verifyKey{}, fmt.Errorf("RSA key has %d bits, fewer than %d", p.N.BitLen(), minRSABits)
		}
		return verifyKey{kind: kindRSA, key: p}, nil
	case *ecdsa.PublicKey:
		switch p.Curve {
		case elliptic.P256():
			return verifyKey{kind: kindP256, key: p}, nil
		case elliptic.P384():
			return verifyKey{kind: kindP384, key: p}, nil
		case elliptic.P521():
			return verifyKey{kind: kindP521, key: p}, nil
		}
		return verifyKey{}, fmt.Errorf("ECDSA curve %s is not P-256, P-384 or P-521", p.Curve.Params().Name)
	case ed25519.PublicKey:
		return verifyKey{kind: kindEd25519, key: p}, nil
	}
	return verifyKey{}, fmt.Errorf("public key of type %T is not RSA, ECDSA or Ed25519", pub)
}

// keyset indexes keys by algorithm and kid for verification without
// allocation: for each algorithm, the key (or a [jwt.VerificationKeySet]
// when several share a kid) per kid, "" holding the keys without a kid,
// which verify a token of any kid.
type keyset struct {
	keys  []verifyKey // as given, for [sameKeys]
	byAlg map[string]map[string]any
	noKid map[string]any // per algorithm: every key, for a token without kid when no key lacks one
	kids  map[string]bool
	n     int
}

// newKeyset indexes keys for the algorithms of allowed.
func newKeyset(keys []verifyKey, allowed []string) *keyset {
	ks := &keyset{keys: keys, byAlg: map[string]map[string]any{}, noKid: map[string]any{}, kids: map[string]bool{}, n: len(keys)}
	for _, alg := range allowed {
		byKid := map[string][]jwt.VerificationKey{}
		var all []jwt.VerificationKey
		for i := range keys {
			if keys[i].allows(alg) {
				byKid[keys[i].kid] = append(byKid[keys[i].kid], keys[i].key)
				all = append(all, keys[i].key)
			}
		}
		if len(all) == 0 {
			continue
		}
		m := make(map[string]any, len(byKid))
		for kid, ks := range byKid {
			m[kid] = oneOrSet(ks)
		}
		ks.byAlg[alg] = m
		ks.noKid[alg] = oneOrSet(all)
	}
	for i := range keys {
		ks.kids[keys[i].kid] = true
	}
	return ks
}

// sameKeys reports whether a and b hold the same keys in the same order:
// kid, kind, pinned algorithm and key material.
func sameKeys(a, b []verifyKey) bool {
	return slices.EqualFunc(a, b, func(x, y verifyKey) bool {
		if x.kid != y.kid || x.kind != y.kind || x.alg != y.alg {
			return false
		}
		switch k := x.key.(type) {
		case []byte: // an HMAC secret
			s, ok := y.key.([]byte)
			return ok && bytes.Equal(k, s)
		case interface{ Equal(crypto.PublicKey) bool }:
			return k.Equal(y.key)
		}
		return false
	})
}

func oneOrSet(keys []jwt.VerificationKey) any {
	if len(keys) == 1 {
		return keys[0]
	}
	return jwt.VerificationKeySet{Keys: keys}
}

// lookupResult says why [keyset.lookup] found no key.
type lookupResult uint8

const (
	found      lookupResult = iota
	unknownKid              // no key has the kid: a JWKS refresh may bring it
	wrongAlg                // keys have the kid, none of them for this algorithm
	noKey                   // no key for a token without kid
)

// lookup returns the key or keys that verify a token of algorithm alg and
// key id kid.
func (ks *keyset) lookup(alg, kid string) (any, lookupResult) {
	m := ks.byAlg[alg]
	if kid == "" {
		if k, ok := m[""]; ok {
			return k, found
		}
		if k, ok := ks.noKid[alg]; ok {
			return k, found
		}
		return nil, noKey
	}
	if k, ok := m[kid]; ok {
		return k, found
	}
	if k, ok := m[""]; ok {
		return k, found
	}
	if ks.kids[kid] {
		return nil, wrongAlg
	}
	return nil, unknownKid
}
