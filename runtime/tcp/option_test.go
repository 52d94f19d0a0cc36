package tcp_test

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpki"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// TestNew: New accepts every valid option and refuses each invalid one
// with an error that starts with the package and names the option and
// its argument.
func TestNew(t *testing.T) {
	ca := testpki.New(t)
	good := []struct {
		name string
		opts []tcp.Option
	}{
		{"none", nil},
		{"server TLS", []tcp.Option{tcp.WithServerTLS(ca.ServerConfig())}},
		{"server TLS by callback", []tcp.Option{tcp.WithServerTLS(&tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, nil }})}},
		{"client TLS", []tcp.Option{tcp.WithClientTLS(&tls.Config{})}},
		{"default frame size", []tcp.Option{tcp.WithMaxFrameSize(0)}},
		{"smallest frame size", []tcp.Option{tcp.WithMaxFrameSize(14)}},
		{"largest frame size", []tcp.Option{tcp.WithMaxFrameSize(1<<32 - 1)}},
		{"default keep-alive", []tcp.Option{tcp.WithKeepAlive(0, 0)}},
		{"no pings", []tcp.Option{tcp.WithKeepAlive(-1, 0)}},
		{"shortest keep-alive", []tcp.Option{tcp.WithKeepAlive(10*time.Millisecond, 10*time.Millisecond)}},
		{"default bounds per connection", []tcp.Option{tcp.WithMaxConnInFlight(0), tcp.WithMaxConnQueued(0), tcp.WithServeTimeout(0)}},
		{"smallest bounds per connection", []tcp.Option{tcp.WithMaxConnInFlight(1), tcp.WithMaxConnQueued(1), tcp.WithServeTimeout(time.Millisecond)}},
		{"nil logger", []tcp.Option{tcp.WithLogger(nil)}},
		{"logger", []tcp.Option{tcp.WithLogger(slog.New(slog.DiscardHandler))}},
		{"insecure", []tcp.Option{tcp.WithInsecure()}},
		{"default connection limits", []tcp.Option{tcp.WithMaxConns(0), tcp.WithMaxConnsPerIP(0), tcp.WithIdleTimeout(0)}},
		{"connection limits", []tcp.Option{tcp.WithMaxConns(20), tcp.WithMaxConnsPerIP(20), tcp.WithIdleTimeout(10 * time.Millisecond)}},
		{"per-IP limit alone", []tcp.Option{tcp.WithMaxConnsPerIP(100000)}},
		{"no idle timeout", []tcp.Option{tcp.WithIdleTimeout(-1)}},
	}
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tcp.New(tt.opts...); err != nil {
				t.Fatalf("New: %v", err)
			}
		})
	}

	bad := []struct {
		name string
		opts []tcp.Option
		want string
	}{
		{"nil option", []tcp.Option{tcp.WithLogger(nil), nil}, "wizard: tcp: option 2 of 2 is nil"},
		{"nil server TLS", []tcp.Option{tcp.WithServerTLS(nil)}, "wizard: tcp: WithServerTLS(nil): no configuration; leave the option out to serve plain TCP"},
		{"server TLS without a certificate", []tcp.Option{tcp.WithServerTLS(&tls.Config{})}, "wizard: tcp: WithServerTLS: the configuration has no certificate: set Certificates, GetCertificate or GetConfigForClient"},
		{"nil client TLS", []tcp.Option{tcp.WithClientTLS(nil)}, "wizard: tcp: WithClientTLS(nil): no configuration; leave the option out to dial plain TCP"},
		{"negative frame size", []tcp.Option{tcp.WithMaxFrameSize(-1)}, "wizard: tcp: WithMaxFrameSize(-1): want 0 for the default (4 MiB) or 14 to 4294967295 bytes"},
		{"frame size below a frame", []tcp.Option{tcp.WithMaxFrameSize(13)}, "wizard: tcp: WithMaxFrameSize(13): want 0 for the default (4 MiB) or 14 to 4294967295 bytes"},
		{"frame size above the wire's", []tcp.Option{tcp.WithMaxFrameSize(1 << 32)}, "wizard: tcp: WithMaxFrameSize(4294967296): want 0 for the default (4 MiB) or 14 to 4294967295 bytes"},
		{"tiny ping interval", []tcp.Option{tcp.WithKeepAlive(time.Millisecond, 0)}, "wizard: tcp: WithKeepAlive(1ms, 0s): the interval is below 10ms; want a negative interval for no pings, 0 for the default (15s) or at least 10ms"},
		{"negative ping timeout", []tcp.Option{tcp.WithKeepAlive(0, -time.Second)}, "wizard: tcp: WithKeepAlive(0s, -1s): the timeout cannot be negative; want 0 for the default (10s) or at least 10ms"},
		{"tiny ping timeout", []tcp.Option{tcp.WithKeepAlive(time.Second, time.Microsecond)}, "wizard: tcp: WithKeepAlive(1s, 1µs): the timeout is below 10ms; want 0 for the default (10s) or at least 10ms"},
		{"negative handshake timeout", []tcp.Option{tcp.WithHandshakeTimeout(-1)}, "wizard: tcp: WithHandshakeTimeout(-1ns): the timeout cannot be negative"},
		{"insecure with TLS", []tcp.Option{tcp.WithInsecure(), tcp.WithServerTLS(ca.ServerConfig())}, "wizard: tcp: WithInsecure and WithServerTLS: choose one (WithInsecure serves plain TCP)"},
		{"negative connection limit", []tcp.Option{tcp.WithMaxConns(-1)}, "wizard: tcp: WithMaxConns(-1): want 0 for the default (half the file-descriptor limit, at most 4096) or a positive number"},
		{"negative per-IP limit", []tcp.Option{tcp.WithMaxConnsPerIP(-1)}, "wizard: tcp: WithMaxConnsPerIP(-1): want 0 for the default (a quarter of the maximum) or a positive number"},
		{"per-IP limit above the limit", []tcp.Option{tcp.WithMaxConnsPerIP(30), tcp.WithMaxConns(20)}, "wizard: tcp: WithMaxConnsPerIP(30): above WithMaxConns(20)"},
		{"tiny idle timeout", []tcp.Option{tcp.WithIdleTimeout(time.Millisecond)}, "wizard: tcp: WithIdleTimeout(1ms): want 0 for the default (10m0s), a negative value for none, or at least 10ms"},
		{"negative in-flight bound", []tcp.Option{tcp.WithMaxConnInFlight(-1)}, "wizard: tcp: WithMaxConnInFlight(-1): want 0 for the default (256) or at least 1"},
		{"negative queued bound", []tcp.Option{tcp.WithMaxConnQueued(-1)}, "wizard: tcp: WithMaxConnQueued(-1): want 0 for the default (1 MiB) or at least 1 byte"},
		{"negative serve timeout", []tcp.Option{tcp.WithServeTimeout(-time.Second)}, "wizard: tcp: WithServeTimeout(-1s): want 0 for the default (30s) or at least 1ms"},
		{"tiny serve timeout", []tcp.Option{tcp.WithServeTimeout(time.Microsecond)}, "wizard: tcp: WithServeTimeout(1µs): want 0 for the default (30s) or at least 1ms"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := tcp.New(tt.opts...)
			if err == nil {
				t.Fatalf("New = %v, nil; want an error", tr)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("New's error (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDialError: a refused dial matches ErrNotSent and the system's
// error, and says where and why, once each.
func TestDialError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	_, err = newTransport(t).Dial(t.Context(), addr)
	if !errors.Is(err, runtime.ErrNotSent) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Dial = %v, want an error matching ErrNotSent and ECONNREFUSED", err)
	}
	prefix := "wizard: tcp: dial " + addr + ": call not sent: "
	if got := err.Error(); !strings.HasPrefix(got, prefix) || strings.Count(got, addr) != 1 {
		t.Errorf("Dial = %q, want %q and the reason, the address once", got, prefix)
	}
}

// TestCallError: a call on a closed connection matches ErrNotSent and
// reads "wizard: tcp: <addr>: call not sent: <why>".
func TestCallError(t *testing.T) {
	srv := newServer(t)
	c, err := newTransport(t).Dial(t.Context(), srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	_, err = c.Call(t.Context(), &runtime.Message{Pattern: "a:1"})
	if !errors.Is(err, runtime.ErrNotSent) {
		t.Fatalf("Call = %v, want an error matching ErrNotSent", err)
	}
	want := "wizard: tcp: " + srv.Addr() + ": call not sent: connection closed"
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("Call's error (-want +got):\n%s", diff)
	}
}
