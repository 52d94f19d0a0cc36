package mux

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

var update = flag.Bool("update", false, "rewrite the FuzzServe seed corpus in testdata")

const seedDir = "testdata/fuzz/FuzzServe"

// memConn is an in-memory stream for Serve: reads come from in, then
// block until Close; writes are kept.
type memConn struct {
	in      *bytes.Reader
	drained chan struct{} // closed when the reader wants more than in holds
	closed  chan struct{}

	drainOnce, closeOnce sync.Once
	mu                   sync.Mutex
	out                  bytes.Buffer
}

func newMemConn(in []byte) *memConn {
	return &memConn{in: bytes.NewReader(in), drained: make(chan struct{}), closed: make(chan struct{})}
}

func (c *memConn) Read(p []byte) (int, error) {
	if c.in.Len() > 0 {
		return c.in.Read(p)
	}
	c.drainOnce.Do(func() { close(c.drained) })
	<-c.closed
	return 0, net.ErrClosed
}

func (c *memConn) Write(p []byte) (int, error) {
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	default:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(p)
}

func (c *memConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

// The bounds FuzzServe serves with: small, so that requests wait for
// handlers and the reader pauses.
var fuzzOptions = Options{KeepAlive: -1, MaxInFlight: 4, MaxQueued: 1024, DrainTimeout: time.Second, HandshakeTimeout: time.Second}

// handshakeBytes is a client's handshake, one that predates streams (a
// client's features are not looked at).
const handshakeBytes = "WZRD\x01\x00\x00\x00"

// serverHandshake is the server's handshake: it announces streams.
const serverHandshake = "WZRD\x01\x01\x00\x00"

// fuzzSeeds are the seed corpus of FuzzServe: client streams, handshake
// included, good and bad. They are small (a few KiB at most), so that
// minimizing the inputs they lead to takes little of a short fuzzing run.
func fuzzSeeds() map[string][]byte {
	frames := func(fs ...*wire.Frame) []byte {
		b := []byte(handshakeBytes)
		for _, f := range fs {
			b = wire.AppendFrame(b, f)
		}
		return b
	}
	req := func(id uint64, flags wire.Flags, payload string) *wire.Frame {
		return &wire.Frame{Type: wire.TypeRequest, ID: id, Flags: flags, Pattern: "role:fuzz", Deadline: time.Second, Payload: []byte(payload)}
	}
	var pipelined, big []*wire.Frame
	for i := range 20 {
		pipelined = append(pipelined, req(uint64(i+1), 0, "x"))
		if i%5 == 0 {
			pipelined = append(pipelined, &wire.Frame{Type: wire.TypePing, ID: uint64(i)})
		}
	}
	for i := range 6 {
		big = append(big, req(uint64(i+1), 0, strings.Repeat("b", 400)))
	}
	valid := frames(req(1, 0, "a"))
	return map[string][]byte{
		"calls": frames(
			req(1, 0, "a"),
			req(2, wire.FlagNoReply, "b"),
			req(3, wire.FlagKeep|wire.FlagIdempotent, "c"),
			&wire.Frame{Type: wire.TypePing, ID: 7},
			&wire.Frame{Type: wire.TypeCancel, ID: 1},
			&wire.Frame{Type: wire.TypePong, ID: 1},
		),
		"pipelined":              frames(pipelined...),
		"big answers":            frames(big...),
		"meta":                   frames(&wire.Frame{Type: wire.TypeRequest, ID: 1, Pattern: "role:fuzz", Meta: []wire.Meta{{Key: "caller", Value: "n1"}, {Key: "o", Value: "k:v"}}}),
		"no deadline":            frames(&wire.Frame{Type: wire.TypeRequest, ID: 1, Flags: wire.FlagKeep, Pattern: "role:fuzz"}),
		"duplicate id":           frames(req(5, 0, "a"), req(5, 0, "b")),
		"goaway from a client":   frames(req(1, 0, "a"), &wire.Frame{Type: wire.TypeGoAway, ID: 1}, req(2, 0, "b")),
		"response from a client": frames(&wire.Frame{Type: wire.TypeResponse, ID: 1}),
		"stream": frames(
			&wire.Frame{Type: wire.TypeStreamOpen, ID: 1, Pattern: "role:fuzz", Deadline: time.Second},
			&wire.Frame{Type: wire.TypeStreamData, ID: 1, Payload: []byte("a")},
			&wire.Frame{Type: wire.TypeStreamCredit, ID: 1, Payload: wire.AppendCredit(nil, 10)},
			req(2, 0, "b"),
			&wire.Frame{Type: wire.TypeStreamData, ID: 1, Payload: []byte("c")},
			&wire.Frame{Type: wire.TypeStreamClose, ID: 1},
			&wire.Frame{Type: wire.TypeStreamOpen, ID: 3, Pattern: "role:fuzz"},
			&wire.Frame{Type: wire.TypeCancel, ID: 3},
		),
		"stream end from a client": frames(&wire.Frame{Type: wire.TypeStreamEnd, ID: 1}),
		"garbage":                  append([]byte(handshakeBytes), "\x00\x00\x00\x10\xee\xee\xee\xee\xee\xee\xee\xee\xee\xee\xee\xee\xee\xee\xee\xee"...),
		"truncated":                valid[:len(valid)-3],
		"oversized":                append([]byte(handshakeBytes), "\x7f\xff\xff\xff\x01"...),
		"wrong version":            append([]byte("WZRD\x02\x00\x00\x00"), valid[8:]...),
		"wrong magic":              []byte("GET / HTTP/1.1\r\n\r\n"),
		"short handshake":          []byte("WZ"),
	}
}

func seedFile(b []byte) []byte {
	return fmt.Appendf(nil, "go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(b)))
}

// TestFuzzSeeds checks that the seed corpus in testdata is what fuzzSeeds
// produces; run with -update to rewrite it.
func TestFuzzSeeds(t *testing.T) {
	seeds := fuzzSeeds()
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range seeds {
			if !yield(n) {
				return
			}
		}
	})
	if *update {
		if err := os.MkdirAll(seedDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(seedDir, strings.ReplaceAll(n, " ", "_")), seedFile(seeds[n]), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, n := range names {
		got, err := os.ReadFile(filepath.Join(seedDir, strings.ReplaceAll(n, " ", "_")))
		if err != nil {
			t.Fatalf("%v (run go test -run TestFuzzSeeds -update)", err)
		}
		if diff := cmp.Diff(string(seedFile(seeds[n])), string(got)); diff != "" {
			t.Errorf("seed %s is stale (run with -update) (-want +got):\n%s", n, diff)
		}
	}
}

// clientFrames are what a client stream asks: how many requests of each
// id want an answer, how many pings of each id, and which streams it
// opened.
type clientFrames struct {
	requests, pings, streams map[uint64]int
}

// parseClient reads the frames of a client stream b that starts with a
// valid handshake, up to the first that does not decode.
func parseClient(b []byte) clientFrames {
	cf := clientFrames{requests: map[uint64]int{}, pings: map[uint64]int{}, streams: map[uint64]int{}}
	br := bufio.NewReader(bytes.NewReader(b[wire.HandshakeSize:]))
	for {
		var f wire.Frame
		if _, err := wire.ReadFrame(br, fuzzOptions.MaxFrameSize, &f, nil); err != nil {
			return cf
		}
		switch {
		case f.Type == wire.TypeRequest && f.Flags&wire.FlagNoReply == 0:
			cf.requests[f.ID]++
		case f.Type == wire.TypePing:
			cf.pings[f.ID]++
		case f.Type == wire.TypeStreamOpen:
			cf.streams[f.ID]++
		}
	}
}

// fuzzStreamEcho echoes a stream's messages until the client closes its
// side.
func fuzzStreamEcho(ctx context.Context, ss *ServerStream) error {
	for {
		c, p, err := ss.Recv(ctx)
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		if err := ss.Send(ctx, c, p); err != nil {
			return err
		}
	}
}

// FuzzServe feeds a client stream, handshake included, to Serve with
// small bounds. Serve must not panic and must return, closing the stream:
// at once for garbage, or after a graceful shutdown once the input is
// read. At most MaxInFlight handlers run at once; what the server writes
// is its handshake and whole frames (a cut tail only when the connection
// failed): answers only to requests that want one, at most one each,
// pongs only to pings, and a goaway.
func FuzzServe(f *testing.F) {
	f.Add([]byte(handshakeBytes))
	f.Fuzz(func(t *testing.T, b []byte) { serveFuzzInput(t, b, 10*time.Second) })
}

// serveFuzzInput is FuzzServe's check of one input; Serve must return
// within guard.
func serveFuzzInput(t *testing.T, b []byte, guard time.Duration) {
	var running, peak atomic.Int64
	h := func(ctx context.Context, req *wire.Frame) *wire.Frame {
		n := running.Add(1)
		defer running.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		return &wire.Frame{Type: wire.TypeResponse, Payload: req.Payload}
	}
	conn := newMemConn(b)
	ctx, shutdown := context.WithCancel(context.Background())
	defer shutdown()
	served := make(chan error, 1)
	opts := fuzzOptions
	opts.ServeStream = fuzzStreamEcho
	go func() { served <- Serve(ctx, conn, h, opts) }()
	timer := time.NewTimer(guard)
	defer timer.Stop()
	var err error
	select {
	case err = <-served:
	case <-conn.drained: // the input is read: shut down
		shutdown()
		select {
		case err = <-served:
		case <-timer.C:
			t.Fatal("Serve did not return after a shutdown")
		}
	case <-timer.C:
		t.Fatal("Serve did not return")
	}
	select {
	case <-conn.closed:
	default:
		t.Fatalf("Serve returned %v without closing the stream", err)
	}
	if p := peak.Load(); p > int64(fuzzOptions.MaxInFlight) {
		t.Fatalf("%d handlers ran at once, want at most %d", p, fuzzOptions.MaxInFlight)
	}

	out := conn.out.Bytes()
	if len(out) == 0 {
		return // the handshake failed before the server answered
	}
	if !bytes.HasPrefix(out, []byte(serverHandshake)) {
		t.Fatalf("the server wrote %q before anything, want its handshake", out[:min(len(out), 8)])
	}
	if len(b) < wire.HandshakeSize || string(b[:5]) != handshakeBytes[:5] { // magic and version
		if len(out) > wire.HandshakeSize {
			t.Fatalf("the server wrote frames after a failed handshake")
		}
		return
	}
	client := parseClient(b)
	br := bufio.NewReader(bytes.NewReader(out[wire.HandshakeSize:]))
	for {
		var g wire.Frame
		if _, rerr := wire.ReadFrame(br, 0, &g, nil); rerr == io.EOF {
			break
		} else if rerr != nil {
			if err == nil || !errors.Is(rerr, io.ErrUnexpectedEOF) {
				t.Fatalf("the server wrote a broken frame (%v); Serve = %v", rerr, err)
			}
			return // the connection failed while the writer was at it
		}
		switch g.Type {
		case wire.TypeResponse, wire.TypeError:
			if client.requests[g.ID] == 0 {
				t.Fatalf("an answer to %d, which no request (or no more) awaits", g.ID)
			}
			client.requests[g.ID]--
		case wire.TypePong:
			if client.pings[g.ID] == 0 {
				t.Fatalf("a pong %d for no ping", g.ID)
			}
			client.pings[g.ID]--
		case wire.TypeGoAway:
		case wire.TypeStreamData, wire.TypeStreamHeader, wire.TypeStreamCredit:
			if client.streams[g.ID] == 0 {
				t.Fatalf("a %v frame for %d, which no stream open awaits", g.Type, g.ID)
			}
		case wire.TypeStreamEnd:
			if client.streams[g.ID] == 0 {
				t.Fatalf("a stream end for %d, which no stream open (or no more) awaits", g.ID)
			}
			client.streams[g.ID]--
		default:
			t.Fatalf("the server wrote a %v frame", g.Type)
		}
	}
	if err != nil {
		return
	}
	// A graceful shutdown after the whole input was read: every
	// request was taken before the goaway, so every one is answered,
	// and every ping.
	for id, n := range client.requests {
		if n > 0 {
			t.Fatalf("request %d was not answered (%d times) before a graceful shutdown", id, n)
		}
	}
	for id, n := range client.pings {
		if n > 0 {
			t.Fatalf("ping %d was not answered before a graceful shutdown", id)
		}
	}
}
