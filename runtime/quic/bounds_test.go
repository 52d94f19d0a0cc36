package quic_test

import (
	"context"
	"errors"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	quicgo "github.com/quic-go/quic-go"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
	"github.com/wizardmesh/wizard/runtime/quic"
)

// heapInUse returns the live heap after two collections (the second
// empties the sync.Pools), signed: garbage of earlier tests freed
// meanwhile may make a difference negative.
func heapInUse() int64 {
	goruntime.GC()
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// openStreams opens streams on qc, up to n or as many as the node lets
// it open at once, and shakes hands on each.
func openStreams(t *testing.T, qc *quicgo.Conn, n int) []*rawStream {
	t.Helper()
	var opened []*rawStream
	for range n {
		s, err := qc.OpenStream()
		var limit *quicgo.StreamLimitReachedError
		if errors.As(err, &limit) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		opened = append(opened, handshake(t, qc, s))
	}
	return opened
}

// raise raises m to n, if n is more.
func raise(m *atomic.Int64, n int64) {
	for old := m.Load(); n > old && !m.CompareAndSwap(old, n); old = m.Load() {
	}
}

// TestNonReadingStreams: a raw client opens as many streams on one QUIC
// connection as the node lets it (it tries 64; the node takes 16), sends
// calls on every one and reads no answer. The node holds at most the
// bounds of one connection for it, as for a TCP connection
// (WithMaxConnQueued twice, an answer or a request per handler running,
// WithMaxConnInFlight handlers), plus what QUIC's receive window lets
// the client send ahead; not those bounds once per stream. Another
// caller is served meanwhile.
func TestNonReadingStreams(t *testing.T) {
	const (
		streams  = 64 // tried
		perStrm  = 32 // calls on each stream
		inFlight = 8
		queued   = 1 << 20
		answer   = 256 << 10
		request  = 16 << 10
	)
	// Each answer is held twice while its handler runs (the runtime's
	// encoding and the frame), and so is each request (the frame and
	// the decoded payload); as in runtime/tcp's TestNonReadingClient.
	// Beyond: the node's buffers and the raw client's own (its streams,
	// its QUIC receive window, a request per stream blocked in its write).
	const slack = 4<<20 + quic.MaxStreams*request
	tests := []struct {
		name    string
		pattern string
		payload []byte
		bound   int64
	}{
		{
			name: "large answers", pattern: "role:big", payload: []byte("{}"),
			bound: 2*queued + inFlight*2*(answer+1024) + slack,
		},
		{
			// Handlers that do not return: the requests wait for a
			// handler, and then in the QUIC streams' receive windows.
			name: "large requests", pattern: "role:hold", payload: []byte(`"` + strings.Repeat("x", request) + `"`),
			bound: 2*queued + inFlight*2*(request+1024) + quic.MaxConnWindow + slack,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := transporttest.NewServer(t, newTransport(t, quic.WithInsecureSelfSigned(), quic.WithMaxConnInFlight(inFlight), quic.WithMaxConnQueued(queued)))
			big := strings.Repeat("x", answer)
			gate := transporttest.NewGate(t)
			var handled, running, most atomic.Int64 // the raw client's calls
			start := func() func() {
				handled.Add(1)
				raise(&most, running.Add(1))
				return func() { running.Add(-1) }
			}
			transporttest.MustAdd(t, srv, "role:big", func(ctx context.Context, r runtime.Request) (any, error) {
				defer start()()
				return big, nil
			})
			transporttest.MustAdd(t, srv, "role:hold", func(ctx context.Context, r runtime.Request) (any, error) {
				defer start()()
				<-gate.C()
				return nil, nil
			})
			transporttest.MustAdd(t, srv, "role:ping", func(ctx context.Context, r runtime.Request) (any, error) { return "pong", nil })
			cl := transporttest.NewClient(t, newTransport(t, quic.WithInsecureSelfSigned()), "role:ping", nil, srv.Addr())
			if _, err := cl.ActE(t.Context(), "role:ping", nil); err != nil {
				t.Fatal(err)
			}
			heap := heapInUse()

			qc, err := newRawDialer(t).dial(srv.Addr())
			if err != nil {
				t.Fatal(err)
			}
			var writers sync.WaitGroup
			t.Cleanup(func() {
				qc.CloseWithError(0, "")
				writers.Wait()
			})
			opened := openStreams(t, qc, streams) // every handshake first: answers fill the client's window
			if len(opened) > quic.MaxStreams {
				t.Errorf("the client opened %d streams on one connection, want at most %d", len(opened), quic.MaxStreams)
			}
			for _, r := range opened {
				writers.Go(func() {
					for i := range perStrm {
						f := wire.Frame{Type: wire.TypeRequest, ID: uint64(i + 1), Codec: wire.CodecJSON, Pattern: tt.pattern, Payload: tt.payload}
						if _, err := r.s.Write(wire.AppendFrame(nil, &f)); err != nil {
							return // the test closed the connection
						}
					}
				})
			}
			testwait.Until(t, "the node serves the raw client", func() bool { return handled.Load() >= inFlight })

			heaviest := int64(0)
			for i := range 5 {
				for range 4 {
					if _, err := cl.ActE(t.Context(), "role:ping", nil); err != nil {
						t.Errorf("another caller, during the flood: %v", err)
					}
				}
				grown := heapInUse() - heap
				heaviest = max(heaviest, grown)
				t.Logf("sample %d: %d handled, %d at most at once, heap %+d KiB", i, handled.Load(), most.Load(), grown>>10)
			}
			if heaviest > tt.bound {
				t.Errorf("the node holds %d KiB for one connection whose %d streams do not read, want at most %d KiB (the bounds of one connection)", heaviest>>10, len(opened), tt.bound>>10)
			}
			if n := most.Load(); n > inFlight {
				t.Errorf("%d handlers ran at once for one connection, want at most %d (WithMaxConnInFlight)", n, inFlight)
			}
			if n := handled.Load(); n >= int64(len(opened)*perStrm) {
				t.Errorf("the node served all %d calls of a client that does not read", n)
			}
		})
	}
}

// TestStreamsShareInFlight: the streams of a connection share its
// WithMaxConnInFlight. With one handler slot, a call on a second stream
// does not run beside the first stream's; it runs once that one returns,
// before the first stream's next call, which came earlier: a stream that
// frees the slot gives it to the stream waiting for it.
func TestStreamsShareInFlight(t *testing.T) {
	srv := transporttest.NewServer(t, newTransport(t, quic.WithInsecureSelfSigned(), quic.WithMaxConnInFlight(1)))
	started := make(chan string, 3)
	release := make(chan struct{})
	var running, most atomic.Int64
	handler := func(name string, wait bool) runtime.Handler {
		return func(ctx context.Context, r runtime.Request) (any, error) {
			n := running.Add(1)
			defer running.Add(-1)
			raise(&most, n)
			started <- name
			if wait {
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return name, nil
		}
	}
	transporttest.MustAdd(t, srv, "role:share,cmd:a", handler("a", true))
	transporttest.MustAdd(t, srv, "role:share,cmd:b", handler("b", false))
	call := func(s *rawStream, id uint64, cmd string) {
		s.write(wire.AppendFrame(nil, &wire.Frame{Type: wire.TypeRequest, ID: id, Codec: wire.CodecJSON, Pattern: "cmd:" + cmd + ",role:share", Payload: []byte("{}")}))
	}

	a := newRawDialer(t).open(srv.Addr())
	b := openStream(t, a.qc)
	call(a, 1, "a")
	if who := testwait.Recv(t, started); who != "a" {
		t.Fatalf("%s started first, want a", who)
	}
	call(a, 2, "a")
	a.ping(1) // the node has read a's second call
	call(b, 1, "b")
	b.ping(2) // and b's
	release <- struct{}{}
	for _, want := range []string{"b", "a"} {
		if who := testwait.Recv(t, started); who != want {
			t.Errorf("%s started, want %s", who, want)
		}
	}
	close(release)
	for _, s := range []*rawStream{a, b, a} {
		if f := s.next(); f.Type != wire.TypeResponse {
			t.Errorf("got a %v frame, want an answer", f.Type)
		}
	}
	if n := most.Load(); n > 1 {
		t.Errorf("%d handlers ran at once on one connection of two streams, want 1 (WithMaxConnInFlight)", n)
	}
}

// TestStreamsShareQueued: the streams of a connection share its
// WithMaxConnQueued. A stream whose client does not read holds the
// connection at that bound, and a call on another stream waits (QUIC's
// connection window holds the client's streams back as one, too); once
// the first stream's answers are read, the waiting call is answered.
func TestStreamsShareQueued(t *testing.T) {
	const calls, answer = 40, 64 << 10
	srv := transporttest.NewServer(t, newTransport(t, quic.WithInsecureSelfSigned(), quic.WithMaxConnInFlight(1), quic.WithMaxConnQueued(answer)))
	big := strings.Repeat("x", answer)
	var handled atomic.Int64
	transporttest.MustAdd(t, srv, "role:big", func(ctx context.Context, r runtime.Request) (any, error) {
		handled.Add(1)
		return big, nil
	})
	transporttest.MustAdd(t, srv, "role:ping", func(ctx context.Context, r runtime.Request) (any, error) { return "pong", nil })
	call := func(s *rawStream, id uint64, pattern string) {
		s.write(wire.AppendFrame(nil, &wire.Frame{Type: wire.TypeRequest, ID: id, Codec: wire.CodecJSON, Pattern: pattern, Payload: []byte("{}")}))
	}
	a := newRawDialer(t).open(srv.Addr())
	b := openStream(t, a.qc)
	for i := range calls {
		call(a, uint64(i+1), "role:big")
	}
	testwait.Until(t, "the answers fill the client's window", func() bool { return handled.Load() >= 8 })
	call(b, 1, "role:ping")
	for i := range calls {
		if f := a.next(); f.Type != wire.TypeResponse || f.ID != uint64(i+1) {
			t.Fatalf("stream a: a %v frame for call %d, want the answer to call %d", f.Type, f.ID, i+1)
		}
	}
	if f := b.next(); f.Type != wire.TypeResponse || f.ID != 1 {
		t.Errorf("stream b: a %v frame for call %d, want the answer to call 1", f.Type, f.ID)
	}
}

// TestStreamsShareUnderLoad: callers spread over the most streams a
// connection may have, against bounds so small that the streams wait
// for each other all the time, get every call answered: a stream
// waiting for room is always woken when another frees it.
func TestStreamsShareUnderLoad(t *testing.T) {
	const callers, calls = 32, 40
	srv := transporttest.NewServer(t, newTransport(t, quic.WithInsecureSelfSigned(), quic.WithMaxConnInFlight(2), quic.WithMaxConnQueued(4<<10)))
	answer := strings.Repeat("x", 1<<10)
	var running, most atomic.Int64
	transporttest.MustAdd(t, srv, "role:load", func(ctx context.Context, r runtime.Request) (any, error) {
		raise(&most, running.Add(1))
		defer running.Add(-1)
		goruntime.Gosched()
		return answer, nil
	})
	cl := transporttest.NewClient(t, newTransport(t, quic.WithInsecureSelfSigned(), quic.WithStreams(quic.MaxStreams), quic.WithStreamFill(-1)), "role:load", nil, srv.Addr())
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range callers {
		wg.Go(func() {
			for range calls {
				if _, err := cl.ActE(t.Context(), "role:load", nil, runtime.Idempotent()); err != nil {
					if failed.Add(1) == 1 {
						t.Errorf("a call failed: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d calls failed", n, callers*calls)
	}
	if n := most.Load(); n > 2 {
		t.Errorf("%d handlers ran at once for one connection, want at most 2 (WithMaxConnInFlight)", n)
	}
}
