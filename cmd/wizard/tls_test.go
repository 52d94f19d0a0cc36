package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testPKI is a CA and one leaf certificate for every node and the
// caller, valid for 127.0.0.1, written as PEM files for the flags.
type testPKI struct {
	server, client *tls.Config // the nodes'
	dir            string      // ca.pem, cli.pem, cli-key.pem
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "wizard test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	leaf := func(name string, serial int64) (tls.Certificate, []byte, []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour),
			NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return c, certPEM, keyPEM
	}
	node, _, _ := leaf("node", 2)
	_, cliPEM, cliKey := leaf("wizard-cli", 3)
	p := &testPKI{dir: t.TempDir(),
		server: &tls.Config{Certificates: []tls.Certificate{node}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert},
		client: &tls.Config{Certificates: []tls.Certificate{node}, RootCAs: pool}}
	for name, b := range map[string][]byte{"ca.pem": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), "cli.pem": cliPEM, "cli-key.pem": cliKey} {
		if err := os.WriteFile(filepath.Join(p.dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestTLSAndSegment: a mesh that requires mutual TLS and gossips in a
// segment: wizard joins it with the CA, its certificate and the segment,
// and fails to without the certificate or in another segment.
func TestTLSAndSegment(t *testing.T) {
	pki := newTestPKI(t)
	m := &testMesh{kind: "tcp", slow: make(chan struct{}, 1), pki: pki, segment: "blue"}
	m.startAll(t)
	base := []string{"--seeds", m.gossip, "--preset", "fast", "--segment", "blue", "--tls-ca", filepath.Join(pki.dir, "ca.pem")}
	mtls := append(append([]string{}, base...), "--tls-cert", filepath.Join(pki.dir, "cli.pem"), "--tls-key", filepath.Join(pki.dir, "cli-key.pem"))

	r := wizard(t, "", append(append([]string{"act"}, mtls...), "cmd:sum,role:math", "values:[2,2]")...)
	if r.code != 0 || !strings.Contains(r.out, `"sum": 4`) {
		t.Errorf("act over mutual TLS: exit %d, %s%s", r.code, r.out, r.err)
	}
	r = wizard(t, "", append([]string{"members", "--output", "json"}, mtls...)...)
	var ms []memberJSON
	if err := json.Unmarshal([]byte(r.out), &ms); err != nil || len(ms) != 4 {
		t.Fatalf("members: %s (%v)", r.out, err)
	}
	for _, mb := range ms {
		if mb.Segment != "blue" {
			t.Errorf("member %s: segment %q, want blue", mb.ID, mb.Segment)
		}
	}
	r = wizard(t, "", append([]string{"members", "--timeout", "1s"}, base...)...)
	if r.code != 64+14 || !strings.Contains(r.err, "no node of the mesh answered") {
		t.Errorf("without a client certificate: exit %d, %s; want the nodes named, not connected", r.code, r.err)
	}
	other := []string{"members", "--seeds", m.gossip, "--preset", "fast", "--segment", "red", "--timeout", "1s"}
	r = wizard(t, "", append(other, mtls[6:]...)...)
	if r.code != 64+14 || !strings.Contains(r.err, "--segment") {
		t.Errorf("in another segment: exit %d, %s", r.code, r.err)
	}
	r = wizard(t, "", append([]string{"members", "--tls-cert", filepath.Join(pki.dir, "cli.pem")}, base...)...)
	if r.code != 2 || !strings.Contains(r.err, "--tls-cert and --tls-key go together") {
		t.Errorf("a certificate without its key: exit %d, %s", r.code, r.err)
	}
}
