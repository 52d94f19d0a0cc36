package mux

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

func TestCallRoundTrip(t *testing.T) {
	leak.Check(t)
	got := make(chan *wire.Frame, 1)
	p := newPair(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
		got <- req
		return &wire.Frame{Type: wire.TypeResponse, Codec: wire.CodecJSON, Flags: wire.FlagIdempotent,
			Meta: []wire.Meta{{Key: "server", Value: "s1"}}, Payload: []byte(`{"r":3}`)}
	}, Options{}, Options{})

	req := &wire.Frame{
		Type:  wire.TypeResponse, // Call makes it a request
		ID:    999,               // and numbers it itself
		Flags: wire.FlagIdempotent | wire.FlagRetry, Codec: wire.CodecJSON,
		Pattern: "cmd:sum,role:math",
		Meta:    []wire.Meta{{Key: "caller", Value: "node-a"}, {Key: "traceparent", Value: "00-abc-01"}},
		Payload: []byte(`{"a":1,"b":2}`),
	}
	before := *req
	resp, err := p.client.Call(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&before, req); diff != "" {
		t.Errorf("Call modified the request (-before +after):\n%s", diff)
	}

	wantReq := before
	wantReq.Type, wantReq.ID = wire.TypeRequest, 1
	wantReq.Deadline = DefaultServeTimeout // a request without a deadline gets the server's
	if diff := cmp.Diff(&wantReq, testwait.Recv(t, got)); diff != "" {
		t.Errorf("handler's request (-want +got):\n%s", diff)
	}
	wantResp := &wire.Frame{Type: wire.TypeResponse, ID: 1, Codec: wire.CodecJSON, Flags: wire.FlagIdempotent,
		Meta: []wire.Meta{{Key: "server", Value: "s1"}}, Payload: []byte(`{"r":3}`)}
	if diff := cmp.Diff(wantResp, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
}

func TestErrorFrames(t *testing.T) {
	leak.Check(t)
	p := newPair(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
		switch req.Pattern {
		case "error":
			return &wire.Frame{Type: wire.TypeError, Payload: wire.AppendError(nil, 5, "no such thing")}
		case "nil":
			return nil
		case "ping":
			return &wire.Frame{Type: wire.TypePing}
		case "panic":
			panic("boom")
		case "big":
			return &wire.Frame{Type: wire.TypeResponse, Payload: make([]byte, 2000)}
		}
		return &wire.Frame{Type: wire.TypeResponse}
	}, Options{MaxFrameSize: 1000}, Options{MaxFrameSize: 1000})

	tests := []struct {
		pattern string
		code    uint32
		msg     string
	}{
		{"error", 5, "no such thing"},
		{"nil", codeInternal, "wizard: handler returned no answer"},
		{"ping", codeInternal, "wizard: handler answered with a ping frame"},
		{"panic", codeInternal, "wizard: internal error"},
		{"big", codeResourceExhausted, "wizard: response of 2014 bytes exceeds the frame limit of 1000"},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			resp, err := p.client.Call(t.Context(), &wire.Frame{Pattern: tt.pattern})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Type != wire.TypeError {
				t.Fatalf("got a %v frame, want an error frame", resp.Type)
			}
			code, msg, err := wire.DecodeError(resp.Payload)
			if err != nil {
				t.Fatal(err)
			}
			if code != tt.code || msg != tt.msg {
				t.Errorf("error %d %q, want %d %q", code, msg, tt.code, tt.msg)
			}
		})
	}

	// A request above the limit fails locally; the connection stays up.
	_, err := p.client.Call(t.Context(), &wire.Frame{Payload: make([]byte, 1000)})
	if !errors.Is(err, wire.ErrFrameTooLarge) {
		t.Errorf("oversized request: %v, want ErrFrameTooLarge", err)
	}
	if _, err := p.client.Call(t.Context(), &wire.Frame{}); err != nil {
		t.Errorf("call after the oversized one: %v", err)
	}
}

func testConcurrentCalls(t *testing.T, cl *Client) {
	const callers, calls = 200, 25
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				want := strconv.Itoa(g) + "/" + strconv.Itoa(i)
				resp, err := cl.Call(t.Context(), &wire.Frame{
					Pattern: "role:echo", Meta: []wire.Meta{{Key: "k", Value: want}}, Payload: []byte(want),
				})
				if err != nil {
					errs <- err
					return
				}
				if string(resp.Payload) != want || len(resp.Meta) != 1 || resp.Meta[0].Value != want {
					errs <- fmt.Errorf("call %s got payload %q meta %v", want, resp.Payload, resp.Meta)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestConcurrentCalls(t *testing.T) {
	t.Run("pipe", func(t *testing.T) {
		leak.Check(t)
		testConcurrentCalls(t, newPair(t, echo, Options{}, Options{}).client)
	})
	t.Run("tcp", func(t *testing.T) {
		leak.Check(t)
		testConcurrentCalls(t, listen(t, echo, Options{}).dial(t, Options{}))
	})
	t.Run("tiny write queue", func(t *testing.T) {
		leak.Check(t)
		testConcurrentCalls(t, newPair(t, echo, Options{WriteQueue: 1}, Options{WriteQueue: 1}).client)
	})
}

func TestCancelReachesHandler(t *testing.T) {
	leak.Check(t)
	started := make(chan struct{})
	ended := make(chan error, 1)
	p := newPair(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
		close(started)
		<-ctx.Done()
		ended <- ctx.Err()
		return &wire.Frame{Type: wire.TypeResponse}
	}, Options{}, Options{})

	ctx, cancel := context.WithCancel(t.Context())
	called := make(chan error, 1)
	go func() {
		_, err := p.client.Call(ctx, &wire.Frame{Pattern: "role:slow"})
		called <- err
	}()
	testwait.Recv(t, started)
	cancel()
	if err := testwait.Recv(t, called); err != context.Canceled {
		t.Errorf("Call = %v, want context.Canceled", err)
	}
	if err := testwait.Recv(t, ended); err != context.Canceled {
		t.Errorf("handler's ctx.Err() = %v, want context.Canceled", err)
	}
	// The connection is fine, and the late answer was dropped.
	if _, err := p.client.Call(t.Context(), &wire.Frame{}); err != nil {
		t.Errorf("next call: %v", err)
	}
}

func TestDeadlinePropagates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type seen struct {
			remaining time.Duration
			ok        bool
		}
		got := make(chan seen, 1)
		p := newPair(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
			dl, ok := ctx.Deadline()
			got <- seen{time.Until(dl), ok}
			return &wire.Frame{Type: wire.TypeResponse}
		}, Options{}, Options{})

		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		if _, err := p.client.Call(ctx, &wire.Frame{}); err != nil {
			t.Fatal(err)
		}
		// Time stands still in the bubble: the handler sees the whole
		// budget, to the microsecond.
		if s := <-got; !s.ok || s.remaining != 3*time.Second {
			t.Errorf("handler's deadline: %v left (set %v), want 3s", s.remaining, s.ok)
		}

		if _, err := p.client.Call(t.Context(), &wire.Frame{}); err != nil {
			t.Fatal(err)
		}
		if s := <-got; !s.ok || s.remaining != DefaultServeTimeout {
			t.Errorf("a call without a deadline: the handler's deadline is %v away (set %v), want the server's default, %v", s.remaining, s.ok, DefaultServeTimeout)
		}

		// A ctx whose deadline has passed is not sent.
		ctx, cancel = context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
		defer cancel()
		if _, err := p.client.Call(ctx, &wire.Frame{}); err != context.DeadlineExceeded {
			t.Errorf("expired ctx: %v, want context.DeadlineExceeded", err)
		}
	})
}

func TestDeadlineExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ended := make(chan error, 1)
		release := make(chan struct{})
		h := func(ctx context.Context, req *wire.Frame) *wire.Frame {
			<-ctx.Done()
			ended <- ctx.Err()
			if req.ID != 7 {
				<-release // answer only after the caller gave up
			}
			return &wire.Frame{Type: wire.TypeResponse}
		}
		// The caller's ctx and the handler's end together.
		p := newPair(t, h, Options{}, Options{})
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		start := time.Now()
		if _, err := p.client.Call(ctx, &wire.Frame{}); err != context.DeadlineExceeded {
			t.Errorf("Call = %v, want context.DeadlineExceeded", err)
		}
		close(release)
		if err := <-ended; err != context.DeadlineExceeded && err != context.Canceled {
			t.Errorf("handler's ctx.Err() = %v", err)
		}
		if d := time.Since(start); d != 2*time.Second {
			t.Errorf("call ended after %v, want 2s", d)
		}

		// A peer that sends a deadline and never cancels: the handler's
		// ctx ends with the deadline on its own.
		cconn, sconn := net.Pipe()
		served := make(chan error, 1)
		go func() { served <- Serve(t.Context(), sconn, h, Options{}) }()
		r := newRaw(t, cconn)
		r.handshake()
		f := reqFrame(7, "")
		f.Deadline = 1500 * time.Millisecond
		start = time.Now()
		r.send(f)
		if err := <-ended; err != context.DeadlineExceeded {
			t.Errorf("handler's ctx.Err() = %v, want context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d != 1500*time.Millisecond {
			t.Errorf("handler's ctx ended after %v, want 1.5s", d)
		}
		resp, err := r.read()
		if err != nil || resp.Type != wire.TypeResponse || resp.ID != 7 {
			t.Errorf("answer %+v, %v", resp, err)
		}
		cconn.Close()
		<-served
	})
}

func TestNoReply(t *testing.T) {
	leak.Check(t)
	ran := make(chan string, 10)
	h := func(ctx context.Context, req *wire.Frame) *wire.Frame {
		ran <- string(req.Payload)
		return &wire.Frame{Type: wire.TypeResponse, Payload: []byte("should never be sent")}
	}

	t.Run("client", func(t *testing.T) {
		p := newPair(t, h, Options{}, Options{})
		resp, err := p.client.Call(t.Context(), &wire.Frame{Flags: wire.FlagNoReply, Payload: []byte("fire")})
		if resp != nil || err != nil {
			t.Fatalf("Call = %v, %v; want nil, nil", resp, err)
		}
		if got := testwait.Recv(t, ran); got != "fire" {
			t.Errorf("handler ran with %q", got)
		}
		p.client.c.mu.Lock()
		n := len(p.client.pending)
		p.client.c.mu.Unlock()
		if n != 0 {
			t.Errorf("%d calls pending after a no-reply call", n)
		}
	})

	t.Run("wire", func(t *testing.T) {
		// A raw client sends no-reply requests, waits for the handler to
		// run, and shuts the server down: everything the server wrote
		// before closing is the goaway alone.
		cconn, sconn := net.Pipe()
		ctx, stop := context.WithCancel(t.Context())
		served := make(chan error, 1)
		go func() { served <- Serve(ctx, sconn, h, Options{}) }()
		r := newRaw(t, cconn)
		r.handshake()
		for i := range 3 {
			f := reqFrame(uint64(i+1), "nr"+strconv.Itoa(i))
			f.Flags = wire.FlagNoReply
			r.send(f)
		}
		for range 3 {
			testwait.Recv(t, ran)
		}
		stop()
		frames := r.readAll()
		want := []*wire.Frame{{Type: wire.TypeGoAway, ID: 3}}
		if diff := cmp.Diff(want, frames, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("frames from the server (-want +got):\n%s", diff)
		}
		if err := testwait.Recv(t, served); err != nil {
			t.Errorf("Serve = %v", err)
		}
	})
}

func TestOptionsValidation(t *testing.T) {
	tests := []Options{
		{MaxFrameSize: -1},
		{MaxFrameSize: 5},
		{KeepAliveTimeout: -1},
		{WriteQueue: -1},
		{HandshakeTimeout: -time.Second},
		{DrainTimeout: -time.Second},
		{RoomSize: -1},
	}
	for _, o := range tests {
		t.Run(fmt.Sprintf("%+v", o), func(t *testing.T) {
			a, b := net.Pipe()
			defer b.Close()
			if _, err := NewClient(a, o); err == nil {
				t.Error("NewClient accepted the options")
			}
			if err := Serve(t.Context(), b, echo, o); err == nil {
				t.Error("Serve accepted the options")
			}
		})
	}
}

func TestConnectionLossCancelsHandlers(t *testing.T) {
	leak.Check(t)
	const n = 10
	started := make(chan struct{}, n)
	ended := make(chan error, n)
	p := newPair(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
		started <- struct{}{}
		<-ctx.Done()
		ended <- ctx.Err()
		return &wire.Frame{Type: wire.TypeResponse}
	}, Options{}, Options{})
	if p.client.Err() != nil {
		t.Fatalf("Err() = %v on an open connection", p.client.Err())
	}
	select {
	case <-p.client.Done():
		t.Fatal("Done closed on an open connection")
	default:
	}

	called := make(chan error, n)
	for range n {
		go func() {
			_, err := p.client.Call(t.Context(), &wire.Frame{})
			called <- err
		}()
	}
	for range n {
		testwait.Recv(t, started)
	}
	p.client.Close()
	for range n {
		if err := testwait.Recv(t, ended); err != context.Canceled {
			t.Errorf("handler's ctx.Err() = %v, want context.Canceled", err)
		}
		if err := testwait.Recv(t, called); !errors.Is(err, ErrConnLost) || !errors.Is(err, ErrClosed) {
			t.Errorf("Call = %v, want ErrConnLost wrapping ErrClosed", err)
		}
	}
	err := testwait.Recv(t, p.served)
	if err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}
	p.served <- err // for the cleanup
}

// TestAnswerMeta checks that every answer keeps metadata of its own, in
// the room its caller gave when it fits, though the reader decodes all
// frames' metadata into one slice.
func TestAnswerMeta(t *testing.T) {
	leak.Check(t)
	p := newPair(t, echo, Options{}, Options{})
	metaOf := func(i int) []wire.Meta {
		m := make([]wire.Meta, i%4) // 0 to 3 pairs: into 2 pairs of room, or not
		for j := range m {
			m[j] = wire.Meta{Key: "k" + strconv.Itoa(j), Value: strconv.Itoa(i)}
		}
		return m
	}
	const calls = 200
	resps := make([]*wire.Frame, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			room := make([]wire.Meta, 0, 2)
			resp := &wire.Frame{Meta: room}
			answered, err := p.client.Do(t.Context(), &wire.Frame{Pattern: "role:echo", Meta: metaOf(i)}, resp)
			if !answered || err != nil {
				t.Errorf("call %d: %v, %v", i, answered, err)
				return
			}
			if n := len(resp.Meta); n > 0 && n <= cap(room) && &resp.Meta[0] != &room[:1][0] {
				t.Errorf("call %d: %d pairs of metadata not in the caller's room for 2", i, n)
			}
			resps[i] = resp
		})
	}
	wg.Wait()
	for i, resp := range resps { // after every answer came: none overwrote another's
		if resp == nil {
			continue
		}
		if diff := cmp.Diff(metaOf(i), resp.Meta, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("call %d: answer's meta (-want +got):\n%s", i, diff)
		}
	}
}
