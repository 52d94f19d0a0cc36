package mux

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// echo answers a request with its own payload, codec and meta.
func echo(_ context.Context, req *wire.Frame) *wire.Frame {
	return &wire.Frame{Type: wire.TypeResponse, Codec: req.Codec, Meta: req.Meta, Payload: req.Payload}
}

// pair is a client and a server over one net.Pipe.
type pair struct {
	client   *Client
	served   chan error // Serve's result
	stop     context.CancelFunc
	pipeSide net.Conn // the client's end
}

// newPair starts Serve and a client over net.Pipe, closed at cleanup.
func newPair(t *testing.T, h Handler, sopts, copts Options) *pair {
	t.Helper()
	cconn, sconn := net.Pipe()
	ctx, stop := context.WithCancel(context.WithoutCancel(t.Context()))
	p := &pair{served: make(chan error, 1), stop: stop, pipeSide: cconn}
	go func() { p.served <- Serve(ctx, sconn, h, sopts) }()
	cl, err := NewClient(cconn, copts)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	p.client = cl
	t.Cleanup(func() {
		cl.Close()
		stop()
		<-p.served
	})
	return p
}

// server is a TCP listener on 127.0.0.1 serving every connection.
type tcpServer struct {
	addr   string
	served chan error // one result per connection
}

func listen(t testing.TB, h Handler, opts Options) *tcpServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.WithoutCancel(t.Context()))
	s := &tcpServer{addr: ln.Addr().String(), served: make(chan error, 100)}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.served <- Serve(ctx, conn, h, opts)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		stop()
		wg.Wait()
	})
	return s
}

// dial connects a client to s, closed at cleanup.
func (s *tcpServer) dial(t testing.TB, opts Options) *Client {
	t.Helper()
	return dialAddr(t, s.addr, opts)
}

// dialAddr connects a client to the server at addr, closed at cleanup.
func dialAddr(t testing.TB, addr string, opts Options) *Client {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := NewClient(conn, opts)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// raw is a hand-driven peer.
type raw struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
}

func newRaw(t *testing.T, conn net.Conn) *raw {
	t.Cleanup(func() { conn.Close() })
	return &raw{t: t, conn: conn, br: bufio.NewReader(conn)}
}

func (s *tcpServer) dialRaw(t *testing.T) *raw {
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	return newRaw(t, conn)
}

func (r *raw) write(b []byte) {
	r.t.Helper()
	if _, err := r.conn.Write(b); err != nil {
		r.t.Fatalf("raw write: %v", err)
	}
}

func (r *raw) handshake() {
	r.t.Helper()
	r.write([]byte("WZRD\x01\x00\x00\x00"))
	if err := wire.ReadHandshake(r.br); err != nil {
		r.t.Fatalf("raw handshake: %v", err)
	}
}

func (r *raw) send(f *wire.Frame) { r.t.Helper(); r.write(wire.AppendFrame(nil, f)) }

func (r *raw) read() (*wire.Frame, error) {
	f := new(wire.Frame)
	_, err := wire.ReadFrame(r.br, 0, f, nil)
	return f, err
}

// readAll reads frames until the stream ends, answering pings.
func (r *raw) readAll() []*wire.Frame {
	var frames []*wire.Frame
	for {
		f, err := r.read()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.ErrClosedPipe) {
				r.t.Errorf("raw read: %v", err)
			}
			return frames
		}
		frames = append(frames, f)
	}
}

func reqFrame(id uint64, payload string) *wire.Frame {
	return &wire.Frame{Type: wire.TypeRequest, ID: id, Pattern: "role:test", Payload: []byte(payload)}
}

// closedFate names how a call on a client that was closed ended: "not
// sent", "lost", or its error's text when it is neither.
func closedFate(err error) string {
	switch {
	case errors.Is(err, ErrNotSent) && errors.Is(err, ErrClosed):
		return "not sent"
	case errors.Is(err, ErrConnLost) && errors.Is(err, ErrClosed):
		return "lost"
	default:
		return err.Error()
	}
}
