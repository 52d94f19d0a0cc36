package quic_test

import (
	"bufio"
	"context"
	"errors"
	"testing"
	"time"

	quicgo "github.com/quic-go/quic-go"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
	"github.com/wizardmesh/wizard/runtime/quic"
)

// rawStream is a stream of a raw connection, after the wizard
// handshake.
type rawStream struct {
	t  *testing.T
	qc *quicgo.Conn
	s  *quicgo.Stream
	br *bufio.Reader
}

// open dials addr and shakes hands on one stream.
func (d *rawDialer) open(addr string) *rawStream {
	d.t.Helper()
	qc, err := d.dial(addr)
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { qc.CloseWithError(0, "") })
	return openStream(d.t, qc)
}

// openStream opens a stream on qc and shakes hands on it.
func openStream(t *testing.T, qc *quicgo.Conn) *rawStream {
	t.Helper()
	s, err := qc.OpenStreamSync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return handshake(t, qc, s)
}

// handshake shakes hands on s, a new stream of qc.
func handshake(t *testing.T, qc *quicgo.Conn, s *quicgo.Stream) *rawStream {
	t.Helper()
	r := &rawStream{t: t, qc: qc, s: s, br: bufio.NewReader(s)}
	r.write([]byte(wire.Magic + "\x01\x00\x00\x00"))
	s.SetReadDeadline(time.Now().Add(testwait.Guard))
	if err := wire.ReadHandshake(r.br); err != nil {
		t.Fatalf("the node's handshake: %v", err)
	}
	return r
}

func (r *rawStream) write(b []byte) {
	r.t.Helper()
	if _, err := r.s.Write(b); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// next reads the next frame that is not a ping.
func (r *rawStream) next() *wire.Frame {
	r.t.Helper()
	r.s.SetReadDeadline(time.Now().Add(testwait.Guard))
	for {
		f := new(wire.Frame)
		if _, err := wire.ReadFrame(r.br, 0, f, nil); err != nil {
			r.t.Fatalf("reading a frame: %v", err)
		}
		if f.Type != wire.TypePing {
			return f
		}
	}
}

// ping checks that the node answers a ping on r.
func (r *rawStream) ping(id uint64) {
	r.t.Helper()
	r.write(wire.AppendFrame(nil, &wire.Frame{Type: wire.TypePing, ID: id}))
	for {
		if f := r.next(); f.Type == wire.TypePong && f.ID == id {
			return
		}
	}
}

// refused waits until the node closes qc for a connection limit.
func refused(t *testing.T, qc *quicgo.Conn) {
	t.Helper()
	testwait.Recv(t, qc.Context().Done())
	var ae *quicgo.ApplicationError
	if err := context.Cause(qc.Context()); !errors.As(err, &ae) || !ae.Remote || ae.ErrorCode != 2 {
		t.Errorf("connection ended with %v, want the node's application error 2", err)
	}
}

// TestAttackerHoldsConnections (finding 4): an attacker holds as many
// QUIC connections as the listener allows one IP (WithMaxConns(20) less
// the eighth kept for IPs with few connections), idle after the wizard
// handshake or without a stream; a real caller from the same IP still
// connects and calls. Its connection takes the place of the attacker's
// oldest; the attacker's others are still served.
func TestAttackerHoldsConnections(t *testing.T) {
	const limit, held = 20, 20 - 20/8
	for _, tt := range []struct {
		name   string
		stream bool
	}{
		{"idle after the handshake", true},
		{"no stream", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var log transporttest.Log
			srv := transporttest.NewServer(t, newTransport(t, quic.WithInsecureSelfSigned(), quic.WithMaxConns(limit), quic.WithMaxConnsPerIP(limit), quic.WithLogger(log.Logger())))
			transporttest.MustAdd(t, srv, "role:limit,cmd:ping", func(ctx context.Context, r runtime.Request) (any, error) { return "pong", nil })
			d := newRawDialer(t)
			conns := make([]*quicgo.Conn, held)
			streams := make([]*rawStream, held)
			for i := range conns {
				if tt.stream {
					streams[i] = d.open(srv.Addr())
					conns[i] = streams[i].qc
					continue
				}
				qc, err := d.dial(srv.Addr())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { qc.CloseWithError(0, "") })
				conns[i] = qc
			}
			if tt.stream {
				for i, s := range streams {
					s.ping(uint64(i + 1))
				}
			}

			cl := transporttest.NewClient(t, newTransport(t, quic.WithInsecureSelfSigned()), "role:limit,cmd:ping", nil, srv.Addr())
			res, err := cl.ActE(t.Context(), "role:limit,cmd:ping", nil)
			if err != nil || res.Value() != "pong" {
				t.Fatalf("the real caller's call = %v, %v", res.Value(), err)
			}
			refused(t, conns[0])
			testwait.Recv(t, log.Seen("wizard: quic: connection closed to make room for another", "remote="+conns[0].LocalAddr().String()))
			if tt.stream {
				for i, s := range streams[1:] {
					s.ping(uint64(100 + i))
				}
			}
		})
	}
}

// TestBusyConnectionsRefuse: when every connection has a request in
// flight, a new one is closed at once with a logged reason.
func TestBusyConnectionsRefuse(t *testing.T) {
	var log transporttest.Log
	srv := transporttest.NewServer(t, newTransport(t, quic.WithInsecureSelfSigned(), quic.WithMaxConns(3), quic.WithMaxConnsPerIP(3), quic.WithLogger(log.Logger())))
	started, release := make(chan struct{}, 10), make(chan struct{})
	transporttest.MustAdd(t, srv, "role:block,cmd:wait", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "released", nil
	})
	defer close(release)
	d := newRawDialer(t)
	for range 3 {
		s := d.open(srv.Addr())
		s.write(wire.AppendFrame(nil, &wire.Frame{Type: wire.TypeRequest, ID: 1, Pattern: "cmd:wait,role:block", Codec: wire.CodecJSON, Payload: []byte("{}")}))
		testwait.Recv(t, started)
	}
	late, err := d.dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer late.CloseWithError(0, "")
	seen := log.Seen("wizard: quic: connection refused", "remote="+late.LocalAddr().String(), "too many connections", "none idle")
	refused(t, late)
	testwait.Recv(t, seen)
}

// TestIdleTimeout: a connection without a request in flight for
// WithIdleTimeout gets a goaway on its streams, no sooner.
func TestIdleTimeout(t *testing.T) {
	const idle = 200 * time.Millisecond
	srv := transporttest.NewServer(t, newTransport(t, quic.WithInsecureSelfSigned(), quic.WithIdleTimeout(idle)))
	d := newRawDialer(t)
	start := time.Now() // before the listener accepts, so no later than its clock starts
	s := d.open(srv.Addr())
	if f := s.next(); f.Type != wire.TypeGoAway {
		t.Fatalf("idle connection got a %v frame, want a goaway", f.Type)
	}
	if d := time.Since(start); d < idle {
		t.Errorf("goaway after %v idle, want at least %v", d, idle)
	}
}
