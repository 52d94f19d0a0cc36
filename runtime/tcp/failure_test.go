package tcp_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// rawConn is a client that writes bytes of its choosing to a node.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

func (r *rawConn) write(b []byte) {
	r.t.Helper()
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

func (r *rawConn) handshake() {
	r.t.Helper()
	r.write([]byte(wire.Magic + "\x01\x00\x00\x00"))
	r.c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a guard
	if err := wire.ReadHandshake(r.br); err != nil {
		r.t.Fatalf("the node's handshake: %v", err)
	}
}

func (r *rawConn) send(f *wire.Frame) { r.t.Helper(); r.write(wire.AppendFrame(nil, f)) }

// next reads the next frame that is not a ping.
func (r *rawConn) next() *wire.Frame {
	r.t.Helper()
	r.c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a guard
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

// waitClosed reads until the node closes the connection.
func (r *rawConn) waitClosed() {
	r.t.Helper()
	r.c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a guard
	_, err := io.Copy(io.Discard, r.br)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		r.t.Fatal("the node did not close the connection")
	}
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		r.t.Fatalf("reading until the close: %v", err)
	}
}

// TestBadInput sends bad bytes to a node's listener, each on a connection
// of its own: that connection is closed with a logged reason and the node
// keeps serving its other clients.
func TestBadInput(t *testing.T) {
	var sink transporttest.Log
	srv := newServer(t, runtime.WithTransport(newTransport(t, tcp.WithLogger(sink.Logger()))))
	transporttest.MustAdd(t, srv, "role:ok", func(ctx context.Context, r runtime.Request) (any, error) { return "ok", nil })
	cl := newClient(t, "role:ok", srv.Addr())
	// The cases that wait for a timeout go to a node of their own, with
	// short ones: the default node's are long enough for a loaded machine.
	impatient := newServer(t, runtime.WithTransport(newTransport(t, tcp.WithLogger(sink.Logger()),
		tcp.WithKeepAlive(100*time.Millisecond, time.Second), tcp.WithHandshakeTimeout(time.Second))))
	call := func(t *testing.T) {
		t.Helper()
		if res, err := cl.ActE(t.Context(), "role:ok", nil); err != nil || res.Value() != "ok" {
			t.Fatalf("a good client's call: %v, %v", res.Value(), err)
		}
	}
	valid := wire.AppendFrame(nil, &wire.Frame{Type: wire.TypeRequest, ID: 1, Pattern: "role:ok", Payload: []byte("{}")})
	length := func(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }
	noise := make([]byte, 4096)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}

	tests := []struct {
		name      string
		handshake bool
		impatient bool // on the node with short timeouts
		act       func(r *rawConn)
		reason    string
	}{
		{name: "HTTP instead of the handshake", act: func(r *rawConn) { r.write([]byte("GET / HTTP/1.1\r\nHost: wizard\r\n\r\n")) }, reason: "bad handshake magic"},
		{name: "wrong magic", act: func(r *rawConn) { r.write([]byte("WZRX\x01\x00\x00\x00")) }, reason: "bad handshake magic"},
		{name: "wrong version", act: func(r *rawConn) {
			r.write([]byte("WZRD\x02\x00\x00\x00"))
			// The node answers with its version, so that the client can say
			// which versions disagree.
			if err := wire.ReadHandshake(r.br); err != nil {
				r.t.Errorf("the node's handshake: %v", err)
			}
		}, reason: "peer speaks wire version 2"},
		{name: "half a handshake", impatient: true, act: func(r *rawConn) { r.write([]byte("WZ")) }, reason: "handshake timed out"},
		{name: "noise before the handshake", act: func(r *rawConn) { r.write(noise) }, reason: "bad handshake magic"},
		{name: "oversized frame", handshake: true, act: func(r *rawConn) { r.write(length(0xffffffff)) }, reason: "frame too large"},
		{name: "one byte above the limit", handshake: true, act: func(r *rawConn) { r.write(length(wire.DefaultMaxFrameSize + 1)) }, reason: "frame too large"},
		{name: "length below the minimum", handshake: true, act: func(r *rawConn) { r.write(append(length(2), 1, 0)) }, reason: "length below the minimum"},
		{name: "unknown frame type", handshake: true, act: func(r *rawConn) {
			r.write(append(length(wire.MinFrameSize), make([]byte, wire.MinFrameSize)...))
		}, reason: "unknown frame type"},
		{name: "noise after the handshake", handshake: true, act: func(r *rawConn) { r.write(noise) }, reason: "reading frame"},
		{name: "truncated frame", handshake: true, act: func(r *rawConn) {
			r.write(valid[:len(valid)-3])
			r.c.(*net.TCPConn).CloseWrite()
		}, reason: "unexpected EOF"},
		{name: "response from a client", handshake: true, act: func(r *rawConn) { r.send(&wire.Frame{Type: wire.TypeResponse, ID: 1}) }, reason: "client sent a response frame"},
		{name: "stall mid-frame", handshake: true, impatient: true, act: func(r *rawConn) { r.write(valid[:10]) }, reason: "did not answer a ping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := srv.Addr()
			if tt.impatient {
				addr = impatient.Addr()
			}
			r := dialRaw(t, addr)
			// The listener logs each connection's end with its address.
			logged := sink.Seen("wizard: tcp: connection closed", "remote="+r.c.LocalAddr().String(), tt.reason)
			if tt.handshake {
				r.handshake()
			}
			tt.act(r)
			r.waitClosed()
			select {
			case <-logged:
			case <-time.After(10 * time.Second):
				t.Fatalf("no log line with the reason %q; the log:\n%s", tt.reason, sink.String())
			}
			call(t)
		})
	}
}

// TestBadRequests sends well-formed frames with bad contents: each gets
// an error answer and the connection stays open.
func TestBadRequests(t *testing.T) {
	srv := newServer(t)
	ran := make(chan string, 8)
	transporttest.MustAdd(t, srv, "role:raw,cmd:typed", runtime.NewUnaryHandler(func(ctx context.Context, r *wrapperspb.Int64Value) (*wrapperspb.Int64Value, error) {
		return r, nil
	}))
	transporttest.MustAdd(t, srv, "role:raw,cmd:map", func(ctx context.Context, r runtime.Request) (any, error) {
		var m map[string]any
		if err := r.Decode(&m); err != nil {
			return nil, err
		}
		return m, nil
	})
	transporttest.MustAdd(t, srv, "role:raw,cmd:forget", func(ctx context.Context, r runtime.Request) (any, error) {
		ran <- "forget"
		return "an answer that is never sent", nil
	})
	r := dialRaw(t, srv.Addr())
	r.handshake()

	tests := []struct {
		name string
		req  wire.Frame
		code runtime.Code
	}{
		{"unparsable pattern", wire.Frame{Pattern: "role:raw,,cmd"}, runtime.CodeInvalidArgument},
		{"no handler", wire.Frame{Pattern: "role:raw,cmd:nothing"}, runtime.CodeNotFound},
		{"unknown protobuf type", wire.Frame{Pattern: "cmd:typed,role:raw", Codec: wire.CodecProto, Meta: []wire.Meta{{Key: ":t", Value: "no.such.Type"}}, Payload: []byte{8, 1}}, runtime.CodeInvalidArgument},
		{"bad protobuf", wire.Frame{Pattern: "cmd:typed,role:raw", Codec: wire.CodecProto, Meta: []wire.Meta{{Key: ":t", Value: "google.protobuf.Int64Value"}}, Payload: []byte{0xff, 0xff}}, runtime.CodeInvalidArgument},
		{"bad JSON", wire.Frame{Pattern: "cmd:map,role:raw", Codec: wire.CodecJSON, Payload: []byte("{nope")}, runtime.CodeInvalidArgument},
		{"unknown codec", wire.Frame{Pattern: "cmd:map,role:raw", Codec: 99, Payload: []byte("{}")}, runtime.CodeInvalidArgument},
		{"bad pattern in meta", wire.Frame{Pattern: "cmd:map,role:raw", Codec: wire.CodecJSON, Meta: []wire.Meta{{Key: ":o", Value: ":::"}}, Payload: []byte("{}")}, runtime.CodeInvalidArgument},
	}
	id := uint64(0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id++
			f := tt.req
			f.Type, f.ID = wire.TypeRequest, id
			r.send(&f)
			got := r.next()
			if got.ID != id || got.Type != wire.TypeError {
				t.Fatalf("answer %v %d, want an error for %d", got.Type, got.ID, id)
			}
			code, msg, err := wire.DecodeError(got.Payload)
			if err != nil || runtime.Code(code) != tt.code {
				t.Errorf("error %v %q (%v), want %v", runtime.Code(code), msg, err, tt.code)
			}
		})
	}

	t.Run("no reply", func(t *testing.T) {
		// A no-reply request, then a normal one: the first answer is the
		// normal one's.
		r.send(&wire.Frame{Type: wire.TypeRequest, ID: 100, Flags: wire.FlagNoReply, Pattern: "cmd:forget,role:raw"})
		if got := testwait.Recv(t, ran); got != "forget" {
			t.Fatal(got)
		}
		r.send(&wire.Frame{Type: wire.TypeRequest, ID: 101, Pattern: "cmd:map,role:raw", Codec: wire.CodecJSON, Payload: []byte(`{"a":1}`)})
		got := r.next()
		if got.ID != 101 || got.Type != wire.TypeResponse || string(got.Payload) != `{"a":1}` {
			t.Errorf("answer %v %d %q, want the response to 101", got.Type, got.ID, got.Payload)
		}
	})
}
