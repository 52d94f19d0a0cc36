package mux

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/runtime/internal/flow"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// streamServer serves sh (and echo for calls) over TCP on 127.0.0.1 and
// returns a client of it.
func streamServer(t *testing.T, sh StreamHandler, sopts, copts Options) (*Client, *tcpServer) {
	t.Helper()
	sopts.ServeStream = sh
	s := listen(t, echo, sopts)
	return s.dial(t, copts), s
}

func openFrame(pattern string, meta ...wire.Meta) *wire.Frame {
	return &wire.Frame{Pattern: pattern, Meta: meta}
}

// recvAll reads the stream to its end and returns the messages and the
// end's error (nil for io.EOF).
func recvAll(ctx context.Context, cs *ClientStream) ([]string, error) {
	var got []string
	for {
		_, p, err := cs.Recv(ctx)
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		got = append(got, string(p))
	}
}

// streamCode returns the code of a *StreamError, -1 for another error.
func streamCode(err error) int {
	var se *StreamError
	if errors.As(err, &se) {
		return int(se.Code)
	}
	return -1
}

func TestStreamKinds(t *testing.T) {
	leak.Check(t)
	// The handler serves three patterns: "server" sends n messages named
	// by the open's meta, "client" sums what it receives, "bidi" echoes.
	sh := func(ctx context.Context, ss *ServerStream) error {
		open := ss.Open()
		if err := ss.SendHeader([]wire.Meta{{Key: "kind", Value: open.Pattern}}); err != nil {
			return err
		}
		ss.SetTrailer([]wire.Meta{{Key: "end", Value: open.Pattern}})
		switch open.Pattern {
		case "server":
			n, _ := strconv.Atoi(open.Meta[0].Value)
			for i := range n {
				if err := ss.Send(ctx, wire.CodecJSON, []byte(strconv.Itoa(i))); err != nil {
					return err
				}
			}
			return nil
		case "client":
			var got []string
			for {
				_, p, err := ss.Recv(ctx)
				if err == io.EOF {
					break
				}
				if err != nil {
					return err
				}
				got = append(got, string(p))
			}
			return ss.Send(ctx, wire.CodecJSON, fmt.Appendf(nil, "%d:%v", len(got), got))
		default:
			for {
				c, p, err := ss.Recv(ctx)
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return err
				}
				if err := ss.Send(ctx, c, p); err != nil {
					return err
				}
			}
		}
	}
	cl, _ := streamServer(t, sh, Options{}, Options{})
	tests := []struct {
		name    string
		pattern string
		send    []string
		want    []string
	}{
		{"server streaming", "server", nil, []string{"0", "1", "2"}},
		{"client streaming", "client", []string{"a", "b", "c"}, []string{"3:[a b c]"}},
		{"bidirectional", "bidi", []string{"x", "y"}, []string{"x", "y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			cs, err := cl.OpenStream(ctx, openFrame(tt.pattern, wire.Meta{Key: "n", Value: "3"}))
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range tt.send {
				if err := cs.Send(ctx, wire.CodecJSON, []byte(m)); err != nil {
					t.Fatal(err)
				}
			}
			cs.CloseSend()
			if err := cs.Send(ctx, wire.CodecJSON, nil); err != errSendClosed {
				t.Errorf("Send after CloseSend = %v, want %v", err, errSendClosed)
			}
			h, err := cs.Header(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got, err := recvAll(ctx, cs)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]wire.Meta{{Key: "kind", Value: tt.pattern}}, h); diff != "" {
				t.Errorf("header (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]wire.Meta{{Key: "end", Value: tt.pattern}}, cs.Trailer()); diff != "" {
				t.Errorf("trailer (-want +got):\n%s", diff)
			}
		})
	}
}

// bidiEcho echoes every message until the client closes its side.
func bidiEcho(ctx context.Context, ss *ServerStream) error {
	for {
		c, p, err := ss.Recv(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := ss.Send(ctx, c, p); err != nil {
			return err
		}
	}
}

func TestStreamManyInOrder(t *testing.T) {
	leak.Check(t)
	const n = 10000
	for _, transport := range []string{"tcp", "pipe"} {
		t.Run(transport, func(t *testing.T) {
			var cl *Client
			if transport == "tcp" {
				cl, _ = streamServer(t, bidiEcho, Options{}, Options{})
			} else {
				cl = newPair(t, echo, Options{ServeStream: bidiEcho}, Options{}).client
			}
			ctx := t.Context()
			cs, err := cl.OpenStream(ctx, openFrame("echo"))
			if err != nil {
				t.Fatal(err)
			}
			sent := make(chan error, 1)
			go func() {
				for i := range n {
					if err := cs.Send(ctx, wire.CodecProto, []byte(strconv.Itoa(i))); err != nil {
						sent <- err
						return
					}
				}
				sent <- cs.CloseSend()
			}()
			got, err := recvAll(ctx, cs)
			if err != nil {
				t.Fatal(err)
			}
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
			if len(got) != n {
				t.Fatalf("got %d messages, want %d", len(got), n)
			}
			for i, m := range got {
				if m != strconv.Itoa(i) {
					t.Fatalf("message %d is %q", i, m)
				}
			}
		})
	}
}

// TestStreamSlowConsumer checks flow control: a client that stops reading
// stops the server's Send once the window is spent, and holds at most
// the window plus one message; reading again lets the rest through. A
// message larger than the window goes alone.
func TestStreamSlowConsumer(t *testing.T) {
	for _, window := range []int{wire.InitialWindow, 4 * wire.InitialWindow} {
		t.Run(strconv.Itoa(window), func(t *testing.T) { testSlowConsumer(t, window) })
	}
}

func testSlowConsumer(t *testing.T, window int) {
	leak.Check(t)
	const msg = 1 << 10
	big := make([]byte, wire.InitialWindow+wire.InitialWindow/4)
	blocked := make(chan error, 1)
	fit := window / (msg + wire.MessageCost) // the messages the window holds, each costing MessageCost more
	sh := func(ctx context.Context, ss *ServerStream) error {
		p := make([]byte, msg)
		for range fit {
			if err := ss.Send(ctx, wire.CodecNone, p); err != nil {
				return err
			}
		}
		// The window is spent: Send waits for credit that does not come
		// while the client does not read.
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		blocked <- ss.Send(short, wire.CodecNone, p)
		cancel()
		if err := ss.Send(ctx, wire.CodecNone, p); err != nil {
			return err
		}
		return ss.Send(ctx, wire.CodecNone, big)
	}
	cl, _ := streamServer(t, sh, Options{}, Options{StreamWindow: window})
	ctx := t.Context()
	cs, err := cl.OpenStream(ctx, openFrame("slow"))
	if err != nil {
		t.Fatal(err)
	}
	if err := <-blocked; err != context.DeadlineExceeded {
		t.Fatalf("Send beyond the window = %v, want it to block (DeadlineExceeded)", err)
	}
	peak := 0
	total := 0
	for {
		peak = max(peak, cs.Queued())
		_, p, err := cs.Recv(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		total += len(p)
		peak = max(peak, cs.Queued()+len(p))
	}
	if want := fit*msg + msg + len(big); total != want {
		t.Errorf("received %d bytes, want %d", total, want)
	}
	if bound := window + len(big); peak > bound {
		t.Errorf("the client held %d bytes at once, want at most the window plus one message (%d)", peak, bound)
	}
	t.Logf("peak queued: %d bytes (window %d, largest message %d)", peak, window, len(big))
}

// TestStreamBlockedDoesNotBlockOthers stalls one stream (its client does
// not read, its server's Send waits for credit) and checks that calls and
// other streams on the connection go on.
func TestStreamBlockedDoesNotBlockOthers(t *testing.T) {
	leak.Check(t)
	stalled := make(chan struct{})
	sh := func(ctx context.Context, ss *ServerStream) error {
		if ss.Open().Pattern == "flood" {
			p := make([]byte, 4<<10)
			for i := 0; ; i++ {
				short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
				err := ss.Send(short, wire.CodecNone, p)
				cancel()
				if err == context.DeadlineExceeded {
					close(stalled)
					break
				}
				if err != nil {
					return err
				}
			}
			<-ctx.Done()
			return ctx.Err()
		}
		return bidiEcho(ctx, ss)
	}
	cl, _ := streamServer(t, sh, Options{}, Options{})
	ctx := t.Context()
	flood, err := cl.OpenStream(ctx, openFrame("flood"))
	if err != nil {
		t.Fatal(err)
	}
	defer flood.Cancel()
	<-stalled
	for i := range 100 {
		resp, err := cl.Call(ctx, reqFrame(0, "call"+strconv.Itoa(i)))
		if err != nil || string(resp.Payload) != "call"+strconv.Itoa(i) {
			t.Fatalf("call %d beside a stalled stream: %v", i, err)
		}
	}
	cs, err := cl.OpenStream(ctx, openFrame("echo"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := cs.Send(ctx, wire.CodecNone, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if _, p, err := cs.Recv(ctx); err != nil || p[0] != byte(i) {
			t.Fatalf("stream beside a stalled one: %v", err)
		}
	}
	cs.CloseSend()
	if _, err := recvAll(ctx, cs); err != nil {
		t.Fatal(err)
	}
}

func TestStreamCancel(t *testing.T) {
	leak.Check(t)
	handlerEnd := make(chan error, 1)
	sh := func(ctx context.Context, ss *ServerStream) error {
		switch ss.Open().Pattern {
		case "server error":
			if err := ss.Send(ctx, wire.CodecNone, []byte("one")); err != nil {
				return err
			}
			ss.SetTrailer([]wire.Meta{{Key: "why", Value: "test"}})
			return &StreamError{Code: 9, Message: "wizard: failed precondition", Details: []byte("d")}
		case "plain error":
			return errors.New("boom")
		case "panic":
			panic("boom")
		}
		err := ss.Send(ctx, wire.CodecNone, []byte("hello"))
		if err == nil {
			_, _, err = ss.Recv(ctx) // waits: the client sends nothing
		}
		handlerEnd <- err
		return err
	}
	cl, _ := streamServer(t, sh, Options{}, Options{})

	t.Run("client cancels", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cs, err := cl.OpenStream(ctx, openFrame("wait"))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := cs.Recv(t.Context()); err != nil {
			t.Fatal(err)
		}
		cancel()
		if _, _, err := cs.Recv(t.Context()); err != context.Canceled {
			t.Errorf("client Recv after cancel = %v, want context.Canceled", err)
		}
		if err := cs.Send(t.Context(), wire.CodecNone, nil); err != context.Canceled {
			t.Errorf("client Send after cancel = %v, want context.Canceled", err)
		}
		if err := <-handlerEnd; err != context.Canceled {
			t.Errorf("server Recv after the client's cancel = %v, want context.Canceled", err)
		}
	})
	t.Run("client Cancel", func(t *testing.T) {
		cs, err := cl.OpenStream(t.Context(), openFrame("wait"))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := cs.Recv(t.Context()); err != nil {
			t.Fatal(err)
		}
		cs.Cancel()
		if err := <-handlerEnd; err != context.Canceled {
			t.Errorf("server Recv after Cancel = %v, want context.Canceled", err)
		}
		if _, err := cs.Header(t.Context()); err != context.Canceled {
			t.Errorf("Header after Cancel = %v, want context.Canceled", err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		cs, err := cl.OpenStream(ctx, openFrame("wait"))
		if err != nil {
			t.Fatal(err)
		}
		// The client's own deadline, or the server's end for it, whichever
		// comes first (after the server's message, unless a loaded machine
		// let the deadline pass first).
		if _, err := recvAll(t.Context(), cs); err != context.DeadlineExceeded && streamCode(err) != codeDeadlineExceeded {
			t.Errorf("client Recv past the deadline = %v, want DeadlineExceeded", err)
		}
		if err := <-handlerEnd; err != context.DeadlineExceeded && err != context.Canceled {
			t.Errorf("server Recv past the deadline = %v, want DeadlineExceeded (or the client's cancel)", err)
		}
	})
	t.Run("server deadline", func(t *testing.T) {
		// The deadline reaches the server, which ends the stream even
		// when the client does not watch it.
		cs, err := cl.OpenStream(t.Context(), &wire.Frame{Pattern: "wait", Deadline: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := <-handlerEnd; err != context.DeadlineExceeded {
			t.Errorf("server Recv past the deadline = %v, want DeadlineExceeded", err)
		}
		got, err := recvAll(t.Context(), cs)
		if streamCode(err) != codeDeadlineExceeded || len(got) > 1 {
			t.Errorf("client got %v, %v; want the message (unless the deadline came first), then deadline_exceeded", got, err)
		}
	})
	t.Run("server error with trailers", func(t *testing.T) {
		cs, err := cl.OpenStream(t.Context(), openFrame("server error"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := recvAll(t.Context(), cs)
		var se *StreamError
		if !errors.As(err, &se) {
			t.Fatalf("end = %v, want a *StreamError", err)
		}
		if diff := cmp.Diff(&StreamError{Code: 9, Message: "wizard: failed precondition", Details: []byte("d")}, se); diff != "" {
			t.Errorf("end (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"one"}, got); diff != "" {
			t.Errorf("messages before the end (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]wire.Meta{{Key: "why", Value: "test"}}, cs.Trailer()); diff != "" {
			t.Errorf("trailer (-want +got):\n%s", diff)
		}
		if err := cs.Send(t.Context(), wire.CodecNone, nil); err != io.EOF {
			t.Errorf("Send after the end = %v, want io.EOF", err)
		}
	})
	t.Run("errors and panics", func(t *testing.T) {
		for pattern, code := range map[string]int{"plain error": codeUnknown, "panic": codeInternal} {
			cs, err := cl.OpenStream(t.Context(), openFrame(pattern))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := recvAll(t.Context(), cs); streamCode(err) != code {
				t.Errorf("%s: end %v, want code %d", pattern, err, code)
			}
		}
	})
}

// TestStreamConnectionLost kills the connection under an open stream:
// both sides' pending Recv fail at once, with the lost connection.
func TestStreamConnectionLost(t *testing.T) {
	leak.Check(t)
	handlerEnd := make(chan error, 1)
	started := make(chan struct{})
	sh := func(ctx context.Context, ss *ServerStream) error {
		close(started)
		_, _, err := ss.Recv(context.Background()) // the stream's end, not ctx, ends it
		handlerEnd <- err
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		served <- Serve(context.Background(), conn, echo, Options{ServeStream: sh})
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cl, err := NewClient(conn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cs, err := cl.OpenStream(t.Context(), openFrame("wait"))
	if err != nil {
		t.Fatal(err)
	}
	<-started
	recvd := make(chan error, 1)
	go func() {
		_, _, err := cs.Recv(context.Background())
		recvd <- err
	}()
	conn.Close() // the connection dies under both sides
	if err := <-recvd; !errors.Is(err, ErrConnLost) {
		t.Errorf("client Recv = %v, want ErrConnLost", err)
	}
	if err := <-handlerEnd; !errors.Is(err, ErrConnLost) {
		t.Errorf("server Recv = %v, want ErrConnLost", err)
	}
	<-served
	if _, err := cl.OpenStream(t.Context(), openFrame("wait")); !errors.Is(err, ErrNotSent) {
		t.Errorf("OpenStream on a lost connection = %v, want ErrNotSent", err)
	}
}

// TestStreamsConcurrent runs 1,000 streams at once on one connection.
func TestStreamsConcurrent(t *testing.T) {
	leak.Check(t)
	const streams, msgs = 1000, 10
	cl, _ := streamServer(t, bidiEcho, Options{}, Options{})
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	open := make([]*ClientStream, streams)
	for i := range streams {
		cs, err := cl.OpenStream(ctx, openFrame("echo"))
		if err != nil {
			t.Fatal(err)
		}
		open[i] = cs
	}
	for i, cs := range open {
		wg.Go(func() {
			for j := range msgs {
				m := fmt.Sprintf("%d/%d", i, j)
				if err := cs.Send(ctx, wire.CodecNone, []byte(m)); err != nil {
					errs <- err
					return
				}
				if _, p, err := cs.Recv(ctx); err != nil || string(p) != m {
					errs <- fmt.Errorf("stream %d: got %q, %v; want %q", i, p, err, m)
					return
				}
			}
			cs.CloseSend()
			if _, err := recvAll(ctx, cs); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestStreamRefused(t *testing.T) {
	leak.Check(t)
	t.Run("MaxStreams", func(t *testing.T) {
		release := make(chan struct{})
		sh := func(ctx context.Context, ss *ServerStream) error {
			<-release
			return nil
		}
		cl, _ := streamServer(t, sh, Options{MaxStreams: 2}, Options{})
		defer close(release)
		var open []*ClientStream
		for range 2 {
			cs, err := cl.OpenStream(t.Context(), openFrame("hold"))
			if err != nil {
				t.Fatal(err)
			}
			open = append(open, cs)
		}
		cs, err := cl.OpenStream(t.Context(), openFrame("hold"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = recvAll(t.Context(), cs)
		var se *StreamError
		if !errors.As(err, &se) || se.Code != codeResourceExhausted || !se.Refused {
			t.Errorf("the stream beyond MaxStreams ended with %#v, want resource_exhausted, refused", err)
		}
	})
	t.Run("no stream handler", func(t *testing.T) {
		s := listen(t, echo, Options{})
		cl := s.dial(t, Options{})
		cs, err := cl.OpenStream(t.Context(), openFrame("any"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := recvAll(t.Context(), cs); streamCode(err) != codeUnimplemented {
			t.Errorf("a stream to a server without stream handler ended with %v, want unimplemented", err)
		}
		if _, err := cl.Call(t.Context(), reqFrame(0, "x")); err != nil {
			t.Errorf("call after the refused stream: %v", err)
		}
	})
	t.Run("old server", func(t *testing.T) {
		// A server that predates streams: its handshake has no feature.
		cconn, sconn := net.Pipe()
		defer sconn.Close()
		go func() {
			io.ReadFull(sconn, make([]byte, wire.HandshakeSize))
			wire.WriteHandshake(sconn)
			io.Copy(io.Discard, sconn)
		}()
		cl, err := NewClient(cconn, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if _, err := cl.OpenStream(t.Context(), openFrame("any")); err != ErrStreamsUnsupported {
			t.Errorf("OpenStream to an old server = %v, want ErrStreamsUnsupported", err)
		}
	})
}

// TestStreamCreditViolation has a raw client send more data than its
// credit: the server ends the stream with resource_exhausted, and the
// connection goes on.
func TestStreamCreditViolation(t *testing.T) {
	leak.Check(t)
	sh := func(ctx context.Context, ss *ServerStream) error {
		<-ctx.Done()
		return ctx.Err()
	}
	s := listen(t, echo, Options{ServeStream: sh})
	r := s.dialRaw(t)
	r.write([]byte("WZRD\x01\x01\x00\x00"))
	if feat, err := wire.ReadHandshakeFeatures(r.br); err != nil || !feat.Has(wire.FeatureStreams) {
		t.Fatalf("server handshake: features %#x, %v", feat, err)
	}
	r.send(&wire.Frame{Type: wire.TypeStreamOpen, ID: 1, Pattern: "any"})
	p := make([]byte, wire.InitialWindow/2)
	for range 3 { // the third is beyond the credit
		r.send(&wire.Frame{Type: wire.TypeStreamData, ID: 1, Payload: p})
	}
	r.send(reqFrame(2, "after"))
	var end, resp *wire.Frame
	for end == nil || resp == nil {
		f, err := r.read()
		if err != nil {
			t.Fatal(err)
		}
		switch f.Type {
		case wire.TypeStreamEnd:
			end = f
		case wire.TypeResponse:
			resp = f
		}
	}
	if code, _, _ := wire.DecodeError(end.Payload); code != codeResourceExhausted {
		t.Errorf("end code %d, want resource_exhausted", code)
	}
	if string(resp.Payload) != "after" {
		t.Errorf("call after the violation answered %q", resp.Payload)
	}
}

// TestStreamGracefulShutdown: a shutdown lets an open stream finish
// within the drain, refuses new streams with ErrGoingAway, and ends the
// streams still open at the drain timeout with the lost connection.
func TestStreamGracefulShutdown(t *testing.T) {
	leak.Check(t)
	for _, finish := range []bool{true, false} {
		t.Run(fmt.Sprintf("finishes=%v", finish), func(t *testing.T) {
			started := make(chan struct{})
			sh := func(ctx context.Context, ss *ServerStream) error {
				close(started)
				if finish {
					return bidiEcho(ctx, ss)
				}
				for { // the client sends one message, then waits
					if _, _, err := ss.Recv(context.Background()); err != nil {
						return err
					}
				}
			}
			cconn, sconn := net.Pipe()
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			served := make(chan error, 1)
			go func() {
				drain := 200 * time.Millisecond // the stream waits on: the drain ends it
				if finish {
					drain = time.Minute // the stream ends first
				}
				served <- Serve(ctx, sconn, echo, Options{ServeStream: sh, DrainTimeout: drain})
			}()
			cl, err := NewClient(cconn, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			cs, err := cl.OpenStream(t.Context(), openFrame("echo"))
			if err != nil {
				t.Fatal(err)
			}
			if err := cs.Send(t.Context(), wire.CodecNone, []byte("a")); err != nil {
				t.Fatal(err)
			}
			if finish {
				if _, _, err := cs.Recv(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			<-started // the server took the stream before its goaway
			stop()
			for !cl.GoAway() {
				select {
				case <-cl.Done():
					t.Fatalf("connection ended before the goaway came: %v", cl.Err())
				default:
				}
				cl.Call(t.Context(), reqFrame(0, "x")) // waits for the reader, which reads the goaway
			}
			if _, err := cl.OpenStream(t.Context(), openFrame("echo")); err != ErrGoingAway {
				t.Errorf("OpenStream after the goaway = %v, want ErrGoingAway", err)
			}
			if finish {
				if err := cs.Send(t.Context(), wire.CodecNone, []byte("b")); err != nil {
					t.Fatal(err)
				}
				cs.CloseSend()
				got, err := recvAll(t.Context(), cs)
				if err != nil || len(got) != 1 {
					t.Errorf("stream during the drain: %v, %v", got, err)
				}
				if err := <-served; err != nil {
					t.Errorf("Serve = %v, want nil after a graceful shutdown", err)
				}
				return
			}
			if _, err := recvAll(t.Context(), cs); !errors.Is(err, ErrConnLost) {
				t.Errorf("a stream open past the drain ended with %v, want ErrConnLost", err)
			}
			if err := <-served; !errors.Is(err, errDrainTimeout) {
				t.Errorf("Serve = %v, want the drain timeout", err)
			}
		})
	}
}

// TestStreamSlowServer is TestStreamSlowConsumer the other way: a
// handler that does not read stops the client's Send once the window is
// spent, and holds at most the window.
func TestStreamSlowServer(t *testing.T) {
	leak.Check(t)
	const msg = 1 << 10
	held := make(chan int, 1)
	release := make(chan struct{})
	sh := func(ctx context.Context, ss *ServerStream) error {
		<-release
		held <- ss.Queued()
		for {
			if _, _, err := ss.Recv(ctx); err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
		}
	}
	cl, _ := streamServer(t, sh, Options{}, Options{})
	ctx := t.Context()
	cs, err := cl.OpenStream(ctx, openFrame("slow"))
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, msg)
	for range wire.InitialWindow / (msg + wire.MessageCost) {
		if err := cs.Send(ctx, wire.CodecNone, p); err != nil {
			t.Fatal(err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := cs.Send(short, wire.CodecNone, p); err != context.DeadlineExceeded {
		t.Fatalf("Send beyond the window = %v, want it to block (DeadlineExceeded)", err)
	}
	close(release)
	if q := <-held; q > wire.InitialWindow {
		t.Errorf("the server held %d bytes, want at most the window (%d)", q, wire.InitialWindow)
	}
	if err := cs.Send(ctx, wire.CodecNone, p); err != nil {
		t.Fatal(err)
	}
	cs.CloseSend()
	if _, err := recvAll(ctx, cs); err != nil {
		t.Fatal(err)
	}
}

func TestStreamOptions(t *testing.T) {
	for name, o := range map[string]Options{
		"window below the initial one": {StreamWindow: wire.InitialWindow - 1},
		"window above 1 GiB":           {StreamWindow: maxStreamWindow + 1},
		"negative MaxStreams":          {MaxStreams: -1},
	} {
		if _, err := o.normalize(); err == nil {
			t.Errorf("%s: normalize accepted %+v", name, o)
		}
	}
	o, err := Options{}.normalize()
	if err != nil || o.StreamWindow != DefaultStreamWindow || o.MaxStreams != DefaultMaxStreams {
		t.Errorf("defaults: window %d, MaxStreams %d, %v", o.StreamWindow, o.MaxStreams, err)
	}
}

// TestStreamSilentServer: a server that goes silent under an open stream
// (it reads, never answers) is found by the client's keep-alive, which
// watches the peer while streams are open as while calls wait; the
// stream ends with the lost connection.
func TestStreamSilentServer(t *testing.T) {
	leak.Check(t)
	cconn, sconn := net.Pipe()
	defer sconn.Close()
	go func() {
		io.ReadFull(sconn, make([]byte, wire.HandshakeSize))
		wire.WriteHandshakeFeatures(sconn, wire.FeatureStreams)
		io.Copy(io.Discard, sconn) // reads everything, answers nothing
	}()
	cl, err := NewClient(cconn, Options{KeepAlive: time.Hour, BusyKeepAlive: 20 * time.Millisecond, BusyKeepAliveTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cs, err := cl.OpenStream(t.Context(), openFrame("any"))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = cs.Recv(t.Context())
	if !errors.Is(err, ErrConnLost) || !errors.Is(err, ErrKeepAliveTimeout) {
		t.Errorf("Recv on a silent server = %v, want ErrConnLost for the keep-alive timeout", err)
	}
}

// TestStreamSilentClient: a client that goes silent under an open stream
// is found by the server's keep-alive; the handler's Recv ends with the
// lost connection.
func TestStreamSilentClient(t *testing.T) {
	leak.Check(t)
	handlerEnd := make(chan error, 1)
	sh := func(ctx context.Context, ss *ServerStream) error {
		_, _, err := ss.Recv(context.Background())
		handlerEnd <- err
		return err
	}
	cconn, sconn := net.Pipe()
	defer cconn.Close()
	served := make(chan error, 1)
	go func() {
		served <- Serve(context.Background(), sconn, echo, Options{ServeStream: sh, KeepAlive: 20 * time.Millisecond, KeepAliveTimeout: 50 * time.Millisecond})
	}()
	r := newRaw(t, cconn)
	r.write([]byte("WZRD\x01\x01\x00\x00"))
	if err := wire.ReadHandshake(r.br); err != nil {
		t.Fatal(err)
	}
	r.send(&wire.Frame{Type: wire.TypeStreamOpen, ID: 1, Pattern: "any"})
	go io.Copy(io.Discard, r.br) // reads everything, answers nothing
	if err := <-handlerEnd; !errors.Is(err, ErrConnLost) || !errors.Is(err, ErrKeepAliveTimeout) {
		t.Errorf("server Recv under a silent client = %v, want ErrConnLost for the keep-alive timeout", err)
	}
	if err := <-served; !errors.Is(err, ErrKeepAliveTimeout) {
		t.Errorf("Serve = %v, want ErrKeepAliveTimeout", err)
	}
}

// TestStreamWindowGrows: a receiver that keeps up with a stream of large
// messages grows its window (to flow.MaxGrown at most, within the
// connection's budget), one of small messages does not, and a stream's
// growth goes back to the budget when it ends.
func TestStreamWindowGrows(t *testing.T) {
	for _, tc := range []struct {
		size  int
		grows bool
	}{{64 << 10, true}, {1 << 10, false}} {
		t.Run(strconv.Itoa(tc.size), func(t *testing.T) {
			leak.Check(t)
			const total = 32 << 20
			sh := func(ctx context.Context, ss *ServerStream) error {
				p := make([]byte, tc.size)
				for range total / tc.size {
					if err := ss.Send(ctx, wire.CodecNone, p); err != nil {
						return err
					}
				}
				return nil
			}
			cl, _ := streamServer(t, sh, Options{}, Options{})
			ctx := t.Context()
			cs, err := cl.OpenStream(ctx, openFrame("big"))
			if err != nil {
				t.Fatal(err)
			}
			largest := 0
			for {
				_, _, err := cs.Recv(ctx)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				cs.st.mu.Lock()
				largest = max(largest, cs.st.flow.Window())
				cs.st.mu.Unlock()
			}
			if grew := largest > wire.InitialWindow; grew != tc.grows || largest > flow.MaxGrown {
				t.Fatalf("messages of %d bytes: the window reached %d (initial %d, most %d); want growth %v", tc.size, largest, wire.InitialWindow, flow.MaxGrown, tc.grows)
			}
			if g := cl.c.grown.Load(); g != 0 {
				t.Fatalf("after the stream's end the connection's windows are still grown by %d", g)
			}
			t.Logf("messages of %d bytes: the window reached %d", tc.size, largest)
		})
	}
}
