package main_test

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

// secrets are the files of a mesh's Secrets: the gossip key, and a CA
// with one certificate for every member, named wizard-mesh.
type secrets struct{ key, ca, cert, certKey string }

func writeSecrets(t *testing.T) secrets {
	t.Helper()
	dir := t.TempDir()
	s := secrets{
		key:     filepath.Join(dir, "gossip.key"),
		ca:      filepath.Join(dir, "ca.crt"),
		cert:    filepath.Join(dir, "tls.crt"),
		certKey: filepath.Join(dir, "tls.key"),
	}
	gossip := make([]byte, 32)
	rand.Read(gossip)
	write(t, s.key, []byte(base64.StdEncoding.EncodeToString(gossip)+"\n"))

	caKey, caDER := certificate(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: "wizard mesh CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign,
	}, nil, nil)
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leafKey, leafDER := certificate(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: "wizard-mesh"}, DNSNames: []string{"wizard-mesh"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, ca, caKey)
	write(t, s.ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	write(t, s.cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}))
	der, err := x509.MarshalPKCS8PrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	write(t, s.certKey, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	return s
}

// certificate signs tmpl with parent's key (itself when parent is nil)
// and returns the new key and the certificate's DER.
func certificate(t *testing.T, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
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

func write(t *testing.T, file string, b []byte) {
	t.Helper()
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
