package quic_test

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	quicgo "github.com/quic-go/quic-go"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpki"
	"github.com/wizardmesh/wizard/runtime/quic"
)

// TestNew: New accepts every valid option and refuses each invalid one
// with an error that starts with the package and names the option and
// its argument.
func TestNew(t *testing.T) {
	p := testpki.New(t)
	good := []struct {
		name string
		opts []quic.Option
	}{
		{"none", nil},
		{"server TLS", []quic.Option{quic.WithServerTLS(p.ServerConfig())}},
		{"server TLS by callback", []quic.Option{quic.WithServerTLS(&tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, nil }})}},
		{"client TLS", []quic.Option{quic.WithClientTLS(&tls.Config{})}},
		{"self-signed", []quic.Option{quic.WithInsecureSelfSigned()}},
		{"QUIC config", []quic.Option{quic.WithQUICConfig(&quicgo.Config{})}},
		{"default streams", []quic.Option{quic.WithStreams(0)}},
		{"one stream", []quic.Option{quic.WithStreams(1)}},
		{"most streams", []quic.Option{quic.WithStreams(16)}},
		{"default stream fill", []quic.Option{quic.WithStreamFill(0)}},
		{"streams in turn", []quic.Option{quic.WithStreamFill(-1)}},
		{"a call per stream", []quic.Option{quic.WithStreamFill(1)}},
		{"default frame size", []quic.Option{quic.WithMaxFrameSize(0)}},
		{"smallest frame size", []quic.Option{quic.WithMaxFrameSize(14)}},
		{"default keep-alive", []quic.Option{quic.WithKeepAlive(0, 0)}},
		{"no pings", []quic.Option{quic.WithKeepAlive(-1, 0)}},
		{"shortest keep-alive", []quic.Option{quic.WithKeepAlive(10*time.Millisecond, 10*time.Millisecond)}},
		{"default bounds per connection", []quic.Option{quic.WithMaxConnInFlight(0), quic.WithMaxConnQueued(0), quic.WithServeTimeout(0)}},
		{"smallest bounds per connection", []quic.Option{quic.WithMaxConnInFlight(1), quic.WithMaxConnQueued(1), quic.WithServeTimeout(time.Millisecond)}},
		{"nil logger", []quic.Option{quic.WithLogger(nil)}},
		{"logger", []quic.Option{quic.WithLogger(slog.New(slog.DiscardHandler))}},
		{"default connection limits", []quic.Option{quic.WithMaxConns(0), quic.WithMaxConnsPerIP(0), quic.WithIdleTimeout(0)}},
		{"connection limits", []quic.Option{quic.WithMaxConns(20), quic.WithMaxConnsPerIP(20), quic.WithIdleTimeout(10 * time.Millisecond)}},
		{"per-IP limit alone", []quic.Option{quic.WithMaxConnsPerIP(100000)}},
		{"no idle timeout", []quic.Option{quic.WithIdleTimeout(-1)}},
	}
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := quic.New(tt.opts...); err != nil {
				t.Fatalf("New: %v", err)
			}
		})
	}

	bad := []struct {
		name string
		opts []quic.Option
		want string
	}{
		{"nil option", []quic.Option{nil, quic.WithInsecureSelfSigned()}, "wizard: quic: option 1 of 2 is nil"},
		{"nil server TLS", []quic.Option{quic.WithServerTLS(nil)}, "wizard: quic: WithServerTLS(nil): no configuration; a listener needs one with a certificate (or WithInsecureSelfSigned, for development)"},
		{"server TLS without a certificate", []quic.Option{quic.WithServerTLS(&tls.Config{})}, "wizard: quic: WithServerTLS: the configuration has no certificate: set Certificates, GetCertificate or GetConfigForClient"},
		{"nil client TLS", []quic.Option{quic.WithClientTLS(nil)}, "wizard: quic: WithClientTLS(nil): no configuration; leave the option out to verify servers against the system roots"},
		{"nil QUIC config", []quic.Option{quic.WithQUICConfig(nil)}, "wizard: quic: WithQUICConfig(nil): no configuration; leave the option out for the transport's defaults"},
		{"negative streams", []quic.Option{quic.WithStreams(-1)}, "wizard: quic: WithStreams(-1): want 0 for the default (4) or 1 to 16"},
		{"too many streams", []quic.Option{quic.WithStreams(17)}, "wizard: quic: WithStreams(17): want 0 for the default (4) or 1 to 16"},
		{"negative frame size", []quic.Option{quic.WithMaxFrameSize(-1)}, "wizard: quic: WithMaxFrameSize(-1): want 0 for the default (4 MiB) or 14 to 4294967295 bytes"},
		{"frame size below a frame", []quic.Option{quic.WithMaxFrameSize(3)}, "wizard: quic: WithMaxFrameSize(3): want 0 for the default (4 MiB) or 14 to 4294967295 bytes"},
		{"tiny ping interval", []quic.Option{quic.WithKeepAlive(time.Nanosecond, 0)}, "wizard: quic: WithKeepAlive(1ns, 0s): the interval is below 10ms; want a negative interval for no pings, 0 for the default (15s) or at least 10ms"},
		{"negative ping timeout", []quic.Option{quic.WithKeepAlive(time.Second, -1)}, "wizard: quic: WithKeepAlive(1s, -1ns): the timeout cannot be negative; want 0 for the default (10s) or at least 10ms"},
		{"tiny ping timeout", []quic.Option{quic.WithKeepAlive(-1, time.Millisecond)}, "wizard: quic: WithKeepAlive(-1ns, 1ms): the timeout is below 10ms; want 0 for the default (10s) or at least 10ms"},
		{"negative connection limit", []quic.Option{quic.WithMaxConns(-1)}, "wizard: quic: WithMaxConns(-1): want 0 for the default (half the file-descriptor limit, at most 4096) or a positive number"},
		{"negative per-IP limit", []quic.Option{quic.WithMaxConnsPerIP(-1)}, "wizard: quic: WithMaxConnsPerIP(-1): want 0 for the default (a quarter of the maximum) or a positive number"},
		{"per-IP limit above the limit", []quic.Option{quic.WithMaxConnsPerIP(30), quic.WithMaxConns(20)}, "wizard: quic: WithMaxConnsPerIP(30): above WithMaxConns(20)"},
		{"tiny idle timeout", []quic.Option{quic.WithIdleTimeout(time.Millisecond)}, "wizard: quic: WithIdleTimeout(1ms): want 0 for the default (10m0s), a negative value for none, or at least 10ms"},
		{"negative in-flight bound", []quic.Option{quic.WithMaxConnInFlight(-1)}, "wizard: quic: WithMaxConnInFlight(-1): want 0 for the default (256) or at least 1"},
		{"negative queued bound", []quic.Option{quic.WithMaxConnQueued(-1)}, "wizard: quic: WithMaxConnQueued(-1): want 0 for the default (1 MiB) or at least 1 byte"},
		{"negative serve timeout", []quic.Option{quic.WithServeTimeout(-time.Second)}, "wizard: quic: WithServeTimeout(-1s): want 0 for the default (30s) or at least 1ms"},
		{"tiny serve timeout", []quic.Option{quic.WithServeTimeout(time.Microsecond)}, "wizard: quic: WithServeTimeout(1µs): want 0 for the default (30s) or at least 1ms"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := quic.New(tt.opts...)
			if err == nil {
				t.Fatalf("New = %v, nil; want an error", tr)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("New's error (-want +got):\n%s", diff)
			}
		})
	}
}

// TestListenWithoutCertificate: a transport without a server certificate
// dials (New accepts it) but cannot listen, and Listen says what to set.
func TestListenWithoutCertificate(t *testing.T) {
	tr := newTransport(t)
	l, err := tr.Listen("127.0.0.1:0", nil)
	if err == nil {
		l.Close()
		t.Fatal("Listen succeeded")
	}
	want := "wizard: quic: listening needs a server certificate: configure one with WithServerTLS (QUIC always runs TLS 1.3), or use WithInsecureSelfSigned for development"
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("Listen's error (-want +got):\n%s", diff)
	}
}

// TestDialError: a dial that fails (here, no server answers before ctx
// ends) matches ErrNotSent and says where and why.
func TestDialError(t *testing.T) {
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	addr := udp.LocalAddr().String()
	udp.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err = newTransport(t, quic.WithInsecureSelfSigned()).Dial(ctx, addr)
	if !errors.Is(err, runtime.ErrNotSent) {
		t.Fatalf("Dial = %v, want an error matching ErrNotSent", err)
	}
	if prefix := "wizard: quic: dial " + addr + ": call not sent: "; !strings.HasPrefix(err.Error(), prefix) {
		t.Errorf("Dial = %q, want %q and the reason", err, prefix)
	}
}
