package quic_test

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"strings"
	"testing"

	quicgo "github.com/quic-go/quic-go"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpki"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/quic"
	conformance "github.com/wizardmesh/wizard/runtime/transporttest"
)

// newTransport returns a QUIC transport made with opts, which must be
// valid.
func newTransport(t testing.TB, opts ...quic.Option) *quic.Transport {
	t.Helper()
	tr, err := quic.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// transport returns a QUIC transport that serves p's server certificate
// and trusts p's CA.
func transport(t testing.TB, p *testpki.CA, opts ...quic.Option) *quic.Transport {
	t.Helper()
	return newTransport(t, append([]quic.Option{quic.WithServerTLS(p.ServerConfig()), quic.WithClientTLS(p.ClientConfig())}, opts...)...)
}

// neg is a typed handler: it negates an Int64Value.
var neg = runtime.NewUnaryHandler(func(ctx context.Context, r *wrapperspb.Int64Value) (*wrapperspb.Int64Value, error) {
	return wrapperspb.Int64(-r.GetValue()), nil
})

// TestConformance runs the transport conformance suite over QUIC.
func TestConformance(t *testing.T) {
	p := testpki.New(t)
	conformance.Run(t, func(t testing.TB, log *slog.Logger) runtime.Transport {
		return transport(t, p, quic.WithLogger(log))
	})
}

// TestLoadFewStreams runs the suite's concurrent load over connections of
// three streams, fewer than the callers: they queue for streams.
func TestLoadFewStreams(t *testing.T) {
	p := testpki.New(t)
	transporttest.Load(t, func(t testing.TB, log *slog.Logger) runtime.Transport {
		return transport(t, p, quic.WithStreams(3), quic.WithLogger(log))
	})
}

// TestMutualTLS: a server that requires client certificates serves a
// client that has one and refuses one that has none; a client refuses a
// server its CA did not sign.
func TestMutualTLS(t *testing.T) {
	p := testpki.New(t)
	srvT := newTransport(t, quic.WithServerTLS(p.MutualServerConfig()))
	srv := transporttest.NewServer(t, srvT)
	transporttest.MustAdd(t, srv, "role:math,cmd:neg", neg)

	t.Run("client with a certificate", func(t *testing.T) {
		cl := transporttest.NewClient(t, newTransport(t, quic.WithClientTLS(p.ClientCertConfig())), "role:math,cmd:neg", nil, srv.Addr())
		c := transporttest.TypedClient[wrapperspb.Int64Value, wrapperspb.Int64Value](t, cl, "role:math,cmd:neg")
		if r, err := c.Call(t.Context(), wrapperspb.Int64(2)); err != nil || r.GetValue() != -2 {
			t.Fatalf("neg = %v, %v", r, err)
		}
	})
	refused := func(t *testing.T, tr *quic.Transport, want string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), testwait.Guard)
		defer cancel()
		conn, err := tr.Dial(ctx, srv.Addr())
		if err == nil {
			conn.Close()
			t.Fatal("Dial succeeded")
		}
		if !errors.Is(err, runtime.ErrNotSent) || !strings.Contains(err.Error(), want) {
			t.Errorf("Dial: %v; want ErrNotSent and %q", err, want)
		}
	}
	t.Run("client without a certificate", func(t *testing.T) {
		refused(t, newTransport(t, quic.WithClientTLS(p.ClientConfig())), "certificate required")
	})
	t.Run("server from another CA", func(t *testing.T) {
		other := testpki.New(t)
		refused(t, newTransport(t, quic.WithClientTLS(other.ClientCertConfig())), "certificate signed by unknown authority")
	})
}

// TestALPN: a client offering another application protocol is refused,
// and so is a server that speaks another one.
func TestALPN(t *testing.T) {
	p := testpki.New(t)
	srv := transporttest.NewServer(t, transport(t, p))

	t.Run("client offers h3", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), testwait.Guard)
		defer cancel()
		cfg := p.ClientConfig()
		cfg.NextProtos = []string{"h3"}
		qc, err := quicgo.DialAddr(ctx, srv.Addr(), cfg, nil)
		if err == nil {
			qc.CloseWithError(0, "")
			t.Fatal("a client offering h3 was served")
		}
		if !strings.Contains(err.Error(), "application protocol") {
			t.Errorf("dial: %v", err)
		}
	})
	t.Run("server speaks h3", func(t *testing.T) {
		cfg := p.ServerConfig()
		cfg.NextProtos = []string{"h3"}
		ql, err := quicgo.ListenAddr("127.0.0.1:0", cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ql.Close()
		ctx, cancel := context.WithTimeout(t.Context(), testwait.Guard)
		defer cancel()
		conn, err := transport(t, p).Dial(ctx, ql.Addr().String())
		if err == nil {
			conn.Close()
			t.Fatal("Dial to an h3 server succeeded")
		}
		if !errors.Is(err, runtime.ErrNotSent) || !strings.Contains(err.Error(), "application protocol") {
			t.Errorf("Dial: %v", err)
		}
	})
}

// TestInsecureSelfSigned: nodes that both use WithInsecureSelfSigned talk;
// a client that verifies certificates refuses the self-signed server.
func TestInsecureSelfSigned(t *testing.T) {
	tr := newTransport(t, quic.WithInsecureSelfSigned())
	srv := transporttest.NewServer(t, tr)
	transporttest.MustAdd(t, srv, "role:math,cmd:neg", neg)
	cl := transporttest.NewClient(t, tr, "role:math,cmd:neg", nil, srv.Addr())
	c := transporttest.TypedClient[wrapperspb.Int64Value, wrapperspb.Int64Value](t, cl, "role:math,cmd:neg")
	if r, err := c.Call(t.Context(), wrapperspb.Int64(5)); err != nil || r.GetValue() != -5 {
		t.Fatalf("neg = %v, %v", r, err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), testwait.Guard)
	defer cancel()
	conn, err := newTransport(t, quic.WithClientTLS(&tls.Config{RootCAs: testpki.New(t).Pool})).Dial(ctx, srv.Addr())
	if err == nil {
		conn.Close()
		t.Fatal("a verifying client accepted a self-signed server")
	}
	if !errors.Is(err, runtime.ErrNotSent) {
		t.Errorf("Dial: %v", err)
	}
}
