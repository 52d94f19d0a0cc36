package tcp_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// ticker serves a stream that sends a message, then waits for the
// caller's, for ever: it reports how its ctx ended.
func ticker(ended chan<- error) runtime.Handler {
	return runtime.NewStreamHandler(func(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error {
		for {
			if err := s.Send(map[string]any{"tick": true}); err != nil {
				ended <- ctx.Err()
				return err
			}
			if _, err := s.Recv(); err != nil {
				ended <- ctx.Err()
				return err
			}
		}
	})
}

// TestObserverStream: a remote stream is one attempt, which ends with the
// stream and counts its messages.
func TestObserverStream(t *testing.T) {
	srv := newServer(t)
	transporttest.MustAdd(t, srv, "role:tick", ticker(make(chan error, 1)))
	obs := &attempts{}
	cl := newClientWith(t, "role:tick", []runtime.Option{runtime.WithObserver(obs)}, srv.Addr())
	st, err := cl.OpenStream(t.Context(), "role:tick")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		if err := st.Send(map[string]any{"tock": true}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.started) != 1 || !obs.started[0].Stream || len(obs.ended) != 1 {
		t.Fatalf("attempts started %+v, ended %+v; want one stream attempt", obs.started, obs.ended)
	}
	if r := obs.ended[0]; r.Code != runtime.CodeCanceled || r.Sent != 3 || r.Received != 3 || !obs.ctxOK[0] {
		t.Fatalf("the stream's attempt ended %+v (ctx kept: %v); want canceled, 3 sent, 3 received", r, obs.ctxOK[0])
	}
}

// TestStreamConnectionLost: a connection lost mid-stream ends the stream
// on both sides at once: the caller's Recv fails with unavailable, the
// handler's ctx ends.
func TestStreamConnectionLost(t *testing.T) {
	srv := newServer(t)
	ended := make(chan error, 1)
	transporttest.MustAdd(t, srv, "role:tick", ticker(ended))
	p := newCutter(t, srv.Addr())
	cl := newClient(t, "role:tick", p.addr())
	st, err := cl.OpenStream(t.Context(), "role:tick")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	p.cut()
	_, err = st.Recv()
	if runtime.CodeOf(err) != runtime.CodeUnavailable {
		t.Fatalf("Recv after the connection was cut: %v (%v), want unavailable", runtime.CodeOf(err), err)
	}
	if err := testwait.Recv(t, ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("the handler's ctx ended with %v, want canceled", err)
	}
}

// cutter forwards TCP connections to a node and cuts them all at once.
type cutter struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newCutter(t *testing.T, target string) *cutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln}
	t.Cleanup(func() { ln.Close(); c.cut() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			c.mu.Lock()
			c.conns = append(c.conns, in, out)
			c.mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
	return c
}

func (c *cutter) addr() string { return c.ln.Addr().String() }

func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nc := range c.conns {
		nc.Close()
	}
	c.conns = nil
}

// TestStreamsTakeNoCallSlot: open streams, idle, do not count against a
// node's in-flight limit for calls, in-process or remote.
func TestStreamsTakeNoCallSlot(t *testing.T) {
	srv := newServer(t, runtime.WithMaxInFlight(2))
	transporttest.MustAdd(t, srv, "role:tick", ticker(make(chan error, 8)))
	transporttest.MustAdd(t, srv, "role:ok", func(ctx context.Context, r runtime.Request) (any, error) { return "fine", nil })
	cl := newClient(t, "role:tick", srv.Addr())
	transporttest.WaitRoutable(t, cl, "role:ok")
	for _, n := range []*runtime.Node{cl, cl, srv, srv} {
		st, err := n.OpenStream(t.Context(), "role:tick")
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []*runtime.Node{cl, srv} {
		if _, err := n.ActE(t.Context(), "role:ok", nil); err != nil {
			t.Fatalf("a call beside 4 open streams on a node with 2 call slots: %v", err)
		}
	}
}

// TestStreamInterceptor: a handler interceptor runs once around a
// stream's handler, and learns the messages it sent and received.
func TestStreamInterceptor(t *testing.T) {
	type counts struct {
		sent, received int64
		ok             bool
		src            runtime.Source
	}
	seen := make(chan counts, 4)
	ic := func(next runtime.Handler) runtime.Handler {
		return func(ctx context.Context, r runtime.Request) (any, error) {
			res, err := next(ctx, r)
			s, rc, ok := r.StreamMessages()
			seen <- counts{s, rc, ok, r.Source()}
			return res, err
		}
	}
	srv := newServer(t, runtime.WithHandlerInterceptors(ic))
	transporttest.MustAdd(t, srv, "role:tick", ticker(make(chan error, 1)))
	cl := newClient(t, "role:tick", srv.Addr())
	st, err := cl.OpenStream(t.Context(), "role:tick")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		if err := st.Send(map[string]any{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Recv(); err != nil { // the handler took the second, sent the third
		t.Fatal(err)
	}
	st.Close()
	c := testwait.Recv(t, seen)
	if !c.ok || c.received != 2 || c.sent != 3 {
		t.Fatalf("the interceptor saw %+v; want a stream with 2 received and 3 sent", c)
	}
	if c.src.Node != cl.ID() || c.src.Transport != "tcp" || c.src.Addr == "" {
		t.Fatalf("the stream's source is %+v; want the calling node %s over tcp", c.src, cl.ID())
	}
}

// TestStreamMessageTooLarge: a message larger than the connection's
// frames is refused by Send with resource_exhausted, either way, and the
// stream goes on.
func TestStreamMessageTooLarge(t *testing.T) {
	const limit = 64 << 10
	big := map[string]any{"pad": strings.Repeat("x", limit)}
	got := make(chan error, 1)
	srv := transporttest.NewServer(t, newTransport(t, tcp.WithMaxFrameSize(limit)))
	transporttest.MustAdd(t, srv, "role:big", runtime.NewStreamHandler(func(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error {
		got <- s.Send(big)
		if _, err := s.Recv(); err != nil { // the caller's small message, after its big one failed
			return err
		}
		return s.Send(map[string]any{"small": true})
	}))
	cl := transporttest.NewClient(t, newTransport(t, tcp.WithMaxFrameSize(limit)), "role:big", nil, srv.Addr())
	st, err := cl.OpenStream(t.Context(), "role:big")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := testwait.Recv(t, got); runtime.CodeOf(err) != runtime.CodeResourceExhausted {
		t.Fatalf("the handler's Send of %d bytes: %v, want resource_exhausted", limit, err)
	}
	if err := st.Send(big); runtime.CodeOf(err) != runtime.CodeResourceExhausted {
		t.Fatalf("the caller's Send of %d bytes: %v, want resource_exhausted", limit, err)
	}
	if err := st.Send(map[string]any{"small": true}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatalf("the stream after a refused message: %v", err)
	}
}
