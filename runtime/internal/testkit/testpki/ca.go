package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/url"
	"testing"
	"time"
)

// CA is a certificate authority made for one test, with a server and a
// client certificate it issued for 127.0.0.1 and localhost.
type CA struct {
	Pool   *x509.CertPool  // trusts the CA alone
	Server tls.Certificate // for server authentication
	Client tls.Certificate // for client authentication
	Other  tls.Certificate // another client's, from the same CA

	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// New makes a CA and its two certificates, failing t on error.
func New(t testing.TB) *CA {
	t.Helper()
	now := time.Now()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: "wizard test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	c := &CA{Pool: x509.NewCertPool(), cert: ca, key: key}
	c.Pool.AddCert(ca)
	c.Server = c.leaf(t, "server", "", x509.ExtKeyUsageServerAuth)
	c.Client = c.leaf(t, "client", "", x509.ExtKeyUsageClientAuth)
	c.Other = c.leaf(t, "other client", "", x509.ExtKeyUsageClientAuth)
	return c
}

// leaf issues a certificate for 127.0.0.1 and localhost, named name,
// naming node id by the URI wizard://node/<id> unless id is "".
func (c *CA) leaf(t testing.TB, name, id string, usage ...x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	now := time.Now()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	if id != "" {
		tmpl.URIs = []*url.URL{{Scheme: "wizard", Host: "node", Path: "/" + id}}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der, c.cert.Raw}, PrivateKey: key}
}

// Node issues a node's certificate, for server and client
// authentication, naming node id as the runtime reads it
// (runtime.NodeURI); "" names none.
func (c *CA) Node(t testing.TB, id string) tls.Certificate {
	t.Helper()
	return c.leaf(t, "node "+id, id, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
}

// NodeConfigs returns the TLS configurations of a node of a mutual TLS
// mesh that presents cert: its server's, requiring a client certificate
// from the CA, and its client's, trusting the CA.
func (c *CA) NodeConfigs(cert tls.Certificate) (server, client *tls.Config) {
	server = c.MutualServerConfig()
	server.Certificates = []tls.Certificate{cert}
	client = c.ClientConfig()
	client.Certificates = []tls.Certificate{cert}
	return server, client
}

// ServerConfig serves the server certificate.
func (c *CA) ServerConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{c.Server}}
}

// MutualServerConfig serves the server certificate and requires a client
// certificate from the CA.
func (c *CA) MutualServerConfig() *tls.Config {
	cfg := c.ServerConfig()
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	cfg.ClientCAs = c.Pool
	return cfg
}

// ClientConfig trusts the CA and presents no certificate.
func (c *CA) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: c.Pool}
}

// ClientCertConfig trusts the CA and presents the client certificate.
func (c *CA) ClientCertConfig() *tls.Config {
	cfg := c.ClientConfig()
	cfg.Certificates = []tls.Certificate{c.Client}
	return cfg
}

// OtherClientCertConfig trusts the CA and presents the other client's
// certificate.
func (c *CA) OtherClientCertConfig() *tls.Config {
	cfg := c.ClientConfig()
	cfg.Certificates = []tls.Certificate{c.Other}
	return cfg
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
