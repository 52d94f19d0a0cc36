//go:build linux

package podsim_test

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

// writeSecrets writes the files of the mesh's Secrets, as the manifests
// mount them, into dir: the gossip key, and a CA with one certificate
// for every member, named wizard-mesh; it returns the mesh flags that
// name them.
func writeSecrets(t *testing.T, dir string) []string {
	t.Helper()
	key, ca, cert, certKey := filepath.Join(dir, "gossip.key"), filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	gossip := make([]byte, 32)
	rand.Read(gossip)
	write(t, key, []byte(base64.StdEncoding.EncodeToString(gossip)+"\n"))
	caKey, caDER := certificate(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: "wizard mesh CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign,
	}, nil, nil)
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leafKey, leafDER := certificate(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: "wizard-mesh"}, DNSNames: []string{"wizard-mesh"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, caCert, caKey)
	write(t, ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	write(t, cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}))
	der, err := x509.MarshalPKCS8PrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	write(t, certKey, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	return []string{"-gossip-key-file=" + key, "-tls-cert=" + cert, "-tls-key=" + certKey, "-tls-ca=" + ca, "-tls-server-name=wizard-mesh"}
}

// certificate signs tmpl with parent's key (itself when parent is nil)
// and returns the new key and the certificate's DER.
func certificate(t *testing.T, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, []byte) {
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

func write(t *testing.T, file string, b []byte) {
	t.Helper()
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
