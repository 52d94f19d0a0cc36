package nats_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	natsgo "github.com/nats-io/nats.go"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/streamconn"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/natstest"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
	"github.com/wizardmesh/wizard/runtime/nats"
)

// streamServer is a node's server that serves streams with fn, and
// refuses calls.
type streamServer func(ctx context.Context, s streamconn.Stream) error

func (streamServer) ServeMessage(context.Context, *runtime.Message) *runtime.Message {
	return &runtime.Message{Payload: []byte("unary")}
}

func (fn streamServer) ServeStream(ctx context.Context, s streamconn.Stream) error { return fn(ctx, s) }

// queuer is what both sides of a stream over NATS tell: the payload bytes
// received and not taken yet.
type queuer interface{ Queued() int }

// listenStreams serves fn on a listener of a transport of url made with
// opts (closed when t ends) and returns its subject.
func listenStreams(t testing.TB, url string, fn streamServer, opts ...nats.Option) string {
	t.Helper()
	l, err := newTransport(t, url, opts...).Listen("", fn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr()
}

// dialStreams dials subject with a transport of url made with opts
// (closed when t ends).
func dialStreams(t testing.TB, url, subject string, opts ...nats.Option) streamconn.Opener {
	t.Helper()
	c, err := newTransport(t, url, opts...).Dial(t.Context(), subject)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(streamconn.Opener)
}

// streamPair serves fn on a node of the broker at url and returns a
// caller's connection to it.
func streamPair(t testing.TB, url string, fn streamServer, opts ...nats.Option) streamconn.Opener {
	t.Helper()
	return dialStreams(t, url, listenStreams(t, url, fn, opts...), opts...)
}

func open(t testing.TB, ctx context.Context, o streamconn.Opener, pattern string) streamconn.Client {
	t.Helper()
	cs, err := o.OpenStream(ctx, &wire.Frame{Pattern: pattern})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cs.Cancel)
	return cs
}

func u64(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// recvAll receives until the end and returns the messages and the end.
func recvAll(ctx context.Context, cs streamconn.Client) ([]string, error) {
	var got []string
	for {
		_, p, err := cs.Recv(ctx)
		if err != nil {
			return got, err
		}
		got = append(got, string(p))
	}
}

// TestStreamKinds: a server stream, a client stream and a bidirectional
// one over the broker, with the node's header and trailer, and the open's
// pattern and meta reaching the handler.
func TestStreamKinds(t *testing.T) {
	b := natstest.Start(t)
	o := streamPair(t, b.URL(), func(ctx context.Context, s streamconn.Stream) error {
		open := s.Open()
		if err := s.SendHeader([]wire.Meta{{Key: "h", Value: open.Pattern}}); err != nil {
			return err
		}
		s.SetTrailer([]wire.Meta{{Key: "t", Value: "done"}})
		switch open.Pattern {
		case "kind:server":
			_, p, err := s.Recv(ctx)
			if err != nil {
				return err
			}
			for i := range int(binary.BigEndian.Uint64(p)) {
				if err := s.Send(ctx, wire.CodecJSON, fmt.Appendf(nil, "%d", i)); err != nil {
					return err
				}
			}
			return nil
		case "kind:client":
			var all []byte
			for {
				_, p, err := s.Recv(ctx)
				if err == io.EOF {
					return s.Send(ctx, wire.CodecJSON, all)
				}
				if err != nil {
					return err
				}
				all = append(all, p...)
			}
		default: // bidi: an echo, with the metadata of the open
			for {
				c, p, err := s.Recv(ctx)
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return err
				}
				if err := s.Send(ctx, c, append(p, open.Meta[0].Value...)); err != nil {
					return err
				}
			}
		}
	})
	check := func(t *testing.T, cs streamconn.Client, pattern string, want []string) {
		t.Helper()
		h, err := cs.Header(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]wire.Meta{{Key: "h", Value: pattern}}, h); diff != "" {
			t.Errorf("header (-want +got):\n%s", diff)
		}
		got, err := recvAll(t.Context(), cs)
		if err != io.EOF {
			t.Fatalf("the end: %v, want io.EOF", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("messages (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]wire.Meta{{Key: "t", Value: "done"}}, cs.Trailer()); diff != "" {
			t.Errorf("trailer (-want +got):\n%s", diff)
		}
	}
	t.Run("server", func(t *testing.T) {
		cs := open(t, t.Context(), o, "kind:server")
		if err := cs.Send(t.Context(), wire.CodecNone, u64(3)); err != nil {
			t.Fatal(err)
		}
		cs.CloseSend()
		check(t, cs, "kind:server", []string{"0", "1", "2"})
	})
	t.Run("client", func(t *testing.T) {
		cs := open(t, t.Context(), o, "kind:client")
		for _, m := range []string{"a", "b", "c"} {
			if err := cs.Send(t.Context(), wire.CodecJSON, []byte(m)); err != nil {
				t.Fatal(err)
			}
		}
		cs.CloseSend()
		check(t, cs, "kind:client", []string{"abc"})
	})
	t.Run("bidi", func(t *testing.T) {
		cs, err := o.OpenStream(t.Context(), &wire.Frame{Pattern: "kind:bidi", Meta: []wire.Meta{{Key: "m", Value: "!"}}})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Cancel()
		for _, m := range []string{"a", "b"} {
			if err := cs.Send(t.Context(), wire.CodecJSON, []byte(m)); err != nil {
				t.Fatal(err)
			}
			c, p, err := cs.Recv(t.Context())
			if err != nil || c != wire.CodecJSON || string(p) != m+"!" {
				t.Fatalf("echo of %q: %v %q %v", m, c, p, err)
			}
		}
		cs.CloseSend()
		check(t, cs, "kind:bidi", nil)
	})
}

// TestStreamInOrder: 10,000 messages each way arrive, in order.
func TestStreamInOrder(t *testing.T) {
	const n = 10000
	b := natstest.Start(t)
	o := streamPair(t, b.URL(), func(ctx context.Context, s streamconn.Stream) error {
		for i := uint64(0); ; i++ {
			_, p, err := s.Recv(ctx)
			if err == io.EOF {
				if i != n {
					return fmt.Errorf("%d messages, want %d", i, n)
				}
				break
			}
			if err != nil {
				return err
			}
			if got := binary.BigEndian.Uint64(p); got != i {
				return fmt.Errorf("message %d is %d", i, got)
			}
		}
		for i := range uint64(n) {
			if err := s.Send(ctx, wire.CodecNone, u64(i)); err != nil {
				return err
			}
		}
		return nil
	})
	cs := open(t, t.Context(), o, "order:x")
	for i := range uint64(n) {
		if err := cs.Send(t.Context(), wire.CodecNone, u64(i)); err != nil {
			t.Fatal(err)
		}
	}
	cs.CloseSend()
	for i := uint64(0); ; i++ {
		_, p, err := cs.Recv(t.Context())
		if err == io.EOF {
			if i != n {
				t.Fatalf("%d messages, want %d", i, n)
			}
			return
		}
		if err != nil {
			t.Fatalf("after %d messages: %v", i, err)
		}
		if got := binary.BigEndian.Uint64(p); got != i {
			t.Fatalf("message %d is %d", i, got)
		}
	}
}

// TestStreamStoppedReader: a receiver that stops reading stops its
// sender, whose Send blocks, and holds at most the window plus one
// message; reading again lets every message through, in order. Both
// ways, with messages smaller and larger than the window.
func TestStreamStoppedReader(t *testing.T) {
	b := natstest.Start(t)
	for _, size := range []int{16 << 10, 100 << 10, 300 << 10} {
		for _, way := range []string{"node-to-caller", "caller-to-node"} {
			t.Run(fmt.Sprintf("%s/%dKiB", way, size>>10), func(t *testing.T) {
				stoppedReader(t, b.URL(), way == "node-to-caller", size)
			})
		}
	}
}

func stoppedReader(t *testing.T, url string, down bool, size int) {
	const total = 40
	var (
		sent     atomic.Int64 // messages the sender's Send returned for
		reader   = make(chan queuer, 1)
		readOn   = make(chan struct{})
		received = make(chan error, 1)
	)
	// send sends total messages numbered in their first bytes.
	send := func(ctx context.Context, send func(context.Context, wire.Codec, []byte) error) error {
		for i := range uint64(total) {
			p := make([]byte, size)
			binary.BigEndian.PutUint64(p, i)
			if err := send(ctx, wire.CodecNone, p); err != nil {
				return err
			}
			sent.Add(1)
		}
		return nil
	}
	// read takes every message, checking the order.
	read := func(ctx context.Context, recv func(context.Context) (wire.Codec, []byte, error)) error {
		for i := uint64(0); ; i++ {
			_, p, err := recv(ctx)
			if err == io.EOF {
				if i != total {
					return fmt.Errorf("%d messages, want %d", i, total)
				}
				return nil
			}
			if err != nil {
				return err
			}
			if got := binary.BigEndian.Uint64(p); got != i || len(p) != size {
				return fmt.Errorf("message %d: number %d, %d bytes", i, got, len(p))
			}
		}
	}
	o := streamPair(t, url, func(ctx context.Context, s streamconn.Stream) error {
		if down {
			return send(ctx, s.Send)
		}
		reader <- s.(queuer)
		<-readOn
		err := read(ctx, s.Recv)
		received <- err
		return err
	})
	cs := open(t, t.Context(), o, "slow:x")
	if down {
		reader <- cs.(queuer)
	} else {
		go func() {
			if err := send(t.Context(), cs.Send); err != nil {
				t.Error(err)
			}
			cs.CloseSend()
		}()
	}
	q := testwait.Recv(t, reader)
	// The sender can have sent what fits the window, and one message more
	// when half the window is free: then it blocks. The receiver holds
	// all of it.
	want := 0
	for credit, cost := wire.InitialWindow, size+wire.MessageCost; cost <= credit || 2*credit >= wire.InitialWindow; credit -= cost {
		want++
	}
	max := wire.InitialWindow + size
	testwait.Until(t, fmt.Sprintf("the receiver holds the %d messages the window lets through", want), func() bool {
		if q.Queued() > max || sent.Load() > int64(want) {
			t.Fatalf("the sender sent %d messages (%d bytes held), more than the window lets through", sent.Load(), q.Queued())
		}
		return q.Queued() == want*size && sent.Load() == int64(want)
	})
	// The sender is blocked: for a while (the length of the check, not a
	// synchronisation), nothing more goes through.
	if testwait.Poll(200*time.Millisecond, func() bool { return sent.Load() > int64(want) || q.Queued() > want*size }) {
		t.Fatalf("the sender sent %d messages (%d bytes held) while the receiver did not read, want %d", sent.Load(), q.Queued(), want)
	}
	t.Logf("a receiver that stopped reading holds %d bytes (%d messages of %d bytes); its sender blocks", q.Queued(), want, size)
	if down {
		if err := read(t.Context(), cs.Recv); err != nil {
			t.Fatal(err)
		}
	} else {
		close(readOn)
		if err := testwait.Recv(t, received); err != nil {
			t.Fatal(err)
		}
		if _, _, err := cs.Recv(t.Context()); err != io.EOF {
			t.Fatalf("the end: %v, want io.EOF", err)
		}
	}
}

// TestStreamCancel: the caller cancels a stream mid-stream, and the
// handler's ctx ends; the node ends one mid-stream with canceled, and
// the caller's Recv says so and its Send returns io.EOF.
func TestStreamCancel(t *testing.T) {
	b := natstest.Start(t)
	handlerDone := make(chan error, 1)
	o := streamPair(t, b.URL(), func(ctx context.Context, s streamconn.Stream) error {
		if s.Open().Pattern == "by:node" {
			if _, _, err := s.Recv(ctx); err != nil {
				return err
			}
			return &streamconn.Error{Code: uint32(runtime.CodeCanceled), Message: "given up"}
		}
		for {
			if _, _, err := s.Recv(ctx); err != nil {
				<-ctx.Done()
				handlerDone <- context.Cause(ctx)
				return err
			}
		}
	})
	t.Run("caller", func(t *testing.T) {
		cs := open(t, t.Context(), o, "by:caller")
		if err := cs.Send(t.Context(), wire.CodecNone, []byte("x")); err != nil {
			t.Fatal(err)
		}
		cs.Cancel()
		if err := testwait.Recv(t, handlerDone); !errors.Is(err, context.Canceled) {
			t.Errorf("the handler's ctx ended with %v, want canceled", err)
		}
		if _, _, err := cs.Recv(t.Context()); !errors.Is(err, context.Canceled) {
			t.Errorf("Recv after Cancel: %v, want context.Canceled", err)
		}
	})
	t.Run("node", func(t *testing.T) {
		cs := open(t, t.Context(), o, "by:node")
		if err := cs.Send(t.Context(), wire.CodecNone, []byte("x")); err != nil {
			t.Fatal(err)
		}
		_, _, err := cs.Recv(t.Context())
		var se *streamconn.Error
		if !errors.As(err, &se) || se.Code != uint32(runtime.CodeCanceled) || se.Message != "given up" {
			t.Fatalf("Recv: %v, want the node's canceled", err)
		}
		if err := cs.Send(t.Context(), wire.CodecNone, []byte("y")); err != io.EOF {
			t.Errorf("Send after the end: %v, want io.EOF", err)
		}
	})
}

// TestStreamDeadline: the open's deadline reaches the node, whose
// handler's ctx ends at it mid-stream; the caller's stream ends at it
// too.
func TestStreamDeadline(t *testing.T) {
	b := natstest.Start(t)
	handler := make(chan error, 1)
	o := streamPair(t, b.URL(), func(ctx context.Context, s streamconn.Stream) error {
		if _, ok := ctx.Deadline(); !ok || s.Open().Deadline <= 0 {
			handler <- errors.New("no deadline")
			return nil
		}
		if err := s.Send(ctx, wire.CodecNone, []byte("first")); err != nil {
			return err
		}
		_, _, err := s.Recv(ctx) // the caller sends nothing
		handler <- err
		return err
	})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	cs := open(t, ctx, o, "deadline:x")
	if _, p, err := cs.Recv(ctx); err != nil || string(p) != "first" {
		t.Fatalf("first message: %q %v", p, err)
	}
	// The caller's ctx ends at the deadline, and so does the node's
	// stream, whose end may come first.
	_, _, err := cs.Recv(t.Context())
	var se *streamconn.Error
	if !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &se) && se.Code == uint32(runtime.CodeDeadlineExceeded)) {
		t.Errorf("the caller's Recv: %v, want deadline exceeded", err)
	}
	if err := testwait.Recv(t, handler); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the handler's Recv: %v, want deadline exceeded", err)
	}
}

// TestStreamError: a handler's error mid-stream reaches the caller with
// its code, message, details and the trailers, after the messages sent
// before it.
func TestStreamError(t *testing.T) {
	b := natstest.Start(t)
	o := streamPair(t, b.URL(), func(ctx context.Context, s streamconn.Stream) error {
		for _, m := range []string{"a", "b"} {
			if err := s.Send(ctx, wire.CodecJSON, []byte(m)); err != nil {
				return err
			}
		}
		s.SetTrailer([]wire.Meta{{Key: "why", Value: "stock"}})
		return &streamconn.Error{Code: uint32(runtime.CodeFailedPrecondition), Message: "out of stock", Details: []byte{1, 2, 3}}
	})
	cs := open(t, t.Context(), o, "fail:x")
	got, err := recvAll(t.Context(), cs)
	if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	want := &streamconn.Error{Code: uint32(runtime.CodeFailedPrecondition), Message: "out of stock", Details: []byte{1, 2, 3}}
	if diff := cmp.Diff(want, err); diff != "" {
		t.Errorf("end (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]wire.Meta{{Key: "why", Value: "stock"}}, cs.Trailer()); diff != "" {
		t.Errorf("trailer (-want +got):\n%s", diff)
	}
}

// TestStreamLimits: a caller's streams beyond WithMaxStreams, and a
// listener's beyond WithMaxServing, are refused at once with resource
// exhausted, flagged refused, and a node whose server serves no streams
// is not sent one.
func TestStreamLimits(t *testing.T) {
	b := natstest.Start(t)
	o := streamPair(t, b.URL(), func(ctx context.Context, s streamconn.Stream) error {
		<-ctx.Done()
		return ctx.Err()
	}, nats.WithMaxStreams(2))
	for range 2 {
		cs := open(t, t.Context(), o, "hold:x")
		if err := cs.Send(t.Context(), wire.CodecNone, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	cs := open(t, t.Context(), o, "hold:x")
	_, _, err := cs.Recv(t.Context())
	var se *streamconn.Error
	if !errors.As(err, &se) || se.Code != uint32(runtime.CodeResourceExhausted) || !se.Refused {
		t.Fatalf("the third stream: %v, want resource exhausted, refused", err)
	}

	// The listener's bound, whatever the callers.
	started := make(chan struct{}, 3)
	subject := listenStreams(t, b.URL(), func(ctx context.Context, s streamconn.Stream) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}, nats.WithMaxServing(3))
	callers := []streamconn.Opener{dialStreams(t, b.URL(), subject), dialStreams(t, b.URL(), subject)}
	for i := range 3 {
		open(t, t.Context(), callers[i%2], "hold:x")
		testwait.Recv(t, started)
	}
	_, _, err = open(t, t.Context(), callers[1], "hold:x").Recv(t.Context())
	if !errors.As(err, &se) || se.Code != uint32(runtime.CodeResourceExhausted) || !se.Refused || !strings.Contains(se.Message, "serving too many streams") {
		t.Fatalf("a stream beyond the listener's bound: %v, want resource exhausted, refused", err)
	}

	l, err := newTransport(t, b.URL()).Listen("", serverFunc(func(context.Context, *runtime.Message) *runtime.Message { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	unary := dialStreams(t, b.URL(), l.Addr())
	if _, err := unary.OpenStream(t.Context(), &wire.Frame{Pattern: "a:b"}); !errors.Is(err, runtime.ErrNotSent) {
		t.Errorf("a stream to a node that serves none: %v, want not sent", err)
	}
}

type serverFunc func(context.Context, *runtime.Message) *runtime.Message

func (f serverFunc) ServeMessage(ctx context.Context, m *runtime.Message) *runtime.Message {
	return f(ctx, m)
}

// TestStreamConcurrent: 1,000 streams open at once between one caller
// and one node, each an echo of its own number.
func TestStreamConcurrent(t *testing.T) {
	const n = 1000
	b := natstest.Start(t)
	o := streamPair(t, b.URL(), func(ctx context.Context, s streamconn.Stream) error {
		for {
			c, p, err := s.Recv(ctx)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if err := s.Send(ctx, c, p); err != nil {
				return err
			}
		}
	})
	streams := make([]streamconn.Client, n)
	for i := range streams {
		streams[i] = open(t, t.Context(), o, "echo:x")
	}
	var wg sync.WaitGroup
	for i, cs := range streams {
		wg.Go(func() {
			for j := range uint64(3) {
				if err := cs.Send(t.Context(), wire.CodecNone, u64(uint64(i)<<8|j)); err != nil {
					t.Error(err)
					return
				}
				_, p, err := cs.Recv(t.Context())
				if err != nil || binary.BigEndian.Uint64(p) != uint64(i)<<8|j {
					t.Errorf("stream %d, message %d: %x %v", i, j, p, err)
					return
				}
			}
			cs.CloseSend()
			if _, _, err := cs.Recv(t.Context()); err != io.EOF {
				t.Errorf("stream %d: the end: %v", i, err)
			}
		})
	}
	wg.Wait()
}

// brokerProxy forwards TCP connections to a broker, for a node or caller whose
// broker connection a test freezes (the peer hangs: its connection
// stays, nothing passes) or cuts (the peer dies: its connections close,
// new ones are refused).
type brokerProxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	conns  []net.Conn
	frozen chan struct{} // closed: stop forwarding
	cut    bool
}

func newBrokerProxy(t testing.TB, brokerURL string) *brokerProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &brokerProxy{ln: ln, target: brokerURL[len("nats://"):], frozen: make(chan struct{})}
	t.Cleanup(p.close)
	go p.accept()
	return p
}

func (p *brokerProxy) URL() string { return "nats://" + p.ln.Addr().String() }

func (p *brokerProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		p.mu.Lock()
		if err != nil || p.cut {
			p.mu.Unlock()
			c.Close()
			if up != nil {
				up.Close()
			}
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

// pipe copies from src to dst until either closes or the brokerProxy freezes.
func (p *brokerProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-p.frozen:
			return // what was read is lost; nothing passes any more
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

// freeze stops all forwarding, leaving the connections open.
func (p *brokerProxy) freeze() { close(p.frozen) }

// kill closes every connection and refuses new ones.
func (p *brokerProxy) kill() {
	p.mu.Lock()
	p.cut = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (p *brokerProxy) close() {
	p.ln.Close()
	p.kill()
}

// TestStreamPeerLost: the node or the caller of an open stream dies (its
// broker connection closes) or hangs (its broker connection stays but
// nothing passes) mid-stream; the other side's stream ends as lost
// within the stream keep-alive's bound: the caller's within the
// interval plus the timeout, the node's within twice the interval plus
// the timeout.
func TestStreamPeerLost(t *testing.T) {
	const interval, timeout = 100 * time.Millisecond, 200 * time.Millisecond
	ka := nats.WithStreamKeepAlive(interval, timeout)
	// slack covers a loaded machine's scheduling and a keep-alive tick.
	const slack = time.Second
	b := natstest.Start(t)
	for _, tc := range []struct {
		name      string
		node      bool // the node is lost, else the caller
		hang      bool // it hangs, else it dies
		withinArg time.Duration
	}{
		{"node-dies", true, false, interval + timeout},
		{"node-hangs", true, true, interval + timeout},
		{"caller-dies", false, false, interval + timeout},
		{"caller-hangs", false, true, interval + timeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newBrokerProxy(t, b.URL())
			nodeURL, callerURL := b.URL(), b.URL()
			if tc.node {
				nodeURL = p.URL()
			} else {
				callerURL = p.URL()
			}
			handler := make(chan error, 1)
			subject := listenStreams(t, nodeURL, func(ctx context.Context, s streamconn.Stream) error {
				if err := s.Send(ctx, wire.CodecNone, []byte("hello")); err != nil {
					return err
				}
				_, _, err := s.Recv(ctx)
				handler <- context.Cause(ctx) // why the stream ended: its ctx's cause
				return err
			}, ka)
			cs := open(t, t.Context(), dialStreams(t, callerURL, subject, ka), "lost:x")
			if _, _, err := cs.Recv(t.Context()); err != nil {
				t.Fatal(err)
			}
			caller := make(chan error, 1)
			go func() {
				_, _, err := cs.Recv(t.Context())
				caller <- err
			}()
			start := time.Now()
			if tc.hang {
				p.freeze()
			} else {
				p.kill()
			}
			var err error
			if tc.node {
				err = testwait.Recv(t, caller)
			} else {
				err = testwait.Recv(t, handler)
			}
			took := time.Since(start)
			if !isLost(err) {
				t.Errorf("the other side's stream ended with %v, want lost", err)
			}
			if took > tc.withinArg+slack {
				t.Errorf("the other side's stream ended after %v, want within %v (+%v)", took, tc.withinArg, slack)
			}
			t.Logf("the other side's stream ended %v after its peer was lost: %v", took.Round(time.Millisecond), err)
		})
	}
}

// isLost reports whether err is a stream's loss: it reads "connection
// lost after the call was sent", as runtime reports unavailable.
func isLost(err error) bool {
	return err != nil && !errors.Is(err, runtime.ErrNotSent) && strings.Contains(err.Error(), "connection lost after the call was sent")
}

// TestStreamBrokerRestart: a broker restart ends the open streams on
// both sides as lost; unary calls work again once the broker is back.
func TestStreamBrokerRestart(t *testing.T) {
	b := natstest.Start(t)
	handler, got := make(chan error, 1), make(chan struct{}, 1)
	tr := newTransport(t, b.URL())
	l, err := tr.Listen("", streamServer(func(ctx context.Context, s streamconn.Stream) error {
		for {
			if _, _, err := s.Recv(ctx); err != nil {
				handler <- context.Cause(ctx) // why the stream ended: its ctx's cause
				return err
			}
			got <- struct{}{}
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ctr := newTransport(t, b.URL())
	c, err := ctr.Dial(t.Context(), l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cs := open(t, t.Context(), c.(streamconn.Opener), "restart:x")
	if err := cs.Send(t.Context(), wire.CodecNone, []byte("x")); err != nil {
		t.Fatal(err)
	}
	testwait.Recv(t, got)
	b.Stop()
	if _, _, err := cs.Recv(t.Context()); !isLost(err) {
		t.Errorf("the caller's stream: %v, want lost", err)
	}
	if err := testwait.Recv(t, handler); !isLost(err) {
		t.Errorf("the node's stream: %v, want lost", err)
	}
	b.Restart()
	testwait.Until(t, "a call goes through once the broker is back", func() bool {
		c, err := ctr.Dial(t.Context(), l.Addr())
		if err != nil {
			return false
		}
		defer c.Close()
		r, err := c.Call(t.Context(), &runtime.Message{Pattern: "a:b"})
		return err == nil && string(r.Payload) == "unary"
	})
}

// TestStreamIdleKept: an idle stream outlives many keep-alive bounds
// (each side pings the silent other, which answers), and works after.
func TestStreamIdleKept(t *testing.T) {
	const interval, timeout = 20 * time.Millisecond, 40 * time.Millisecond
	b := natstest.Start(t)
	o := streamPair(t, b.URL(), func(ctx context.Context, s streamconn.Stream) error {
		_, p, err := s.Recv(ctx)
		if err != nil {
			return err
		}
		return s.Send(ctx, wire.CodecNone, p)
	}, nats.WithStreamKeepAlive(interval, timeout))
	cs := open(t, t.Context(), o, "idle:x")
	// The length of the test, not a synchronisation: nothing should
	// happen meanwhile.
	idle := time.NewTimer(20 * (interval + timeout))
	<-idle.C
	if err := cs.Send(t.Context(), wire.CodecNone, []byte("late")); err != nil {
		t.Fatal(err)
	}
	if _, p, err := cs.Recv(t.Context()); err != nil || string(p) != "late" {
		t.Fatalf("after idling: %q %v", p, err)
	}
}

// TestStreamShutdown: a listener shutting down refuses new streams as
// going away (refused: another node may take them, or not sent once the
// caller heard the goaway) and lets the open ones end as they would.
func TestStreamShutdown(t *testing.T) {
	b := natstest.Start(t)
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	l, err := newTransport(t, b.URL()).Listen("", streamServer(func(ctx context.Context, s streamconn.Stream) error {
		started <- struct{}{}
		select {
		case <-release:
			return s.Send(ctx, wire.CodecNone, []byte("drained"))
		case <-ctx.Done():
			return ctx.Err()
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	o := dialStreams(t, b.URL(), l.Addr())
	drained := open(t, t.Context(), o, "drain:x")
	other := open(t, t.Context(), dialStreams(t, b.URL(), l.Addr()), "drain:x") // another caller's
	testwait.Recv(t, started)
	testwait.Recv(t, started)

	// The shutdown's grace lasts until the test cancels ctx.
	shut := make(chan error, 1)
	ctx, cancel := context.WithCancel(t.Context())
	go func() { shut <- l.Shutdown(ctx) }()
	testwait.Until(t, "the node refuses new streams as going away", func() bool {
		cs, err := o.OpenStream(t.Context(), &wire.Frame{Pattern: "drain:x"})
		if err != nil {
			return errors.Is(err, runtime.ErrNotSent)
		}
		defer cs.Cancel()
		_, _, err = cs.Recv(t.Context())
		var se *streamconn.Error
		return errors.As(err, &se) && se.Code == uint32(runtime.CodeUnavailable) && se.Refused
	})
	close(release)
	if got, err := recvAll(t.Context(), drained); err != io.EOF || len(got) != 1 || got[0] != "drained" {
		t.Fatalf("the stream open at the shutdown: %q %v, want its message and its end", got, err)
	}
	if _, err := recvAll(t.Context(), other); err != io.EOF {
		t.Fatalf("the other stream open at the shutdown: %v", err)
	}
	cancel()
	if err := testwait.Recv(t, shut); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

// TestStreamShutdownGrace: streams still open when a shutdown's grace
// ends are lost on the caller's side, and their handlers' ctx ends.
func TestStreamShutdownGrace(t *testing.T) {
	b := natstest.Start(t)
	handler := make(chan error, 1)
	l, err := newTransport(t, b.URL()).Listen("", streamServer(func(ctx context.Context, s streamconn.Stream) error {
		if err := s.Send(ctx, wire.CodecNone, []byte("open")); err != nil {
			return err
		}
		<-ctx.Done()
		handler <- ctx.Err()
		return ctx.Err()
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	cs := open(t, t.Context(), dialStreams(t, b.URL(), l.Addr()), "grace:x")
	if _, _, err := cs.Recv(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := l.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := testwait.Recv(t, handler); !errors.Is(err, context.Canceled) {
		t.Errorf("the handler's ctx: %v", err)
	}
	if _, _, err := cs.Recv(t.Context()); !isLost(err) {
		t.Errorf("the caller's stream: %v, want lost", err)
	}
}

// TestStreamRawCaller: a caller that breaks a stream's protocol (a raw
// NATS client here) has its stream ended, its handler cancelled: data
// beyond its credit ends it with resource exhausted, the data dropped; a
// frame missing (NATS core drops messages to a slow consumer) ends it
// with unavailable.
func TestStreamRawCaller(t *testing.T) {
	b := natstest.Start(t)
	handler := make(chan error, 1)
	subject := listenStreams(t, b.URL(), func(ctx context.Context, s streamconn.Stream) error {
		<-ctx.Done()
		handler <- ctx.Err()
		return ctx.Err()
	})
	nc, err := natsgo.Connect(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for _, tc := range []struct {
		name string
		ids  []uint64 // of the three data frames after the open, numbered 1
		code runtime.Code
	}{
		{"over-credit", []uint64{2, 3, 4}, runtime.CodeResourceExhausted}, // 3 x 100 KiB: the third is beyond the 256 KiB window
		{"frame-lost", []uint64{2, 4}, runtime.CodeUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reply := nc.NewInbox()
			sub, err := nc.SubscribeSync(reply)
			if err != nil {
				t.Fatal(err)
			}
			frame := func(f *wire.Frame) []byte { return wire.AppendFrame(nil, f) }
			if err := nc.PublishRequest(subject, reply, frame(&wire.Frame{Type: wire.TypeStreamOpen, ID: 1, Pattern: "raw:x"})); err != nil {
				t.Fatal(err)
			}
			for _, id := range tc.ids {
				if err := nc.PublishRequest(subject, reply, frame(&wire.Frame{Type: wire.TypeStreamData, ID: id, Payload: make([]byte, 100<<10)})); err != nil {
					t.Fatal(err)
				}
			}
			m, err := sub.NextMsg(testwait.Guard)
			if err != nil {
				t.Fatal(err)
			}
			var f wire.Frame
			if err := wire.DecodeFrame(m.Data[4:], &f); err != nil {
				t.Fatal(err)
			}
			code, msg, err := wire.DecodeError(f.Payload)
			if f.Type != wire.TypeStreamEnd || err != nil || code != uint32(tc.code) {
				t.Fatalf("got a %v frame, code %d %q %v; want a stream-end, code %d", f.Type, code, msg, err, tc.code)
			}
			if err := testwait.Recv(t, handler); !errors.Is(err, context.Canceled) {
				t.Errorf("the handler's ctx: %v", err)
			}
		})
	}
}

// BenchmarkStream measures one server stream over an embedded broker:
// messages of 16 B and 64 KiB from a node to a caller, each received.
func BenchmarkStream(b *testing.B) {
	br := natstest.Start(b)
	for _, size := range []int{16, 64 << 10} {
		for _, window := range []int{0, 1 << 20, 4 << 20} {
			name := fmt.Sprintf("%dB", size)
			if window != 0 {
				name += fmt.Sprintf("/window=%dMiB", window>>20)
			}
			b.Run(name, func(b *testing.B) { benchmarkStream(b, br.URL(), size, window) })
		}
	}
}

func benchmarkStream(b *testing.B, url string, size, window int) {
	payload := make([]byte, size)
	o := streamPair(b, url, func(ctx context.Context, s streamconn.Stream) error {
		for {
			_, p, err := s.Recv(ctx)
			if err != nil {
				return err
			}
			for range binary.BigEndian.Uint64(p) {
				if err := s.Send(ctx, wire.CodecNone, payload); err != nil {
					return err
				}
			}
		}
	}, nats.WithStreamWindow(window))
	b.ReportAllocs()
	b.SetBytes(int64(size))
	cs := open(b, b.Context(), o, "bench:x")
	n := 0
	start := time.Now()
	for b.Loop() {
		if n == 0 {
			// The node sends in chunks, so that b.Loop's count
			// need not be known beforehand.
			n = 1 << 14
			if err := cs.Send(b.Context(), wire.CodecNone, u64(uint64(n))); err != nil {
				b.Fatal(err)
			}
		}
		if _, _, err := cs.Recv(b.Context()); err != nil {
			b.Fatal(err)
		}
		n--
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

// TestStreamPermissionRecipe: a caller with docs/nats.md's grants for a
// node that only calls (no publish to _INBOX.>) keeps an idle stream to
// a node with the server's grants past many keep-alive intervals and a
// whole timeout (both sides ping, and answer, within their grants), then
// uses it; the broker refuses nothing. A pong the grants denied would
// end the stream within interval + timeout; the timeout is long enough
// that a pong merely late on a loaded machine does not.
func TestStreamPermissionRecipe(t *testing.T) {
	const interval, timeout = 20 * time.Millisecond, time.Second
	p := natstest.StartProcess(t, authConf(serverGrant("pay", paySubject), callerGrant("web")))
	ka := nats.WithStreamKeepAlive(interval, timeout)
	l, err := newTransport(t, p.URL(), nats.WithUserInfo("pay", "pw"), ka).Listen(paySubject, streamServer(func(ctx context.Context, s streamconn.Stream) error {
		_, m, err := s.Recv(ctx)
		if err != nil {
			return err
		}
		return s.Send(ctx, wire.CodecNone, m)
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	cs := open(t, t.Context(), dialStreams(t, p.URL(), paySubject, nats.WithUserInfo("web", "pw"), ka), "idle:x")
	idle := time.NewTimer(40*interval + timeout) // the length of the test, not a synchronisation
	<-idle.C
	if err := cs.Send(t.Context(), wire.CodecNone, []byte("late")); err != nil {
		t.Fatal(err)
	}
	if _, m, err := cs.Recv(t.Context()); err != nil || string(m) != "late" {
		t.Fatalf("after idling: %q %v", m, err)
	}
	if out := p.Output(); strings.Contains(out, "Violation") {
		t.Errorf("nats-server reports a violation:\n%s", out)
	}
}

// TestNodeStreamLost: streams through runtime.Node.OpenStream and
// NewStreamHandler over NATS; the node's broker connection dies or hangs
// mid-stream, and the caller's Recv fails with unavailable within the
// stream keep-alive's bound, while the handler's ctx ends with the loss
// as its cause; a node that stays reachable serves the caller again
// (unary calls and streams) once the broker restarts.
func TestNodeStreamLost(t *testing.T) {
	const interval, timeout = 100 * time.Millisecond, 200 * time.Millisecond
	const slack = time.Second
	ka := nats.WithStreamKeepAlive(interval, timeout)
	b := natstest.Start(t)
	for _, hang := range []bool{false, true} {
		t.Run(map[bool]string{false: "node-dies", true: "node-hangs"}[hang], func(t *testing.T) {
			p := newBrokerProxy(t, b.URL())
			ended := make(chan error, 1)
			srv := transporttest.NewServer(t, newTransport(t, p.URL(), ka))
			transporttest.MustAdd(t, srv, "role:feed", runtime.NewStreamHandler(func(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error {
				if err := s.Send(map[string]any{"n": 1}); err != nil {
					return err
				}
				<-ctx.Done()
				ended <- context.Cause(ctx)
				return ctx.Err()
			}))
			cl := transporttest.NewClient(t, newTransport(t, b.URL(), ka), "role:feed", nil, srv.Addr())
			st, err := cl.OpenStream(t.Context(), "role:feed")
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if _, err := st.Recv(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if hang {
				p.freeze()
			} else {
				p.kill()
			}
			_, err = st.Recv()
			took := time.Since(start)
			if runtime.CodeOf(err) != runtime.CodeUnavailable {
				t.Errorf("the caller's Recv: %v, want unavailable", err)
			}
			if took > interval+timeout+slack {
				t.Errorf("the caller's stream ended after %v, want within %v (+%v)", took, interval+timeout, slack)
			}
			t.Logf("the caller's stream ended %v after the node was lost: %v", took.Round(time.Millisecond), err)
			if cause := testwait.Recv(t, ended); !isLost(cause) {
				t.Errorf("the handler's ctx ended with %v, want the loss", cause)
			}
		})
	}
	t.Run("broker-restart", func(t *testing.T) {
		srv := transporttest.NewServer(t, newTransport(t, b.URL(), ka))
		transporttest.MustAdd(t, srv, "role:feed", runtime.NewStreamHandler(func(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error {
			for {
				r, err := s.Recv()
				if err != nil {
					return err
				}
				if err := s.Send(r.Msg()); err != nil {
					return err
				}
			}
		}))
		transporttest.MustAdd(t, srv, "role:ping", func(ctx context.Context, r runtime.Request) (any, error) { return "pong", nil })
		cl := transporttest.NewClient(t, newTransport(t, b.URL(), ka), "role:feed", nil, srv.Addr())
		st, err := cl.OpenStream(t.Context(), "role:feed")
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if err := st.Send(map[string]any{"n": 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		b.Stop()
		if _, err := st.Recv(); runtime.CodeOf(err) != runtime.CodeUnavailable {
			t.Errorf("the caller's Recv: %v, want unavailable", err)
		}
		b.Restart()
		testwait.Until(t, "a call and a stream go through once the broker is back", func() bool {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			if res, err := cl.Act(ctx, "role:ping", nil); err != nil || res.Value() != "pong" {
				return false
			}
			st, err := cl.OpenStream(ctx, "role:feed")
			if err != nil {
				return false
			}
			defer st.Close()
			if err := st.Send(map[string]any{"n": 2}); err != nil {
				return false
			}
			_, err = st.Recv()
			return err == nil
		})
	})
}

// TestNodeStreamMessageTooLarge: a message larger than the transport's
// frames is refused by Send with resource_exhausted, either way, and the
// stream goes on.
func TestNodeStreamMessageTooLarge(t *testing.T) {
	const limit = 64 << 10
	b := natstest.Start(t)
	big := map[string]any{"pad": strings.Repeat("x", limit)}
	got := make(chan error, 1)
	srv := transporttest.NewServer(t, newTransport(t, b.URL(), nats.WithMaxFrameSize(limit)))
	transporttest.MustAdd(t, srv, "role:big", runtime.NewStreamHandler(func(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error {
		got <- s.Send(big)
		if _, err := s.Recv(); err != nil { // the caller's small message, after its big one failed
			return err
		}
		return s.Send(map[string]any{"small": true})
	}))
	cl := transporttest.NewClient(t, newTransport(t, b.URL(), nats.WithMaxFrameSize(limit)), "role:big", nil, srv.Addr())
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

// TestNodeStreamSource: a stream's handler knows its caller as a call's
// does: the transport, and the caller's reply inbox as its address.
func TestNodeStreamSource(t *testing.T) {
	b := natstest.Start(t)
	seen := make(chan runtime.Source, 1)
	srv := transporttest.NewServer(t, newTransport(t, b.URL()))
	transporttest.MustAdd(t, srv, "role:who", runtime.NewStreamHandler(func(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error {
		r, err := s.Recv()
		if err != nil {
			return err
		}
		seen <- r.Source()
		return nil
	}))
	cl := transporttest.NewClient(t, newTransport(t, b.URL()), "role:who", nil, srv.Addr())
	st, err := cl.OpenStream(t.Context(), "role:who")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Send(map[string]any{}); err != nil {
		t.Fatal(err)
	}
	src := testwait.Recv(t, seen)
	if src.Transport != "nats" || !strings.HasPrefix(src.Addr, "_INBOX.") || src.Node != cl.ID() {
		t.Errorf("the handler's Source: %+v; want transport nats, the caller's inbox and node %s", src, cl.ID())
	}
}
