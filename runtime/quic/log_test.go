package quic_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	quicgo "github.com/quic-go/quic-go"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/quic"
)

// rawDialer opens QUIC connections of its own to a node, from one UDP
// socket, to write what it likes on their streams.
type rawDialer struct {
	t  *testing.T
	tr *quicgo.Transport
}

func newRawDialer(t *testing.T) *rawDialer {
	t.Helper()
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	tr := &quicgo.Transport{Conn: udp}
	t.Cleanup(func() {
		tr.Close()
		udp.Close()
	})
	return &rawDialer{t: t, tr: tr}
}

// dial opens a QUIC connection to addr; the wizard handshake is the
// caller's.
func (d *rawDialer) dial(addr string) (*quicgo.Conn, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		d.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(d.t.Context(), testwait.Guard)
	defer cancel()
	tlsConf := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{quic.ALPN}}
	return d.tr.Dial(ctx, ua, tlsConf, &quicgo.Config{KeepAlivePeriod: time.Second})
}

// failedHandshakes is how many bad handshakes TestHandshakeLogLimited
// sends.
const failedHandshakes = 200

// TestHandshakeLogLimited (finding 8): 200 streams that fail the wizard
// handshake give a bounded number of warnings, each naming the remote
// address, and a summary that counts the others; before, each gave a
// warning of its own without the address.
func TestHandshakeLogLimited(t *testing.T) {
	var logs testlog.Buffer
	srv := transporttest.NewServer(t, newTransport(t, quic.WithInsecureSelfSigned(), quic.WithLogger(logs.Logger())))
	d := newRawDialer(t)
	start := time.Now()
	for range failedHandshakes {
		qc, err := d.dial(srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		s, err := qc.OpenStreamSync(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		s.Write([]byte("XXXX\x01\x00\x00\x00"))
		s.SetReadDeadline(time.Now().Add(testwait.Guard))
		if _, err := io.Copy(io.Discard, s); err != nil {
			t.Fatalf("reading until the node ends the stream: %v", err)
		}
		qc.CloseWithError(0, "")
	}
	elapsed := time.Since(start)
	srv.Close() // logs what is still suppressed
	testlog.CheckLimited(t, logs.String(), "bad handshake magic", "127.0.0.1:", failedHandshakes, elapsed)
}
