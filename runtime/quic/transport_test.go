package quic

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	quicgo "github.com/quic-go/quic-go"

	"github.com/wizardmesh/wizard/internal/testkit/need"
	wizard "github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/bridge"
	"github.com/wizardmesh/wizard/runtime/internal/mux"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// guard bounds every wait in these tests: on a loaded machine things are
// slow, but nothing should take this long.
const guard = 15 * time.Second

// serverFunc adapts a function to wizard.Server.
type serverFunc func(context.Context, *wizard.Message) *wizard.Message

func (f serverFunc) ServeMessage(ctx context.Context, m *wizard.Message) *wizard.Message {
	return f(ctx, m)
}

// echo answers with the call's payload.
func echo(_ context.Context, m *wizard.Message) *wizard.Message {
	return &wizard.Message{Codec: m.Codec, Payload: m.Payload}
}

// mustNew returns a transport made with opts, which must be valid.
func mustNew(t testing.TB, opts ...Option) *Transport {
	t.Helper()
	tr, err := New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// pair listens with s on 127.0.0.1 and dials the listener, both with a
// transport made of opts and a self-signed certificate.
func pair(t *testing.T, s wizard.Server, opts ...Option) (*Transport, *Listener, *Conn) {
	t.Helper()
	tr := mustNew(t, append([]Option{WithInsecureSelfSigned()}, opts...)...)
	l, err := tr.Listen("127.0.0.1:0", s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	c, err := tr.Dial(ctx, l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return tr, l.(*Listener), c.(*Conn)
}

func call(t *testing.T, c *Conn, pattern, payload string) (*wizard.Message, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	return c.Call(ctx, &wizard.Message{Pattern: pattern, Codec: wizard.CodecJSON, Payload: []byte(payload)})
}

// TestCallsSpreadOverStreams: with the fill bound off, calls take the
// streams in turn, serial or concurrent, so each stream carries exactly
// its share.
func TestCallsSpreadOverStreams(t *testing.T) {
	leak.Check(t)
	const streams = 4
	var mu sync.Mutex
	perStream := map[quicgo.StreamID]int{}
	srv := serverFunc(func(ctx context.Context, m *wizard.Message) *wizard.Message {
		id, ok := ctx.Value(streamKey{}).(quicgo.StreamID)
		if !ok {
			return &wizard.Message{Code: wizard.CodeInternal, Error: "no stream id in ctx"}
		}
		mu.Lock()
		perStream[id]++
		mu.Unlock()
		return echo(ctx, m)
	})
	_, _, c := pair(t, srv, WithStreams(streams), WithStreamFill(-1))

	const serial = 2 * streams
	for range serial {
		if _, err := call(t, c, "a:1", `{}`); err != nil {
			t.Fatal(err)
		}
	}
	const goroutines, each = 32, 20
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				want := []byte{'"', byte('a' + g%26), byte('a' + i%26), '"'}
				got, err := c.Call(t.Context(), &wizard.Message{Pattern: "a:1", Codec: wizard.CodecJSON, Payload: want})
				if err == nil && !bytes.Equal(got.Payload, want) {
					err = errors.New("answer " + string(got.Payload) + " to " + string(want))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	share := (serial + goroutines*each) / streams
	want := map[quicgo.StreamID]int{0: share, 4: share, 8: share, 12: share} // client-initiated bidirectional ids
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, perStream); diff != "" {
		t.Errorf("calls per stream (-want +got):\n%s", diff)
	}
}

// TestStreamFill: a call takes the first stream with fewer calls in
// flight than the fill bound, else the one with the fewest; serial calls
// all take the first.
func TestStreamFill(t *testing.T) {
	tests := []struct {
		name    string
		opts    []Option
		holding int // calls held in their handlers at once
		want    []int
	}{
		// Which stream each call took, numbered in the order the streams
		// first took one: each holds 2 calls, then the least busy.
		{"bound 2", []Option{WithStreams(3), WithStreamFill(2)}, 7, []int{0, 0, 1, 1, 2, 2, 0}},
		// The default bound: 64 calls on the first stream, then the next.
		{"default", []Option{WithStreams(2)}, 65, append(make([]int, 64), 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leak.Check(t)
			arrived := make(chan quicgo.StreamID)
			release := make(chan struct{})
			srv := serverFunc(func(ctx context.Context, m *wizard.Message) *wizard.Message {
				id, _ := ctx.Value(streamKey{}).(quicgo.StreamID)
				if string(m.Payload) == `"hold"` {
					arrived <- id
					<-release
				}
				return &wizard.Message{Codec: m.Codec, Payload: []byte(strconv.Itoa(int(id)))}
			})
			_, _, c := pair(t, srv, tt.opts...)
			order := map[quicgo.StreamID]int{} // stream id -> the order it first took a call
			number := func(id quicgo.StreamID) int {
				if _, ok := order[id]; !ok {
					order[id] = len(order)
				}
				return order[id]
			}
			var wg sync.WaitGroup
			errs := make(chan error, tt.holding)
			var got []int
			for range tt.holding {
				wg.Go(func() {
					if _, err := call(t, c, "a:1", `"hold"`); err != nil {
						errs <- err
					}
				})
				// The next call is sent once this one is in flight.
				got = append(got, number(testwait.Recv(t, arrived)))
			}
			close(release)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("streams the held calls took (-want +got):\n%s", diff)
			}
			for range 3 {
				res, err := call(t, c, "a:1", `"now"`)
				if err != nil {
					t.Fatal(err)
				}
				id, _ := strconv.Atoi(string(res.Payload))
				if n := number(quicgo.StreamID(id)); n != 0 {
					t.Errorf("a serial call took stream %d (in order of first use), want the first", n)
				}
			}
		})
	}
}

// TestShutdown: Shutdown refuses new calls (ErrNotSent), lets the call in
// flight finish, waits for the client to close the connection (not for
// the linger timeout) and frees the port.
func TestShutdown(t *testing.T) {
	leak.Check(t)
	defer func(d time.Duration) { lingerTimeout = d }(lingerTimeout)
	lingerTimeout = time.Hour // only the client closing ends the wait
	started, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	defer unblock() // a failing test must not leave the handler blocked
	srv := serverFunc(func(ctx context.Context, m *wizard.Message) *wizard.Message {
		if m.Pattern == "block:1" {
			close(started)
			<-release
		}
		return echo(ctx, m)
	})
	_, l, c := pair(t, srv)
	// One call per stream first: a stream whose server is still finishing
	// its handshake when Shutdown comes is closed without a goaway (see
	// TestConnEnds), which would fail a call sent on it.
	for range len(c.clients) {
		if _, err := call(t, c, "a:1", `"warm"`); err != nil {
			t.Fatal(err)
		}
	}

	type result struct {
		m   *wizard.Message
		err error
	}
	blocked := make(chan result, 1)
	go func() {
		m, err := call(t, c, "block:1", `"slow"`)
		blocked <- result{m, err}
	}()
	testwait.Recv(t, started)
	shutdown := make(chan error, 1)
	go func() { shutdown <- l.Shutdown(context.Background()) }()

	// New calls are refused once the goaway has come (calls before it are
	// served).
	deadline := time.Now().Add(guard)
	for {
		_, err := call(t, c, "a:1", `"fast"`)
		if errors.Is(err, wizard.ErrNotSent) {
			break
		}
		if err != nil {
			t.Fatalf("call during shutdown: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("calls still accepted long after Shutdown")
		}
	}
	select {
	case err := <-shutdown:
		t.Fatalf("Shutdown returned %v with a call in flight", err)
	case r := <-blocked:
		t.Fatalf("the call in flight ended early: %v, %v", r.m, r.err)
	default:
	}

	unblock()
	if r := testwait.Recv(t, blocked); r.err != nil || string(r.m.Payload) != `"slow"` {
		t.Fatalf("call in flight: %v, %v", r.m, r.err)
	}
	if err := testwait.Recv(t, shutdown); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	testwait.Recv(t, c.Done())
	udp, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(mustAddrPort(t, l.Addr())))
	if err != nil {
		t.Fatalf("port not freed: %v", err)
	}
	udp.Close()
}

// TestShutdownTimeout: when Shutdown's ctx ends first, connections close
// at once and the handlers' ctx ends.
func TestShutdownTimeout(t *testing.T) {
	leak.Check(t)
	started, ended := make(chan struct{}), make(chan error, 1)
	srv := serverFunc(func(ctx context.Context, m *wizard.Message) *wizard.Message {
		close(started)
		<-ctx.Done()
		ended <- ctx.Err()
		return echo(ctx, m)
	})
	_, l, c := pair(t, srv)
	failed := make(chan error, 1)
	go func() {
		_, err := call(t, c, "a:1", `{}`)
		failed <- err
	}()
	testwait.Recv(t, started)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := l.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown = %v, want context.Canceled", err)
	}
	if err := testwait.Recv(t, ended); err == nil {
		t.Fatal("handler ctx not done")
	}
	if err := testwait.Recv(t, failed); err == nil {
		t.Fatal("call succeeded after its connection was closed")
	}
	testwait.Recv(t, c.Done())
}

// TestConnEnds: Done closes when the server closes at once, and when one
// stream fails; later calls fail with ErrNotSent.
func TestConnEnds(t *testing.T) {
	t.Run("listener closed", func(t *testing.T) {
		leak.Check(t)
		_, l, c := pair(t, serverFunc(echo))
		if _, err := call(t, c, "a:1", `{}`); err != nil {
			t.Fatal(err)
		}
		l.Close()
		testwait.Recv(t, c.Done())
		if _, err := call(t, c, "a:1", `{}`); !errors.Is(err, wizard.ErrNotSent) {
			t.Fatalf("call after close: %v, want ErrNotSent", err)
		}
	})
	t.Run("stream failed", func(t *testing.T) {
		leak.Check(t)
		_, _, c := pair(t, serverFunc(echo))
		c.clients[1].Close()
		testwait.Recv(t, c.Done())
		if _, err := call(t, c, "a:1", `{}`); !errors.Is(err, wizard.ErrNotSent) {
			t.Fatalf("call after close: %v, want ErrNotSent", err)
		}
	})
	t.Run("a stream ended in order", func(t *testing.T) {
		// A server may close a stream at a frame boundary without a
		// goaway (it shut down while finishing the stream's handshake):
		// the other streams carry on.
		leak.Check(t)
		tr := mustNew(t, WithInsecureSelfSigned())
		tlsConf, err := tr.serverTLSConfig()
		if err != nil {
			t.Fatal(err)
		}
		ql, err := quicgo.ListenAddr("127.0.0.1:0", tlsConf, tr.quicConfig())
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		defer wg.Wait()
		defer ql.Close() // closes the server's connections too
		h := bridge.Handler(serverFunc(echo))
		wg.Go(func() {
			qc, err := ql.Accept(t.Context())
			if err != nil {
				return
			}
			for {
				s, err := qc.AcceptStream(t.Context())
				if err != nil {
					return
				}
				rw := io.ReadWriteCloser(stream{s, qc})
				if s.StreamID() == 4 {
					rw = &endAfter{ReadWriteCloser: rw, n: wire.HandshakeSize}
				}
				wg.Go(func() { mux.Serve(context.Background(), rw, h, mux.Options{}) })
			}
		})
		ctx, cancel := context.WithTimeout(t.Context(), guard)
		defer cancel()
		conn, err := tr.Dial(ctx, ql.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c := conn.(*Conn)
		defer c.Close()
		ended := make(chan *mux.Client, len(c.clients))
		for _, cl := range c.clients {
			go func() {
				select {
				case <-cl.Done():
					ended <- cl
				case <-c.Done():
				}
			}()
		}
		if err := testwait.Recv(t, ended).Err(); !errors.Is(err, io.EOF) {
			t.Fatalf("the stream ended with %v, want EOF", err)
		}
		for range 2 * len(c.clients) {
			if _, err := call(t, c, "a:1", `{}`); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-c.Done():
			t.Fatal("the connection closed with one stream ended in order")
		default:
		}
	})
	t.Run("closed twice", func(t *testing.T) {
		leak.Check(t)
		_, l, c := pair(t, serverFunc(echo))
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if err := l.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCheckBuffers: a socket with small buffers is reported through the
// logger, with the sysctl to run: a warning once, then debug records.
func TestCheckBuffers(t *testing.T) {
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	if err := udp.SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := socketBuffers(udp); !ok {
		need.Skipf(t, "needs the UDP socket buffer sizes to be readable (SO_RCVBUF, as on Linux)")
	}
	var logs bytes.Buffer
	tr := mustNew(t, WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	tr.checkBuffers(udp)
	tr.checkBuffers(udp)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d records, want 2:\n%s", len(lines), logs.String())
	}
	for i, want := range []string{"level=WARN", "level=DEBUG"} {
		if !strings.Contains(lines[i], want) || !strings.Contains(lines[i], "net.core.rmem_max=7500000") {
			t.Errorf("record %d = %s; want %s and the sysctl", i, lines[i], want)
		}
	}
}

func mustAddrPort(t *testing.T, addr string) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

// endAfter ends its stream (io.EOF) once n bytes have been read.
type endAfter struct {
	io.ReadWriteCloser
	n int
}

func (e *endAfter) Read(p []byte) (int, error) {
	if e.n <= 0 {
		return 0, io.EOF
	}
	n, err := e.ReadWriteCloser.Read(p[:min(len(p), e.n)])
	e.n -= n
	return n, err
}

// TestHandshakeLimit: QUIC handshakes in progress count against the
// connection limit: one beyond it is refused, and a handshake that ends
// frees its place; past a quarter of the limit, clients must prove their
// address first.
func TestHandshakeLimit(t *testing.T) {
	tr := mustNew(t, WithInsecureSelfSigned(), WithMaxConns(4))
	ln, err := tr.Listen("127.0.0.1:0", serverFunc(echo))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	l := ln.(*Listener)
	info := &quicgo.ClientInfo{RemoteAddr: &net.UDPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 1}}
	if l.verifySource(info.RemoteAddr) {
		t.Error("address validation asked for with no handshake in progress")
	}
	var cancels []context.CancelFunc
	for i := range 4 {
		ctx, cancel := context.WithCancel(t.Context())
		cancels = append(cancels, cancel)
		if _, err := l.startHandshake(ctx, info); err != nil {
			t.Fatalf("handshake %d refused: %v", i+1, err)
		}
	}
	if !l.verifySource(info.RemoteAddr) {
		t.Error("no address validation with the handshake slots full")
	}
	if _, err := l.startHandshake(t.Context(), info); !errors.Is(err, errHandshakes) {
		t.Errorf("a fifth handshake: %v, want errHandshakes", err)
	}
	cancels[0]() // the handshake failed
	testwait.Until(t, "the failed handshake kept its place", func() bool { return l.handshakes.Load() == 3 })
	if _, err := l.startHandshake(t.Context(), info); err != nil {
		t.Errorf("a handshake after one ended: %v", err)
	}
	for _, c := range cancels {
		c()
	}
}
