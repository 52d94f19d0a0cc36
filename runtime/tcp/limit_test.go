package tcp_test

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/internal/testkit/need"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// dialRawFrom is dialRaw from the local IP from.
func dialRawFrom(t *testing.T, addr, from string) *rawConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		need.Skipf(t, "needs a second loopback address to dial from (%s, as Linux has): %v", from, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

// ping checks that the node answers a ping on r: the connection is
// served.
func (r *rawConn) ping(id uint64) {
	r.t.Helper()
	r.send(&wire.Frame{Type: wire.TypePing, ID: id})
	r.c.SetReadDeadline(time.Now().Add(testwait.Guard))
	for {
		var f wire.Frame
		if _, err := wire.ReadFrame(r.br, 0, &f, nil); err != nil {
			r.t.Fatalf("waiting for the pong: %v", err)
		}
		if f.Type == wire.TypePong && f.ID == id {
			return
		}
	}
}

// blocker serves role:block,cmd:wait until release is closed, telling
// started of each call.
type blocker struct {
	started chan struct{}
	release chan struct{}
}

func newBlocker(t *testing.T, n *runtime.Node) *blocker {
	b := &blocker{started: make(chan struct{}, 100), release: make(chan struct{})}
	transporttest.MustAdd(t, n, "role:block,cmd:wait", func(ctx context.Context, r runtime.Request) (any, error) {
		b.started <- struct{}{}
		select {
		case <-b.release:
		case <-ctx.Done():
		}
		return "released", nil
	})
	t.Cleanup(b.free)
	return b
}

func (b *blocker) free() {
	select {
	case <-b.release:
	default:
		close(b.release)
	}
}

// busy makes r a connection with a request in flight.
func (b *blocker) busy(t *testing.T, r *rawConn, id uint64) {
	t.Helper()
	r.send(&wire.Frame{Type: wire.TypeRequest, ID: id, Pattern: "cmd:wait,role:block", Codec: wire.CodecJSON, Payload: []byte("{}")})
	testwait.Recv(t, b.started)
}

// TestAttackerHoldsConnections (finding 4): an attacker holds as many
// connections as the listener allows one IP (WithMaxConns(20) less the
// eighth kept for IPs with few connections), idle after the handshake or
// silent before it; a real caller from the same IP still connects and
// calls. Its connection takes the place of the attacker's oldest, which
// is closed; the attacker's others are still served.
func TestAttackerHoldsConnections(t *testing.T) {
	const limit, held = 20, 20 - 20/8
	for _, tt := range []struct {
		name      string
		handshake bool
	}{
		{"idle after the handshake", true},
		{"silent before the handshake", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var log transporttest.Log
			srv := newServer(t, runtime.WithTransport(newTransport(t, tcp.WithMaxConns(limit), tcp.WithMaxConnsPerIP(limit), tcp.WithLogger(log.Logger()))))
			transporttest.MustAdd(t, srv, "role:limit,cmd:ping", func(ctx context.Context, r runtime.Request) (any, error) { return "pong", nil })
			attacker := make([]*rawConn, held)
			for i := range attacker {
				attacker[i] = dialRaw(t, srv.Addr())
				if tt.handshake {
					attacker[i].handshake()
				}
			}
			if tt.handshake {
				for i, r := range attacker { // all of them served
					r.ping(uint64(i + 1))
				}
			}
			evicted := log.Seen("wizard: tcp: connection closed to make room for another", "remote="+attacker[0].c.LocalAddr().String())

			cl := newClient(t, "role:limit,cmd:ping", srv.Addr())
			res, err := cl.ActE(t.Context(), "role:limit,cmd:ping", nil)
			if err != nil || res.Value() != "pong" {
				t.Fatalf("the real caller's call = %v, %v", res.Value(), err)
			}
			attacker[0].waitClosed()
			testwait.Recv(t, evicted)
			if tt.handshake {
				for i, r := range attacker[1:] {
					r.ping(uint64(100 + i))
				}
			}
		})
	}
}

// TestBusyConnectionsRefuse: when every connection has a request in
// flight, a new one is closed at once, with a logged reason; once one of
// them is idle again, a new one takes its place.
func TestBusyConnectionsRefuse(t *testing.T) {
	var log transporttest.Log
	srv := newServer(t, runtime.WithTransport(newTransport(t, tcp.WithMaxConns(3), tcp.WithMaxConnsPerIP(3), tcp.WithLogger(log.Logger()))))
	b := newBlocker(t, srv)
	held := make([]*rawConn, 3)
	for i := range held {
		held[i] = dialRaw(t, srv.Addr())
		held[i].handshake()
		b.busy(t, held[i], 1)
	}
	late := dialRaw(t, srv.Addr())
	refused := log.Seen("wizard: tcp: connection refused", "remote="+late.c.LocalAddr().String(), "too many connections", "none idle")
	late.write([]byte(wire.Magic + "\x01\x00\x00\x00"))
	late.waitClosed()
	testwait.Recv(t, refused)
	for _, r := range held {
		r.ping(2) // still served
	}

	b.free()
	for _, r := range held {
		if f := r.next(); f.Type != wire.TypeResponse || f.ID != 1 {
			t.Fatalf("answer %v %d, want the response to 1", f.Type, f.ID)
		}
	}
	again := dialRaw(t, srv.Addr())
	again.handshake()
	again.ping(1)
}

// TestMaxConnsPerIP: an IP whose connections are all busy at its limit
// has a new one refused, while another IP still connects.
func TestMaxConnsPerIP(t *testing.T) {
	var log transporttest.Log
	srv := newServer(t, runtime.WithTransport(newTransport(t, tcp.WithMaxConns(10), tcp.WithMaxConnsPerIP(2), tcp.WithLogger(log.Logger()))))
	b := newBlocker(t, srv)
	for range 2 {
		r := dialRaw(t, srv.Addr())
		r.handshake()
		b.busy(t, r, 1)
	}
	late := dialRaw(t, srv.Addr())
	refused := log.Seen("wizard: tcp: connection refused", "remote="+late.c.LocalAddr().String(), "from the same IP (WithMaxConnsPerIP)")
	late.write([]byte(wire.Magic + "\x01\x00\x00\x00"))
	late.waitClosed()
	testwait.Recv(t, refused)

	other := dialRawFrom(t, srv.Addr(), "127.0.0.2")
	other.handshake()
	other.ping(1)
}

// TestIdleTimeout: a connection without a request in flight for
// WithIdleTimeout gets a goaway and is closed, no sooner; one with a
// request in flight stays until its request ends, then goes too.
func TestIdleTimeout(t *testing.T) {
	const idle = 200 * time.Millisecond
	srv := newServer(t, runtime.WithTransport(newTransport(t, tcp.WithIdleTimeout(idle))))
	b := newBlocker(t, srv)
	busy := dialRaw(t, srv.Addr())
	busy.handshake()
	b.busy(t, busy, 1)

	start := time.Now() // before the listener accepts, so no later than its clock starts
	idler := dialRaw(t, srv.Addr())
	idler.handshake()
	if f := idler.next(); f.Type != wire.TypeGoAway {
		t.Fatalf("idle connection got a %v frame, want a goaway", f.Type)
	}
	if d := time.Since(start); d < idle {
		t.Errorf("goaway after %v idle, want at least %v", d, idle)
	}
	idler.waitClosed()

	busy.ping(2) // idle for as long, but with a request in flight
	b.free()
	if f := busy.next(); f.Type != wire.TypeResponse {
		t.Fatalf("got a %v frame, want the response", f.Type)
	}
	if f := busy.next(); f.Type != wire.TypeGoAway {
		t.Fatalf("got a %v frame, want the goaway once idle", f.Type)
	}
}

// TestDefaultLimitsServeClients: with the default limits (derived from
// the file-descriptor limit) a server takes the usual clients.
func TestDefaultLimitsServeClients(t *testing.T) {
	srv := newServer(t)
	transporttest.MustAdd(t, srv, "role:limit,cmd:ping", func(ctx context.Context, r runtime.Request) (any, error) { return "pong", nil })
	for range 5 {
		cl := newClient(t, "role:limit,cmd:ping", srv.Addr())
		if res, err := cl.ActE(t.Context(), "role:limit,cmd:ping", nil); err != nil || !strings.EqualFold(res.Value().(string), "pong") {
			t.Fatalf("call = %v, %v", res.Value(), err)
		}
	}
}
