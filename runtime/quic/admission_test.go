package quic_test

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	quicgo "github.com/quic-go/quic-go"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/quic"
)

// sourceDialer dials QUIC connections from several local IPs, from one
// UDP socket per IP.
type sourceDialer struct {
	t  *testing.T
	mu sync.Mutex
	tr map[string]*quicgo.Transport
}

// streamConn is a connection's one stream; closing it closes the
// connection.
type streamConn struct {
	*quicgo.Stream
	qc *quicgo.Conn
}

func (s streamConn) Close() error { return s.qc.CloseWithError(0, "") }

func (d *sourceDialer) transport(from string) (*quicgo.Transport, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if tr, ok := d.tr[from]; ok {
		return tr, nil
	}
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(from)})
	if err != nil {
		return nil, err
	}
	tr := &quicgo.Transport{Conn: udp}
	d.t.Cleanup(func() {
		tr.Close()
		udp.Close()
	})
	d.tr[from] = tr
	return tr, nil
}

// dial opens a connection to addr from the IP from and a stream on it.
func (d *sourceDialer) dial(ctx context.Context, addr, from string) (transporttest.RawConn, error) {
	tr, err := d.transport(from)
	if err != nil {
		return nil, err
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	tlsConf := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{quic.ALPN}}
	qc, err := tr.Dial(ctx, ua, tlsConf, &quicgo.Config{KeepAlivePeriod: time.Second})
	if err != nil {
		return nil, err
	}
	s, err := qc.OpenStreamSync(ctx)
	if err != nil {
		qc.CloseWithError(0, "")
		return nil, err
	}
	return streamConn{s, qc}, nil
}

// TestActiveConnectionsLeaveRoom (issue 27, item 3): a listener full of
// QUIC connections from a few IPs that all stay active, with a call now
// and then or with one call in flight each, still serves a new caller
// from another IP: the IP with the most connections gives one up.
func TestActiveConnectionsLeaveRoom(t *testing.T) {
	const limit = 72
	for _, tt := range []struct {
		name string
		busy bool
	}{
		{"calling", false},
		{"one call in flight each", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := transporttest.NewServer(t, newTransport(t, quic.WithInsecureSelfSigned(), quic.WithMaxConns(limit)))
			d := &sourceDialer{t: t, tr: map[string]*quicgo.Transport{}}
			served := transporttest.Admission(t, srv, d.dial, limit, tt.busy, nil)
			t.Logf("the new caller's calls served: %d of 50", served)
			if served != 50 {
				t.Errorf("the new caller's calls served: %d of 50, want all", served)
			}
		})
	}
}
