package mux

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// heapInUse returns the live heap after two collections (the second
// empties the sync.Pools).
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// slack is what a connection costs beyond its bounds: its buffered reader
// and writer, the frames being decoded, the test's own garbage.
const slack = 2 << 20

// TestNonReadingClient: a client that writes requests and never reads the
// answers costs the server at most its bounds per connection (MaxQueued
// bytes of answers, as much of requests waiting for a handler, and an
// answer per handler running), and at most a goroutine per handler
// running; another connection is served meanwhile. The server stops
// reading the hostile connection, so the client's writes block.
func TestNonReadingClient(t *testing.T) {
	tests := []struct {
		name     string
		frames   int
		frame    *wire.Frame // what the client sends, frames times
		answer   int         // the answer's payload size
		maxBytes int64       // what the server may hold for the connection
	}{
		{
			// As in the report, 8,000 requests of 84 bytes; answers of
			// 16 KiB (the report's 64 KiB would take 512 MiB before the
			// fix).
			name: "large answers", frames: 8000, answer: 16 << 10,
			frame:    &wire.Frame{Type: wire.TypeRequest, Pattern: "role:test,cmd:big", Payload: make([]byte, 50)},
			maxBytes: 2*DefaultMaxQueued + DefaultMaxInFlight*(16<<10+32),
		},
		{
			name: "pipelined small requests", frames: 20000, answer: 10,
			frame:    &wire.Frame{Type: wire.TypeRequest, Pattern: "role:test"},
			maxBytes: 2*DefaultMaxQueued + DefaultMaxInFlight*512, // answers, and requests waiting for a handler
		},
		{
			name: "pings", frames: 100000,
			frame:    &wire.Frame{Type: wire.TypePing},
			maxBytes: DefaultMaxQueued + 2*DefaultWriteQueue*512,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				answer := make([]byte, tt.answer)
				var handled atomic.Int64
				h := func(ctx context.Context, req *wire.Frame) *wire.Frame {
					handled.Add(1)
					return &wire.Frame{Type: wire.TypeResponse, Payload: answer}
				}
				good := newPair(t, h, Options{}, Options{})
				if _, err := good.client.Call(t.Context(), reqFrame(0, "before")); err != nil {
					t.Fatal(err)
				}

				heap, goroutines := heapInUse(), runtime.NumGoroutine()
				cconn, sconn := net.Pipe()
				served := make(chan error, 1)
				go func() { served <- Serve(t.Context(), sconn, h, Options{}) }()
				sent := make(chan int, 1)
				go func() {
					// Read the server's handshake, then only write.
					cconn.Write([]byte("WZRD\x01\x00\x00\x00"))
					io.ReadFull(cconn, make([]byte, wire.HandshakeSize))
					n := 0
					for i := range tt.frames {
						f := *tt.frame
						f.ID = uint64(i + 1)
						if _, err := cconn.Write(wire.AppendFrame(nil, &f)); err != nil {
							break
						}
						n++
					}
					sent <- n
				}()
				synctest.Wait() // the server has stopped reading, or read everything

				grown := heapInUse() - heap
				more := runtime.NumGoroutine() - goroutines
				t.Logf("%d handled, heap +%d KiB, +%d goroutines", handled.Load()-1, grown>>10, more)
				if grown > tt.maxBytes+slack {
					t.Errorf("the server holds %d KiB for a client that does not read, want at most %d KiB", grown>>10, (tt.maxBytes+slack)>>10)
				}
				if more > DefaultMaxInFlight+8 {
					t.Errorf("%d goroutines for a client that does not read, want at most %d", more, DefaultMaxInFlight+8)
				}
				wrote := false
				select {
				case n := <-sent:
					wrote = true
					t.Errorf("the server read all %d frames of a client that does not read", n)
				default:
				}

				// Another connection is served meanwhile.
				for range 10 {
					if _, err := good.client.Call(t.Context(), reqFrame(0, "during")); err != nil {
						t.Errorf("another connection: %v", err)
					}
				}
				cconn.Close()
				<-served
				if !wrote {
					<-sent
				}
			})
		})
	}
}

// TestPingFlood: every ping of a burst is answered, the connection is
// not closed for it, and another connection is served meanwhile.
func TestPingFlood(t *testing.T) {
	leak.Check(t)
	const pings = 100000
	var logs testlog.Buffer
	s := listen(t, echo, Options{Logger: logs.Logger()})
	good := s.dial(t, Options{})
	r := s.dialRaw(t)
	r.handshake()

	go func() {
		// The burst, then a request whose answer comes after every pong.
		burst := make([]byte, 0, 1000*(wire.MinFrameSize+4))
		for i := 0; i < pings; {
			burst = burst[:0]
			for j := 0; j < 1000 && i < pings; j++ {
				i++
				burst = wire.AppendFrame(burst, &wire.Frame{Type: wire.TypePing, ID: uint64(i)})
			}
			if _, err := r.conn.Write(burst); err != nil {
				return
			}
		}
		r.conn.Write(wire.AppendFrame(nil, reqFrame(1, "last")))
	}()
	pongs, closed := 0, false
	r.conn.SetReadDeadline(time.Now().Add(testwait.Guard))
	for {
		f, err := r.read()
		if err != nil {
			closed = true
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				t.Errorf("reading: %v", err)
			}
			break
		}
		if f.Type == wire.TypePong {
			pongs++
		}
		if f.Type == wire.TypeResponse {
			break
		}
	}
	t.Logf("%d pongs for %d pings; closed: %v", pongs, pings, closed)
	switch {
	case closed && !strings.Contains(logs.String(), "connection closed"):
		t.Errorf("the flooding connection was closed with no reason logged:\n%s", logs.String())
	case !closed && pongs != pings:
		t.Errorf("%d pongs for %d pings: pings were dropped, and the connection is still open", pongs, pings)
	}
	if _, err := good.Call(t.Context(), reqFrame(0, "after")); err != nil {
		t.Errorf("another connection: %v", err)
	}
}

// TestKeepAliveWhileBusy: keep-alive tells a server that stopped reading
// because its handlers are slow (not the peer's fault) from a peer that
// does not read (the peer's fault).
func TestKeepAliveWhileBusy(t *testing.T) {
	slow := func(ctx context.Context, req *wire.Frame) *wire.Frame {
		time.Sleep(10 * time.Second) // work, in the bubble
		return &wire.Frame{Type: wire.TypeResponse, Payload: req.Payload}
	}
	ka := Options{KeepAlive: time.Second, KeepAliveTimeout: time.Second}
	// calls runs n calls at once through cl, and checks their answers.
	calls := func(t *testing.T, cl *Client, n int) {
		errs := make(chan error, n)
		for range n {
			go func() {
				_, err := cl.Call(t.Context(), reqFrame(0, "x"))
				errs <- err
			}()
		}
		for range n {
			if err := <-errs; err != nil {
				t.Errorf("call: %v", err)
			}
		}
	}

	t.Run("requests wait for handlers", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// Two handlers for eight calls of ten seconds each, pings every
			// second on both sides: the server reads on while requests wait,
			// so pings are answered both ways, and every call succeeds.
			sopts := ka
			sopts.MaxInFlight = 2
			p := newPair(t, slow, sopts, ka)
			start := time.Now()
			calls(t, p.client, 8)
			// The first request may be served inline, if it came alone,
			// and hold up reading for two ticks of the watch.
			if d := time.Since(start); d < 40*time.Second || d > 40*time.Second+2*handOverAfter {
				t.Errorf("8 calls on 2 handlers took %v, want 40s (+ up to %v)", d, 2*handOverAfter)
			}
			if err := p.client.Err(); err != nil {
				t.Errorf("the connection ended: %v", err)
			}
		})
	})

	t.Run("server stops reading", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// One handler and room for one waiting request: the server
			// stops reading, its pings' pongs wait behind requests it has
			// not read, for tens of seconds. Keep-alive does not close
			// the connection: this side stopped reading. (The client does
			// not ping: its pings would wait behind its requests too, and
			// it cannot tell this from a dead server.)
			sopts := ka
			sopts.MaxInFlight, sopts.MaxQueued = 1, 300
			p := newPair(t, slow, sopts, Options{KeepAlive: -1})
			start := time.Now()
			calls(t, p.client, 5)
			if d := time.Since(start); d != 50*time.Second {
				t.Errorf("5 calls on 1 handler took %v, want 50s", d)
			}
			if err := p.client.Err(); err != nil {
				t.Errorf("the connection ended: %v", err)
			}
		})
	})

	t.Run("answers come, pongs do not", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// A server that answers every request after half a second
			// (twice per ping timeout) but never pongs: while answers
			// come, the client keeps it.
			cconn, sconn := net.Pipe()
			defer sconn.Close()
			go func() {
				r := &raw{t: t, conn: sconn, br: bufio.NewReader(sconn)}
				io.ReadFull(r.br, make([]byte, wire.HandshakeSize))
				r.write([]byte(handshakeBytes))
				for {
					f, err := r.read()
					if err != nil {
						return
					}
					if f.Type == wire.TypeRequest {
						time.Sleep(500 * time.Millisecond)
						sconn.Write(wire.AppendFrame(nil, &wire.Frame{Type: wire.TypeResponse, ID: f.ID}))
					}
				}
			}()
			cl, err := NewClient(cconn, ka)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			for range 20 { // ten seconds
				if _, err := cl.Call(t.Context(), reqFrame(0, "x")); err != nil {
					t.Fatalf("call: %v", err)
				}
			}
			// Then nothing comes: the client closes it.
			<-cl.Done()
			if err := cl.Err(); !errors.Is(err, ErrKeepAliveTimeout) {
				t.Errorf("Err() = %v, want ErrKeepAliveTimeout", err)
			}
		})
	})

	t.Run("client does not read", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// The server stops reading too, but its ping cannot leave:
			// keep-alive closes the connection as before.
			answer := make([]byte, 16<<10)
			h := func(ctx context.Context, req *wire.Frame) *wire.Frame {
				return &wire.Frame{Type: wire.TypeResponse, Payload: answer}
			}
			cconn, sconn := net.Pipe()
			defer cconn.Close()
			served := make(chan error, 1)
			go func() { served <- Serve(t.Context(), sconn, h, ka) }()
			go func() {
				cconn.Write([]byte("WZRD\x01\x00\x00\x00"))
				io.ReadFull(cconn, make([]byte, wire.HandshakeSize))
				for i := range 10000 {
					if _, err := cconn.Write(wire.AppendFrame(nil, reqFrame(uint64(i+1), ""))); err != nil {
						return
					}
				}
			}()
			start := time.Now()
			if err := <-served; !errors.Is(err, ErrKeepAliveTimeout) {
				t.Errorf("Serve = %v, want ErrKeepAliveTimeout", err)
			}
			if d := time.Since(start); d != 2*time.Second {
				t.Errorf("closed after %v, want 2s (ping after 1s, timeout 1s)", d)
			}
		})
	})
}

// TestGoAwayWithRequestsWaiting: a shutdown's goaway names the requests
// waiting for a handler too; they are served, and the requests the server
// had not read are refused as not sent.
func TestGoAwayWithRequestsWaiting(t *testing.T) {
	// Room for one waiting request, so that the second takes them past
	// their bound: one runs, two wait.
	testGoAwayWaiting(t, Options{MaxInFlight: 1, MaxQueued: requestCost(reqFrame(1, "x")) + 8}, 3)
}

// TestRoomSizeCountsWaiting: a waiting request is counted with the room
// its record was made with (Options.RoomSize), so that a bound that
// holds one request of a record alone, and two of them waiting past it,
// holds one with its room: one runs, one waits.
func TestRoomSizeCountsWaiting(t *testing.T) {
	opts := Options{MaxInFlight: 1, MaxQueued: requestCost(reqFrame(1, "x")) + 8, RoomSize: 64, Room: newRoomed}
	testGoAwayWaiting(t, opts, 2)
}

// testGoAwayWaiting serves calls with a server of opts whose handlers
// wait, shuts it down once it stopped reading and wants served of the
// calls answered, the rest refused.
func testGoAwayWaiting(t *testing.T, opts Options, served int) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		h := func(ctx context.Context, req *wire.Frame) *wire.Frame {
			<-release
			return &wire.Frame{Type: wire.TypeResponse, Payload: req.Payload}
		}
		cconn, sconn := net.Pipe()
		ctx, shutdown := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- Serve(ctx, sconn, h, opts) }()
		cl, err := NewClient(cconn, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		const n = 6
		errs := make(chan error, n)
		for range n {
			go func() {
				_, err := cl.Call(t.Context(), reqFrame(0, "x"))
				errs <- err
			}()
		}
		// One runs (inline, handing reading over after two ticks of the
		// watch), the others wanted wait (the last takes them past their
		// bound), the server stopped reading.
		time.Sleep(2 * handOverAfter)
		synctest.Wait()
		shutdown()
		synctest.Wait()
		close(release)
		ok, refused := 0, 0
		for range n {
			switch err := <-errs; {
			case err == nil:
				ok++
			case err == ErrGoingAway:
				refused++
			default:
				t.Errorf("call: %v", err)
			}
		}
		if ok != served || refused != n-served {
			t.Errorf("%d calls served and %d refused, want %d (running and waiting) and %d", ok, refused, served, n-served)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve = %v", err)
		}
	})
}
