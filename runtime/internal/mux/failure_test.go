package mux

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// TestServerBadInput sends a server bad input on one connection while a
// good client uses another: the bad connection is closed with a logged
// reason and Serve returns it; the good one keeps working.
func TestServerBadInput(t *testing.T) {
	valid := wire.AppendFrame(nil, reqFrame(1, "hello"))
	tests := []struct {
		name      string
		opts      Options
		handler   Handler
		handshake bool                       // do the handshake first
		act       func(t *testing.T, r *raw) // the bad behaviour
		want      error                      // errors.Is(Serve's error, want)
		wantAs    any                        // or errors.As
		log       string                     // in the log
	}{
		{
			name: "wrong magic",
			act:  func(t *testing.T, r *raw) { r.write([]byte("GET / HTTP/1.1\r\n\r\n")) },
			want: wire.ErrBadMagic, log: "bad handshake magic",
		},
		{
			name: "wrong version",
			act: func(t *testing.T, r *raw) {
				r.write([]byte("WZRD\x02\x00\x00\x00"))
				// The server still answers with its own version.
				if err := wire.ReadHandshake(r.br); err != nil {
					t.Errorf("server's handshake: %v", err)
				}
			},
			wantAs: new(*wire.VersionError), log: "peer speaks wire version 2, this side speaks version 1",
		},
		{
			name: "silent", opts: Options{HandshakeTimeout: 50 * time.Millisecond},
			act:  func(t *testing.T, r *raw) {},
			want: errHandshakeTimeout, log: "handshake timed out",
		},
		{
			name: "garbage", handshake: true,
			act: func(t *testing.T, r *raw) {
				r.write([]byte("\x00\x00\x00\x10\xee\xee\xee\xee\xee\xee\xee\xee\xee\xee\xee\xee\xee\xee\xee\xee"))
			},
			want: wire.ErrMalformed, log: "unknown frame type",
		},
		{
			name: "text", handshake: true,
			act:  func(t *testing.T, r *raw) { r.write([]byte("hello, is anybody there?\n")) },
			want: wire.ErrFrameTooLarge, log: "frame too large",
		},
		{
			name: "oversized", handshake: true,
			act:  func(t *testing.T, r *raw) { r.write([]byte("\x7f\xff\xff\xff\x01")) },
			want: wire.ErrFrameTooLarge, log: "frame too large",
		},
		{
			name: "above a small limit", handshake: true, opts: Options{MaxFrameSize: 100},
			act:  func(t *testing.T, r *raw) { r.send(&wire.Frame{Type: wire.TypeRequest, Payload: make([]byte, 100)}) },
			want: wire.ErrFrameTooLarge, log: "limit 100 bytes",
		},
		{
			name: "short length", handshake: true,
			act:  func(t *testing.T, r *raw) { r.write([]byte("\x00\x00\x00\x02\x01\x00")) },
			want: wire.ErrMalformed, log: "length below the minimum frame size",
		},
		{
			name: "truncated", handshake: true,
			act: func(t *testing.T, r *raw) {
				r.write(valid[:len(valid)/2])
				r.conn.(*net.TCPConn).CloseWrite()
			},
			want: io.ErrUnexpectedEOF, log: "unexpected EOF",
		},
		{
			name: "bad meta", handshake: true,
			act: func(t *testing.T, r *raw) {
				b := wire.AppendFrame(nil, reqFrame(1, ""))
				b[len(b)-1] = 0x7f // meta count
				r.write(b)
			},
			want: wire.ErrMalformed, log: "meta count exceeds the frame",
		},
		{
			name: "response from a client", handshake: true,
			act:  func(t *testing.T, r *raw) { r.send(&wire.Frame{Type: wire.TypeResponse, ID: 1}) },
			want: ErrProtocol, log: "client sent a response frame",
		},
		{
			name: "duplicate id", handshake: true,
			handler: func(ctx context.Context, req *wire.Frame) *wire.Frame {
				if string(req.Payload) == "a" {
					<-ctx.Done() // still running when the duplicate comes
				}
				return echo(ctx, req)
			},
			act: func(t *testing.T, r *raw) {
				r.send(reqFrame(5, "a"))
				r.send(reqFrame(5, "b"))
			},
			want: ErrProtocol, log: "duplicate request id 5",
		},
		{
			name: "stall mid-frame", handshake: true,
			opts: Options{KeepAlive: 20 * time.Millisecond, KeepAliveTimeout: 50 * time.Millisecond},
			act:  func(t *testing.T, r *raw) { r.write(valid[:10]) },
			want: ErrKeepAliveTimeout, log: "did not answer a ping",
		},
		{
			name: "stall in the handshake", opts: Options{HandshakeTimeout: 50 * time.Millisecond},
			act:  func(t *testing.T, r *raw) { r.write([]byte("WZ")) },
			want: errHandshakeTimeout, log: "handshake timed out",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leak.Check(t)
			var logs testlog.Buffer
			opts := tt.opts
			opts.Logger = logs.Logger()
			h := tt.handler
			if h == nil {
				h = echo
			}
			s := listen(t, h, opts)
			good := s.dial(t, Options{})
			if _, err := good.Call(t.Context(), reqFrame(0, "before")); err != nil {
				t.Fatalf("good client before: %v", err)
			}

			r := s.dialRaw(t)
			if tt.handshake {
				r.handshake()
			}
			tt.act(t, r)
			err := testwait.Recv(t, s.served)
			switch {
			case tt.wantAs != nil:
				if !errors.As(err, tt.wantAs) {
					t.Errorf("Serve = %v, want a %T", err, tt.wantAs)
				}
			case !errors.Is(err, tt.want):
				t.Errorf("Serve = %v, want %v", err, tt.want)
			}
			if log := logs.String(); !strings.Contains(log, "connection closed") || !strings.Contains(log, tt.log) {
				t.Errorf("log does not give the reason %q:\n%s", tt.log, log)
			}
			// The record names the peer, handshake failures included.
			if log := logs.String(); !strings.Contains(log, "remote="+r.conn.LocalAddr().String()) {
				t.Errorf("log does not name the peer %s:\n%s", r.conn.LocalAddr(), log)
			}
			// The server closed the bad connection.
			r.conn.SetReadDeadline(time.Now().Add(testwait.Guard))
			if _, err := io.ReadAll(r.br); err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
				t.Errorf("reading the closed connection: %v", err)
			}

			resp, err := good.Call(t.Context(), reqFrame(0, "after"))
			if err != nil || string(resp.Payload) != "after" {
				t.Errorf("good client after: %v, %v", resp, err)
			}
		})
	}
}

// rawServer accepts one TCP connection and hands it to act.
func rawServer(t *testing.T, act func(r *raw)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		ln.Close()
		if err != nil {
			return
		}
		r := &raw{t: t, conn: conn, br: newRaw(t, conn).br}
		act(r)
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}

func TestClientBadHandshake(t *testing.T) {
	tests := []struct {
		name   string
		answer string
		check  func(error) bool
	}{
		{"wrong version", "WZRD\x07\x00\x00\x00", func(err error) bool {
			var ve *wire.VersionError
			return errors.As(err, &ve) && ve.Got == 7 && ve.Want == 1
		}},
		{"wrong magic", "SSH-2.0-", func(err error) bool { return errors.Is(err, wire.ErrBadMagic) }},
		{"hang up", "", func(err error) bool { return errors.Is(err, io.EOF) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leak.Check(t)
			addr := rawServer(t, func(r *raw) {
				io.ReadFull(r.br, make([]byte, 8))
				r.conn.Write([]byte(tt.answer))
				r.conn.Close()
			})
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := NewClient(conn, Options{})
			if cl != nil || !tt.check(err) {
				t.Errorf("NewClient = %v, %v", cl, err)
			}
		})
	}
}

func TestClientBadInput(t *testing.T) {
	tests := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"garbage", []byte("\x00\x00\x00\x0e\xff\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00"), wire.ErrMalformed},
		{"oversized", []byte("\x01\x00\x00\x00"), wire.ErrFrameTooLarge},
		{"request from a server", wire.AppendFrame(nil, reqFrame(1, "")), ErrProtocol},
		{"truncated", wire.AppendFrame(nil, &wire.Frame{Type: wire.TypeResponse, ID: 1})[:9], io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leak.Check(t)
			var logs testlog.Buffer
			addr := rawServer(t, func(r *raw) {
				r.write([]byte("WZRD\x01\x00\x00\x00"))
				if err := wire.ReadHandshake(r.br); err != nil {
					t.Error(err)
					return
				}
				if _, err := r.read(); err != nil { // the client's call
					t.Error(err)
					return
				}
				r.write(tt.frame)
				r.conn.Close()
			})
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := NewClient(conn, Options{Logger: logs.Logger()})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			_, err = cl.Call(t.Context(), reqFrame(0, "x"))
			if !errors.Is(err, ErrConnLost) || !errors.Is(err, tt.want) {
				t.Errorf("Call = %v, want ErrConnLost and %v", err, tt.want)
			}
			testwait.Recv(t, cl.Done())
			if !errors.Is(cl.Err(), tt.want) {
				t.Errorf("Err() = %v, want %v", cl.Err(), tt.want)
			}
			if !strings.Contains(logs.String(), "connection closed") {
				t.Errorf("no reason logged:\n%s", logs.String())
			}
			// Later calls are refused as not sent.
			if _, err := cl.Call(t.Context(), reqFrame(0, "y")); !errors.Is(err, ErrNotSent) || !errors.Is(err, tt.want) {
				t.Errorf("Call after the end = %v, want ErrNotSent and %v", err, tt.want)
			}
		})
	}
}

func TestNotSentVersusConnLost(t *testing.T) {
	t.Run("lost before writing", func(t *testing.T) {
		leak.Check(t)
		// The server hangs up right after the handshake, reading nothing.
		hungUp := make(chan struct{})
		addr := rawServer(t, func(r *raw) {
			r.write([]byte("WZRD\x01\x00\x00\x00"))
			wire.ReadHandshake(r.br)
			r.conn.(*net.TCPConn).SetLinger(0)
			r.conn.Close()
			close(hungUp)
		})
		cl := dialAddr(t, addr, Options{})
		testwait.Recv(t, hungUp)
		testwait.Recv(t, cl.Done())
		_, err := cl.Call(t.Context(), reqFrame(0, "x"))
		if !errors.Is(err, ErrNotSent) || errors.Is(err, ErrConnLost) {
			t.Errorf("Call = %v, want ErrNotSent", err)
		}
	})

	t.Run("lost after writing", func(t *testing.T) {
		leak.Check(t)
		// The server reads the whole request, then hangs up.
		addr := rawServer(t, func(r *raw) {
			r.write([]byte("WZRD\x01\x00\x00\x00"))
			wire.ReadHandshake(r.br)
			r.read()
			r.conn.Close()
		})
		cl := dialAddr(t, addr, Options{})
		_, err := cl.Call(t.Context(), reqFrame(0, "x"))
		if !errors.Is(err, ErrConnLost) || errors.Is(err, ErrNotSent) {
			t.Errorf("Call = %v, want ErrConnLost", err)
		}
	})

	t.Run("close with frames queued", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// A's frame is larger than the write buffer, so the writer
			// hands it to the stream at once; the server takes 100 bytes of
			// it and stops reading, so the writer is stuck in A while B and
			// C wait in the queue. Closing then fails A as lost (some of it
			// left) and B, C as not sent.
			cconn, sconn := net.Pipe()
			took := make(chan struct{})
			go func() {
				defer sconn.Close()
				io.ReadFull(sconn, make([]byte, 8))
				sconn.Write([]byte("WZRD\x01\x00\x00\x00"))
				io.ReadFull(sconn, make([]byte, 100))
				close(took)
				<-t.Context().Done()
			}()
			cl, err := NewClient(cconn, Options{})
			if err != nil {
				t.Fatal(err)
			}
			errs := make(map[string]chan error)
			call := func(name string, size int) {
				errs[name] = make(chan error, 1)
				go func() {
					_, err := cl.Call(t.Context(), &wire.Frame{Pattern: name, Payload: make([]byte, size)})
					errs[name] <- err
				}()
				synctest.Wait() // queued, in this order
			}
			call("A", 2*bufferSize)
			<-took
			call("B", 10)
			call("C", 10)
			cl.Close()
			got := map[string]string{}
			for name, ch := range errs {
				got[name] = closedFate(<-ch)
			}
			want := map[string]string{"A": "lost", "B": "not sent", "C": "not sent"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	})

	t.Run("closed client", func(t *testing.T) {
		leak.Check(t)
		p := newPair(t, echo, Options{}, Options{})
		p.client.Close()
		p.client.Close() // idempotent
		if _, err := p.client.Call(t.Context(), &wire.Frame{}); !errors.Is(err, ErrNotSent) || !errors.Is(err, ErrClosed) {
			t.Errorf("Call after Close = %v, want ErrNotSent wrapping ErrClosed", err)
		}
		if err := p.client.Err(); err != ErrClosed {
			t.Errorf("Err() = %v, want ErrClosed", err)
		}
		// The server saw a clean end of stream.
		err := testwait.Recv(t, p.served)
		if err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
		p.served <- err // for the cleanup
	})
}

// silentServer returns the client's end of a pipe to a server that
// handshakes, then reads everything and answers nothing.
func silentServer() net.Conn {
	cconn, sconn := net.Pipe()
	go func() {
		defer sconn.Close()
		io.ReadFull(sconn, make([]byte, 8))
		sconn.Write([]byte("WZRD\x01\x00\x00\x00"))
		io.Copy(io.Discard, sconn)
	}()
	return cconn
}

func TestKeepAlive(t *testing.T) {
	t.Run("healthy", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			opts := Options{KeepAlive: time.Second, KeepAliveTimeout: time.Second}
			p := newPair(t, echo, opts, opts)
			time.Sleep(time.Hour) // in the bubble: an hour of pings, instantly
			if _, err := p.client.Call(t.Context(), &wire.Frame{}); err != nil {
				t.Errorf("call after an hour: %v", err)
			}
			if err := p.client.Err(); err != nil {
				t.Errorf("Err() = %v", err)
			}
		})
	})

	t.Run("dead server", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// The server reads everything and answers nothing.
			cconn := silentServer()
			cl, err := NewClient(cconn, Options{KeepAlive: time.Second, KeepAliveTimeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			start := time.Now()
			_, err = cl.Call(t.Context(), &wire.Frame{})
			if !errors.Is(err, ErrConnLost) || !errors.Is(err, ErrKeepAliveTimeout) {
				t.Errorf("Call = %v, want ErrConnLost wrapping ErrKeepAliveTimeout", err)
			}
			if d := time.Since(start); d != 1250*time.Millisecond {
				t.Errorf("dead peer found after %v, want 1.25s (with a call waiting: ping after 250ms of silence, timeout 1s)", d)
			}
			if !errors.Is(cl.Err(), ErrKeepAliveTimeout) {
				t.Errorf("Err() = %v", cl.Err())
			}
		})
	})

	t.Run("silent server, default options", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// A server that goes silent (a partition: nothing comes, nothing
			// fails) while a call waits on it is found within 1.25s,
			// not after the idle interval and timeout (15s + 10s); with
			// nothing waiting, the idle interval holds.
			cconn := silentServer()
			cl, err := NewClient(cconn, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			time.Sleep(DefaultKeepAlive - time.Second) // idle: no ping yet
			start := time.Now()
			_, err = cl.Call(t.Context(), &wire.Frame{})
			if !errors.Is(err, ErrConnLost) || !errors.Is(err, ErrKeepAliveTimeout) {
				t.Errorf("Call = %v, want ErrConnLost wrapping ErrKeepAliveTimeout", err)
			}
			if d, want := time.Since(start), DefaultBusyKeepAlive+DefaultBusyKeepAliveTimeout; d != want {
				t.Errorf("silent peer found %v after the call, want %v", d, want)
			}
		})
	})

	t.Run("slow handler, default options", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// A handler that takes a minute: the server answers pings
			// meanwhile, so the waiting call is not taken for lost.
			slow := func(ctx context.Context, req *wire.Frame) *wire.Frame {
				time.Sleep(time.Minute)
				return &wire.Frame{Type: wire.TypeResponse, Payload: req.Payload}
			}
			p := newPair(t, slow, Options{ServeTimeout: 2 * time.Minute}, Options{})
			start := time.Now()
			if _, err := p.client.Call(t.Context(), &wire.Frame{Payload: []byte("x")}); err != nil {
				t.Errorf("call of a minute: %v", err)
			}
			if d := time.Since(start); d != time.Minute {
				t.Errorf("call took %v, want 1m", d)
			}
		})
	})

	t.Run("dead client", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cconn, sconn := net.Pipe()
			served := make(chan error, 1)
			go func() {
				served <- Serve(t.Context(), sconn, echo, Options{KeepAlive: time.Second, KeepAliveTimeout: time.Second})
			}()
			cconn.Write([]byte("WZRD\x01\x00\x00\x00"))
			go io.Copy(io.Discard, cconn)
			if err := <-served; !errors.Is(err, ErrKeepAliveTimeout) {
				t.Errorf("Serve = %v, want ErrKeepAliveTimeout", err)
			}
			cconn.Close()
		})
	})

	t.Run("off", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// Neither side pings: a silent peer is never dropped.
			cconn, sconn := net.Pipe()
			go func() {
				io.ReadFull(sconn, make([]byte, 8))
				sconn.Write([]byte("WZRD\x01\x00\x00\x00"))
				io.Copy(io.Discard, sconn)
			}()
			cl, err := NewClient(cconn, Options{KeepAlive: -1})
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Hour)
			if err := cl.Err(); err != nil {
				t.Errorf("Err() = %v", err)
			}
			cl.Close()
			sconn.Close()
		})
	})
}

func TestGoAway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started := make(chan string, 10)
		release := make(chan struct{})
		h := func(ctx context.Context, req *wire.Frame) *wire.Frame {
			started <- req.Pattern
			<-release
			return &wire.Frame{Type: wire.TypeResponse, Payload: []byte(req.Pattern)}
		}
		cconn, sconn := net.Pipe()
		ctx, shutdown := context.WithCancel(t.Context())
		served := make(chan error, 1)
		go func() { served <- Serve(ctx, sconn, h, Options{}) }()
		cl, err := NewClient(cconn, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()

		answers := make(chan string, 2)
		for _, name := range []string{"A", "B"} {
			go func() {
				resp, err := cl.Call(t.Context(), &wire.Frame{Pattern: name})
				if err != nil {
					answers <- err.Error()
					return
				}
				answers <- string(resp.Payload)
			}()
			<-started
		}

		shutdown()
		synctest.Wait() // the goaway has reached the client
		if !cl.GoAway() {
			t.Fatal("GoAway() = false after the server's goaway")
		}
		if _, err := cl.Call(t.Context(), &wire.Frame{Pattern: "C"}); err != ErrGoingAway || !errors.Is(err, ErrNotSent) {
			t.Errorf("new call after goaway = %v, want ErrGoingAway", err)
		}

		close(release)
		got := []string{<-answers, <-answers}
		if got[0] > got[1] {
			got[0], got[1] = got[1], got[0]
		}
		if diff := cmp.Diff([]string{"A", "B"}, got); diff != "" {
			t.Errorf("in-flight calls (-want +got):\n%s", diff)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve = %v, want nil after a graceful shutdown", err)
		}
		<-cl.Done()
	})
}

func TestGoAwayRefusesCrossingRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A raw client keeps sending after the goaway: requests above the
		// goaway's id do not run, and are not answered.
		ran := make(chan uint64, 10)
		h := func(ctx context.Context, req *wire.Frame) *wire.Frame {
			ran <- req.ID
			return &wire.Frame{Type: wire.TypeResponse}
		}
		cconn, sconn := net.Pipe()
		ctx, shutdown := context.WithCancel(t.Context())
		served := make(chan error, 1)
		block := make(chan struct{})
		go func() {
			served <- Serve(ctx, sconn, func(ctx context.Context, req *wire.Frame) *wire.Frame {
				if req.ID == 1 {
					<-block // keeps the server draining
				}
				return h(ctx, req)
			}, Options{})
		}()
		r := newRaw(t, cconn)
		r.handshake()
		r.send(reqFrame(1, ""))
		synctest.Wait() // request 1 is running
		shutdown()
		goaway, err := r.read()
		if err != nil || goaway.Type != wire.TypeGoAway || goaway.ID != 1 {
			t.Fatalf("read %+v, %v; want a goaway with id 1", goaway, err)
		}
		r.send(reqFrame(2, ""))
		r.send(reqFrame(3, ""))
		close(block)
		frames := r.readAll()
		if len(frames) != 1 || frames[0].ID != 1 {
			t.Errorf("after the goaway the server sent %+v, want the answer to 1 only", frames)
		}
		if id := <-ran; id != 1 {
			t.Errorf("ran request %d", id)
		}
		if len(ran) != 0 {
			t.Errorf("requests above the goaway ran")
		}
		if err := <-served; err != nil {
			t.Errorf("Serve = %v", err)
		}
	})
}

func TestDrainTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ended := make(chan error, 1)
		h := func(ctx context.Context, req *wire.Frame) *wire.Frame {
			<-ctx.Done()
			ended <- ctx.Err()
			return &wire.Frame{Type: wire.TypeResponse}
		}
		cconn, sconn := net.Pipe()
		ctx, shutdown := context.WithCancel(t.Context())
		served := make(chan error, 1)
		go func() { served <- Serve(ctx, sconn, h, Options{DrainTimeout: 5 * time.Second}) }()
		cl, err := NewClient(cconn, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		called := make(chan error, 1)
		go func() {
			_, err := cl.Call(t.Context(), &wire.Frame{})
			called <- err
		}()
		synctest.Wait()
		start := time.Now()
		shutdown()
		if err := <-served; !errors.Is(err, errDrainTimeout) {
			t.Errorf("Serve = %v, want the drain timeout", err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Errorf("Serve returned after %v, want 5s", d)
		}
		if err := <-ended; err != context.Canceled {
			t.Errorf("handler's ctx.Err() = %v, want context.Canceled", err)
		}
		if err := <-called; !errors.Is(err, ErrConnLost) {
			t.Errorf("Call = %v, want ErrConnLost", err)
		}
	})
}

func TestServeContextDoneDuringHandshake(t *testing.T) {
	leak.Check(t)
	cconn, sconn := net.Pipe()
	defer cconn.Close()
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, sconn, echo, Options{}) }()
	cancel()
	if err := testwait.Recv(t, served); err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}
}

func TestGoAwayFailsCallsAboveLastID(t *testing.T) {
	leak.Check(t)
	// The server has two requests, says goaway naming the first, answers
	// it and hangs up: the second fails as refused, safe to retry.
	addr := rawServer(t, func(r *raw) {
		r.write([]byte("WZRD\x01\x00\x00\x00"))
		if err := wire.ReadHandshake(r.br); err != nil {
			t.Error(err)
			return
		}
		var ids []uint64
		var first string
		for len(ids) < 2 {
			f, err := r.read()
			if err != nil {
				t.Error(err)
				return
			}
			if f.Type == wire.TypeRequest {
				if len(ids) == 0 {
					first = f.Pattern
				}
				ids = append(ids, f.ID)
			}
		}
		r.send(&wire.Frame{Type: wire.TypeGoAway, ID: ids[0]})
		r.send(&wire.Frame{Type: wire.TypeResponse, ID: ids[0], Payload: []byte(first)})
		io.Copy(io.Discard, r.br) // until the client hangs up
	})
	cl := dialAddr(t, addr, Options{})

	type result struct {
		name, answer string
		err          error
	}
	results := make(chan result, 2)
	for _, name := range []string{"A", "B"} {
		go func() {
			resp, err := cl.Call(t.Context(), &wire.Frame{Pattern: name})
			if err != nil {
				results <- result{name: name, err: err}
				return
			}
			results <- result{name: name, answer: string(resp.Payload)}
		}()
	}
	r1, r2 := testwait.Recv(t, results), testwait.Recv(t, results)
	if r1.err != nil {
		r1, r2 = r2, r1
	}
	if r1.err != nil || r1.answer != r1.name {
		t.Errorf("the call below the goaway: %+v, want its answer", r1)
	}
	if r2.err != ErrGoingAway || !errors.Is(r2.err, ErrNotSent) {
		t.Errorf("the call above the goaway: %+v, want ErrGoingAway", r2)
	}
	if !cl.GoAway() {
		t.Error("GoAway() = false")
	}
	if _, err := cl.Call(t.Context(), &wire.Frame{}); err != ErrGoingAway {
		t.Errorf("a new call: %v, want ErrGoingAway", err)
	}
}
