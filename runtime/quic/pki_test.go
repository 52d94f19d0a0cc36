package quic_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"testing"
	"time"
)

// pki is a test certificate authority with a server certificate for
// 127.0.0.1 and a client certificate.
type pki struct {
	pool   *x509.CertPool
	server tls.Certificate
	client tls.Certificate
}

func newPKI(t testing.TB) *pki {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "wizard test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(name string, usage x509.ExtKeyUsage) tls.Certificate {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			Subject:     pkix.Name{CommonName: name},
			NotBefore:   now.Add(-time.Hour),
			NotAfter:    now.Add(24 * time.Hour),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			DNSNames:    []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	p := &pki{pool: x509.NewCertPool(), server: leaf("server", x509.ExtKeyUsageServerAuth), client: leaf("client", x509.ExtKeyUsageClientAuth)}
	p.pool.AddCert(ca)
	return p
}

// serverTLS serves the server certificate; with mutual, it requires a
// client certificate from the CA.
func (p *pki) serverTLS(mutual bool) *tls.Config {
	cfg := &tls.Config{Certificates: []tls.Certificate{p.server}}
	if mutual {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = p.pool
	}
	return cfg
}

// clientTLS trusts the CA; with cert, it presents the client certificate.
func (p *pki) clientTLS(cert bool) *tls.Config {
	cfg := &tls.Config{RootCAs: p.pool}
	if cert {
		cfg.Certificates = []tls.Certificate{p.client}
	}
	return cfg
}
