package tcp_test

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpki"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// tlsServer starts a node serving role:tls over TLS with cfg.
func tlsServer(t *testing.T, cfg *tls.Config, opts ...tcp.Option) *runtime.Node {
	t.Helper()
	srv := newServer(t, runtime.WithTransport(newTransport(t, append([]tcp.Option{tcp.WithServerTLS(cfg)}, opts...)...)))
	transporttest.MustAdd(t, srv, "role:tls", func(ctx context.Context, r runtime.Request) (any, error) { return "secret", nil })
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
	ca := testpki.New(t)
	srv := tlsServer(t, ca.ServerConfig())

	good := newTransport(t, tcp.WithClientTLS(ca.ClientConfig()))
	cl := newClientWith(t, "role:tls", []runtime.Option{runtime.WithTransport(good)}, srv.Addr())
	callTLS(t, cl)

	t.Run("plain client", func(t *testing.T) {
		dialFails(t, newTransport(t), srv.Addr())
	})
	t.Run("client trusting another CA", func(t *testing.T) {
		other := testpki.New(t)
		dialFails(t, newTransport(t, tcp.WithClientTLS(other.ClientConfig())), srv.Addr())
	})
	t.Run("wrong server name", func(t *testing.T) {
		dialFails(t, newTransport(t, tcp.WithClientTLS(&tls.Config{RootCAs: ca.Pool, ServerName: "elsewhere.example"})), srv.Addr())
	})
	t.Run("TLS client to a plain server", func(t *testing.T) {
		plain := newServer(t)
		dialFails(t, good, plain.Addr())
	})
	// The refused clients did not disturb the good one.
	callTLS(t, cl)
}

func TestMutualTLS(t *testing.T) {
	ca := testpki.New(t)
	var sink transporttest.Log
	srv := tlsServer(t, ca.MutualServerConfig(), tcp.WithLogger(sink.Logger()))

	good := newTransport(t, tcp.WithClientTLS(ca.ClientCertConfig()))
	cl := newClientWith(t, "role:tls", []runtime.Option{runtime.WithTransport(good)}, srv.Addr())
	callTLS(t, cl)

	t.Run("client without a certificate", func(t *testing.T) {
		refused := sink.Seen("certificate")
		dialFails(t, newTransport(t, tcp.WithClientTLS(ca.ClientConfig())), srv.Addr())
		testwait.Recv(t, refused) // the server logged why
	})
	t.Run("client certificate from another CA", func(t *testing.T) {
		other := testpki.New(t) // another CA
		dialFails(t, newTransport(t, tcp.WithClientTLS(&tls.Config{
			RootCAs:      ca.Pool,
			Certificates: []tls.Certificate{other.Client},
		})), srv.Addr())
	})
	callTLS(t, cl)
}
