package transporttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

// The stream scenarios: each kind, typed and untyped; order over many
// messages; headers, trailers and metadata; errors and cancellation from
// either side; deadlines; a receiver that stops reading; many streams on
// one connection; a shutdown that drains streams, then ends them. A
// transport without streams (its Conn is no stream opener) skips them.

type i64 = wrapperspb.Int64Value

// counter serves a server stream: the request's value n, then n messages
// 0..n-1.
var counter = runtime.NewStreamHandler(func(ctx context.Context, s *runtime.ServerStream[*i64, *i64]) error {
	req, err := s.Recv()
	if err != nil {
		return err
	}
	for i := range req.GetValue() {
		if err := s.Send(wrapperspb.Int64(i)); err != nil {
			return err
		}
	}
	return nil
})

// summer serves a client stream: the sum of what the caller sends.
var summer = runtime.NewStreamHandler(func(ctx context.Context, s *runtime.ServerStream[*i64, *i64]) error {
	var sum int64
	for {
		v, err := s.Recv()
		if err == io.EOF {
			return s.Send(wrapperspb.Int64(sum))
		}
		if err != nil {
			return err
		}
		sum += v.GetValue()
	}
})

// echo serves a bidirectional stream with maps: each message back, its
// "n" doubled; the caller's metadata "who" back as a header, a trailer
// with the count.
var echo = runtime.NewStreamHandler(func(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error {
	if err := s.SendHeader("who", runtime.IncomingMetadata(ctx).Get("who")); err != nil {
		return err
	}
	n := 0
	for {
		r, err := s.Recv()
		if err == io.EOF {
			s.SetTrailer("count", fmt.Sprint(n))
			return nil
		}
		if err != nil {
			return err
		}
		n++
		if err := s.Send(map[string]any{"n": r.Get("n").(float64) * 2}); err != nil {
			return err
		}
	}
})

func (s suite) streams(t *testing.T) {
	srv := NewServer(t, s.tr(t))
	MustAdd(t, srv, "role:stream,cmd:count", counter)
	MustAdd(t, srv, "role:stream,cmd:sum", summer)
	MustAdd(t, srv, "role:stream,cmd:echo", echo)
	MustAdd(t, srv, "role:stream,cmd:unary", neg)
	cl := NewClient(t, s.tr(t), "role:stream,cmd:unary", nil, srv.Addr())
	WaitRoutable(t, cl, "role:stream,cmd:count")
	count := TypedClient[i64, i64](t, cl, "role:stream,cmd:count")
	if st, err := count.Stream(t.Context()); err != nil {
		skipNoStreams(t, err)
	} else {
		st.Close()
	}

	for _, where := range []struct {
		name string
		n    *runtime.Node
	}{{"remote", cl}, {"in-process", srv}} {
		t.Run(where.name, func(t *testing.T) {
			n := where.n
			t.Run("server stream in order", func(t *testing.T) {
				const total = 10000
				st := openTyped(t, n, "role:stream,cmd:count")
				defer st.Close()
				if err := st.Send(wrapperspb.Int64(total)); err != nil {
					t.Fatal(err)
				}
				if err := st.CloseSend(); err != nil {
					t.Fatal(err)
				}
				for i := range int64(total) {
					v, err := st.Recv()
					if err != nil {
						t.Fatalf("message %d: %v", i, err)
					}
					if v.GetValue() != i {
						t.Fatalf("message %d is %d", i, v.GetValue())
					}
				}
				if _, err := st.Recv(); err != io.EOF {
					t.Fatalf("after the last message: %v, want io.EOF", err)
				}
			})
			t.Run("client stream", func(t *testing.T) {
				st := openTyped(t, n, "role:stream,cmd:sum")
				defer st.Close()
				var want int64
				for i := range int64(1000) {
					want += i
					if err := st.Send(wrapperspb.Int64(i)); err != nil {
						t.Fatal(err)
					}
				}
				if err := st.CloseSend(); err != nil {
					t.Fatal(err)
				}
				v, err := st.Recv()
				if err != nil || v.GetValue() != want {
					t.Fatalf("sum = %v, %v; want %d", v, err, want)
				}
				if _, err := st.Recv(); err != io.EOF {
					t.Fatalf("after the answer: %v, want io.EOF", err)
				}
			})
			t.Run("bidi untyped with headers and trailers", func(t *testing.T) {
				ctx := runtime.AppendMetadata(t.Context(), "who", "tester")
				st, err := n.OpenStream(ctx, "role:stream,cmd:echo")
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				md, err := st.Header()
				if err != nil || md.Get("who") != "tester" {
					t.Fatalf("header %v, %v", md, err)
				}
				for i := range 100 {
					if err := st.Send(map[string]any{"n": i}); err != nil {
						t.Fatal(err)
					}
					res, err := st.Recv()
					if err != nil {
						t.Fatal(err)
					}
					var out struct{ N float64 }
					if err := res.Decode(&out); err != nil || out.N != float64(2*i) {
						t.Fatalf("echo %d = %+v, %v", i, out, err)
					}
				}
				st.CloseSend()
				if _, err := st.Recv(); err != io.EOF {
					t.Fatalf("end: %v", err)
				}
				if got := st.Trailer().Get("count"); got != "100" {
					t.Fatalf("trailer count = %q", got)
				}
			})
			t.Run("stream to a unary handler", func(t *testing.T) {
				_, err := openAndRecv(t, n, "role:stream,cmd:unary")
				WantCode(t, err, runtime.CodeUnimplemented)
			})
			t.Run("call to a stream handler", func(t *testing.T) {
				_, err := n.Act(t.Context(), "role:stream,cmd:count", map[string]any{})
				WantCode(t, err, runtime.CodeUnimplemented)
			})
		})
	}
}

// streamEnds: errors, cancellation and deadlines reach the other side.
func (s suite) streamEnds(t *testing.T) {
	srv := NewServer(t, s.tr(t))
	handlerEnd := make(chan error, 4)
	MustAdd(t, srv, "role:stream,cmd:fail", runtime.NewStreamHandler(func(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error {
		for i := range 3 {
			if err := s.Send(map[string]any{"i": i}); err != nil {
				return err
			}
		}
		s.SetTrailer("why", "out of luck")
		return runtime.Errorf(runtime.CodeFailedPrecondition, "no more")
	}))
	MustAdd(t, srv, "role:stream,cmd:wait", runtime.NewStreamHandler(func(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error {
		if err := s.Send(map[string]any{"started": true}); err != nil {
			return err
		}
		_, err := s.Recv() // blocks: the caller sends nothing
		if ctx.Err() == nil {
			handlerEnd <- fmt.Errorf("recv: %w", err)
		} else {
			handlerEnd <- ctx.Err()
		}
		return err
	}))
	cl := NewClient(t, s.tr(t), "role:stream,cmd:fail", nil, srv.Addr())
	WaitRoutable(t, cl, "role:stream,cmd:wait")
	if _, err := openAndRecv(t, cl, "role:stream,cmd:wait"); err != nil {
		skipNoStreams(t, err)
	}
	testwait.Recv(t, handlerEnd) // the probe's

	t.Run("server error mid-stream", func(t *testing.T) {
		st, err := cl.OpenStream(t.Context(), "role:stream,cmd:fail")
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		for i := range 3 {
			if _, err := st.Recv(); err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
		}
		_, err = st.Recv()
		WantCode(t, err, runtime.CodeFailedPrecondition)
		if !strings.Contains(err.Error(), "no more") {
			t.Fatalf("error %v lost its message", err)
		}
		if got := st.Trailer().Get("why"); got != "out of luck" {
			t.Fatalf("trailer why = %q", got)
		}
	})
	t.Run("caller cancels", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		st, err := cl.OpenStream(ctx, "role:stream,cmd:wait")
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := testwait.Recv(t, handlerEnd); !errors.Is(err, context.Canceled) {
			t.Fatalf("the handler's ctx ended with %v, want canceled", err)
		}
		_, err = st.Recv()
		WantCode(t, err, runtime.CodeCanceled)
	})
	t.Run("Close cancels", func(t *testing.T) {
		st, err := cl.OpenStream(t.Context(), "role:stream,cmd:wait")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		st.Close()
		if err := testwait.Recv(t, handlerEnd); !errors.Is(err, context.Canceled) {
			t.Fatalf("the handler's ctx ended with %v, want canceled", err)
		}
	})
	t.Run("deadline mid-stream", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		st, err := cl.OpenStream(ctx, "role:stream,cmd:wait")
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		_, err = st.Recv()
		WantCode(t, err, runtime.CodeDeadlineExceeded)
		if err := testwait.Recv(t, handlerEnd); !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			t.Fatalf("the handler's ctx ended with %v, want its deadline", err)
		}
	})
}

// streamSlowReader: a caller that stops reading blocks the handler's
// Send, which gets no further than the stream's window (256 KiB over
// the mux) and a few messages.
func (s suite) streamSlowReader(t *testing.T) {
	const size, window = 1024, 256 << 10
	const bound = (window+4*size)/size + 16 // the window, a message in each hand, an in-process queue
	srv := NewServer(t, s.tr(t))
	var sent atomic.Int64
	MustAdd(t, srv, "role:stream,cmd:flood", runtime.NewStreamHandler(func(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error {
		msg := map[string]any{"pad": strings.Repeat("x", size-16)}
		for range 100000 {
			if err := s.Send(msg); err != nil {
				return err
			}
			sent.Add(1)
		}
		return nil
	}))
	cl := NewClient(t, s.tr(t), "role:stream,cmd:flood", nil, srv.Addr())
	for _, where := range []struct {
		name string
		n    *runtime.Node
	}{{"remote", cl}, {"in-process", srv}} {
		t.Run(where.name, func(t *testing.T) {
			sent.Store(0)
			st, err := where.n.OpenStream(t.Context(), "role:stream,cmd:flood")
			if err != nil {
				skipNoStreams(t, err)
				t.Fatal(err)
			}
			defer st.Close()
			if _, err := st.Recv(); err != nil { // the stream is open; no more is read
				t.Fatal(err)
			}
			testwait.Until(t, "the handler sending", func() bool { return sent.Load() >= 8 })
			if testwait.Poll(time.Second, func() bool { return sent.Load() > bound }) {
				t.Fatalf("the handler sent %d messages of %d bytes to a caller that reads none: more than %d", sent.Load(), size, bound)
			}
			t.Logf("a caller that stopped reading let the handler send %d messages of %d bytes (bound %d)", sent.Load(), size, bound)
		})
	}
}

// streamMany: 1,000 streams at once between two nodes.
func (s suite) streamMany(t *testing.T) {
	srv := NewServer(t, s.tr(t))
	MustAdd(t, srv, "role:stream,cmd:count", counter)
	cl := NewClient(t, s.tr(t), "role:stream,cmd:count", nil, srv.Addr())
	const streams = 1000
	var opened []*runtime.ClientStream[*i64, *i64]
	for range streams {
		st, err := TypedClient[i64, i64](t, cl, "role:stream,cmd:count").Stream(t.Context())
		if err != nil {
			skipNoStreams(t, err)
			t.Fatal(err)
		}
		opened = append(opened, st)
		if err := st.Send(wrapperspb.Int64(3)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for _, st := range opened {
		wg.Go(func() {
			defer st.Close()
			st.CloseSend()
			for i := range int64(3) {
				v, err := st.Recv()
				if err != nil || v.GetValue() != i {
					errs <- fmt.Errorf("message %d: %v, %v", i, v, err)
					return
				}
			}
			if _, err := st.Recv(); err != io.EOF {
				errs <- fmt.Errorf("end: %v", err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// streamShutdown: a shutdown lets an open stream finish within its
// grace, and ends one still open after it with unavailable.
func (s suite) streamShutdown(t *testing.T) {
	srv := NewServer(t, s.tr(t))
	release := make(chan struct{})
	MustAdd(t, srv, "role:stream,cmd:hold", runtime.NewStreamHandler(func(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error {
		if err := s.Send(map[string]any{"open": true}); err != nil {
			return err
		}
		select {
		case <-release:
			return s.Send(map[string]any{"done": true})
		case <-ctx.Done():
			return ctx.Err()
		}
	}))
	cl := NewClient(t, s.tr(t), "role:stream,cmd:hold", nil, srv.Addr())
	st, err := cl.OpenStream(t.Context(), "role:stream,cmd:hold")
	if err != nil {
		skipNoStreams(t, err)
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	local, err := srv.OpenStream(t.Context(), "role:stream,cmd:hold")
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	if _, err := local.Recv(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(ctx) }()
	// Neither stream ends while the grace lasts: the handlers hold them.
	if err := testwait.Recv(t, done); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want its grace to end", err)
	}
	for _, c := range []*runtime.ClientStream[any, runtime.Result]{st, local} {
		_, err := c.Recv()
		if code := runtime.CodeOf(err); code != runtime.CodeUnavailable {
			t.Fatalf("a stream open past the shutdown's grace ended with %v (%v), want unavailable", code, err)
		}
	}
	close(release)
}

func openTyped(t testing.TB, n *runtime.Node, pattern string) *runtime.ClientStream[*i64, *i64] {
	t.Helper()
	st, err := TypedClient[i64, i64](t, n, pattern).Stream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// openAndRecv opens an untyped stream, closes its send side and returns
// its first message or its end.
func openAndRecv(t testing.TB, n *runtime.Node, pattern string) (runtime.Result, error) {
	t.Helper()
	st, err := n.OpenStream(t.Context(), pattern)
	if err != nil {
		return runtime.Result{}, err
	}
	defer st.Close()
	st.CloseSend()
	return st.Recv()
}

// skipNoStreams skips the scenario when err says the transport carries
// no streams (its Conn opens none).
func skipNoStreams(t testing.TB, err error) {
	t.Helper()
	if runtime.CodeOf(err) == runtime.CodeUnimplemented && strings.Contains(err.Error(), "carries no streams") {
		t.Skipf("the transport carries no streams: %v", err)
	}
}
