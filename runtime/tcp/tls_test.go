package tcp_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue returns a leaf certificate for 127.0.0.1 signed by ca, for a
// server or a client.
func (ca *testCA) issue(t *testing.T, name string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: key}
}

// tlsServer starts a node serving role:tls over TLS with cfg.
func tlsServer(t *testing.T, cfg *tls.Config, opts ...tcp.Option) *runtime.Node {
	t.Helper()
	srv := newServer(t, runtime.WithTransport(tcp.New(append([]tcp.Option{tcp.WithServerTLS(cfg)}, opts...)...)))
	mustAdd(t, srv, "role:tls", func(ctx context.Context, r runtime.Request) (any, error) { return "secret", nil })
	return srv
}

func callTLS(t *testing.T, cl *runtime.Node) {
	t.Helper()
	res, err := cl.ActE(t.Context(), "role:tls", nil)
	if err != nil || res.Value() != "secret" {
		t.Fatalf("call over TLS = %v, %v", res.Value(), err)
	}
}

// dialFails checks that tr cannot connect to addr, without hanging.
func dialFails(t *testing.T, tr *tcp.Transport, addr string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // a guard
	defer cancel()
	c, err := tr.Dial(ctx, addr)
	if err == nil {
		c.Close()
		t.Fatal("Dial succeeded")
	}
	if ctx.Err() != nil {
		t.Fatalf("Dial hung until the guard: %v", err)
	}
	if !errors.Is(err, runtime.ErrNotSent) {
		t.Errorf("Dial = %v, want an error wrapping ErrNotSent", err)
	}
	return err
}

func TestTLS(t *testing.T) {
	ca := newCA(t, "wizard test CA")
	srv := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{ca.issue(t, "server", x509.ExtKeyUsageServerAuth)}})

	good := tcp.New(tcp.WithClientTLS(&tls.Config{RootCAs: ca.pool}))
	cl := newClientWith(t, "role:tls", []runtime.Option{runtime.WithTransport(good)}, srv.Addr())
	callTLS(t, cl)

	t.Run("plain client", func(t *testing.T) {
		dialFails(t, tcp.New(), srv.Addr())
	})
	t.Run("client trusting another CA", func(t *testing.T) {
		other := newCA(t, "other CA")
		dialFails(t, tcp.New(tcp.WithClientTLS(&tls.Config{RootCAs: other.pool})), srv.Addr())
	})
	t.Run("wrong server name", func(t *testing.T) {
		dialFails(t, tcp.New(tcp.WithClientTLS(&tls.Config{RootCAs: ca.pool, ServerName: "elsewhere.example"})), srv.Addr())
	})
	t.Run("TLS client to a plain server", func(t *testing.T) {
		plain := newServer(t)
		dialFails(t, good, plain.Addr())
	})
	// The refused clients did not disturb the good one.
	callTLS(t, cl)
}

func TestMutualTLS(t *testing.T) {
	ca := newCA(t, "wizard test CA")
	var sink logSink
	srv := tlsServer(t, &tls.Config{
		Certificates: []tls.Certificate{ca.issue(t, "server", x509.ExtKeyUsageServerAuth)},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca.pool,
	}, tcp.WithLogger(sink.logger()))

	good := tcp.New(tcp.WithClientTLS(&tls.Config{
		RootCAs:      ca.pool,
		Certificates: []tls.Certificate{ca.issue(t, "client", x509.ExtKeyUsageClientAuth)},
	}))
	cl := newClientWith(t, "role:tls", []runtime.Option{runtime.WithTransport(good)}, srv.Addr())
	callTLS(t, cl)

	t.Run("client without a certificate", func(t *testing.T) {
		refused := sink.seen("certificate")
		dialFails(t, tcp.New(tcp.WithClientTLS(&tls.Config{RootCAs: ca.pool})), srv.Addr())
		recv(t, refused) // the server logged why
	})
	t.Run("client certificate from another CA", func(t *testing.T) {
		other := newCA(t, "other CA")
		dialFails(t, tcp.New(tcp.WithClientTLS(&tls.Config{
			RootCAs:      ca.pool,
			Certificates: []tls.Certificate{other.issue(t, "intruder", x509.ExtKeyUsageClientAuth)},
		})), srv.Addr())
	})
	callTLS(t, cl)
}
