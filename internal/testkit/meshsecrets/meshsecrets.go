// Package meshsecrets writes, for a test, the files of a mesh's Secrets
// as deploy/kubernetes mounts them: a gossip key, and a CA with one
// certificate for every member, named wizard-mesh (pod addresses change,
// so members verify one name rather than an address). It is for tests
// only.
package meshsecrets

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ServerName is the name every member's certificate carries and every
// member verifies its peers against.
const ServerName = "wizard-mesh"

// Files are the paths of the Secrets' files.
type Files struct{ Key, CA, Cert, CertKey string }

// Flags are the example services' flags that name the files.
func (f Files) Flags() []string {
	return []string{"-gossip-key-file=" + f.Key, "-tls-cert=" + f.Cert, "-tls-key=" + f.CertKey, "-tls-ca=" + f.CA, "-tls-server-name=" + ServerName}
}

// Write writes the files into dir, failing t on error.
func Write(t testing.TB, dir string) Files {
	t.Helper()
	f := Files{
		Key:     filepath.Join(dir, "gossip.key"),
		CA:      filepath.Join(dir, "ca.crt"),
		Cert:    filepath.Join(dir, "tls.crt"),
		CertKey: filepath.Join(dir, "tls.key"),
	}
	gossip := make([]byte, 32)
	rand.Read(gossip)
	write(t, f.Key, []byte(base64.StdEncoding.EncodeToString(gossip)+"\n"))
	caKey, caDER := certificate(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: "wizard mesh CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign,
	}, nil, nil)
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leafKey, leafDER := certificate(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: ServerName}, DNSNames: []string{ServerName},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, ca, caKey)
	write(t, f.CA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	write(t, f.Cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}))
	der, err := x509.MarshalPKCS8PrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	write(t, f.CertKey, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	return f
}

// certificate signs tmpl with parent's key (itself when parent is nil)
// and returns the new key and the certificate's DER.
func certificate(t testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
}

func write(t testing.TB, file string, b []byte) {
	t.Helper()
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
