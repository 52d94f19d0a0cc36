package harness

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestFloorClients calls the floor's server from many goroutines through
// each floor client, so that callers meet at the write lock and their
// frames go out combined, and checks every answer.
func TestFloorClients(t *testing.T) {
	add := func(_ context.Context, a, b float64) (float64, error) { return a + b, nil }
	for _, c := range []Contender{floorContender, floorWriterContender} {
		t.Run(c.Name, func(t *testing.T) {
			srv, err := c.Serve("127.0.0.1:0", add, ServeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			cl, err := c.Dial(t.Context(), srv.Addr(), DialOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			const callers, calls = 64, 200
			var wg sync.WaitGroup
			errs := make(chan error, callers)
			for g := range callers {
				wg.Go(func() {
					for i := range calls {
						r, err := cl.Call(t.Context(), float64(g), float64(i))
						if err != nil {
							errs <- err
							return
						}
						if r != float64(g+i) {
							errs <- errors.New("wrong answer")
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// TestFloorClientClosed checks that a call on a closed floor client fails
// rather than waits, and that a call whose server went away does too.
func TestFloorClientClosed(t *testing.T) {
	add := func(_ context.Context, a, b float64) (float64, error) { return a + b, nil }
	srv, err := serveFloor("127.0.0.1:0", add, ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := floorContender.Dial(t.Context(), srv.Addr(), DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := cl.Call(t.Context(), 1, 2); err != nil || r != 3 {
		t.Fatalf("1 + 2: %v, %v", r, err)
	}
	srv.Close() // closes the server's end: the client's reader sees it and closes the client
	if _, err := cl.Call(t.Context(), 1, 2); err == nil {
		t.Error("a call whose server went away succeeded")
	}
	cl.Close()
	if _, err := cl.Call(t.Context(), 1, 2); err == nil {
		t.Error("a call on a closed client succeeded")
	}
}

// BenchmarkFloorClients measures the floor's client beside its former
// one (a writer goroutine fed through a channel) against the same server
// in this process, at 1 to 1,024 callers. Besides ns/op it reports the
// process's CPU time per call (cpu-ns/call: both clients' server is the
// same code, so the difference is the client's), which moves much less
// than wall-clock rates on a shared machine (though not at 1 caller,
// where the scheduler's spinning while the lone caller waits counts as
// well). go test runs each sub-benchmark's -count rounds in a row, not
// in turns, so compare rounds with care:
//
//	go test -run '^$' -bench FloorClients -benchtime 100000x -count 5 ./internal/harness
func BenchmarkFloorClients(b *testing.B) {
	add := func(_ context.Context, a, x float64) (float64, error) { return a + x, nil }
	for _, callers := range []int{1, 16, 128, 1024} {
		for _, c := range []Contender{floorContender, floorWriterContender} {
			b.Run(fmt.Sprintf("callers=%d/%s", callers, c.Name), func(b *testing.B) {
				srv, err := c.Serve("127.0.0.1:0", add, ServeOptions{})
				if err != nil {
					b.Fatal(err)
				}
				defer srv.Close()
				cl, err := c.Dial(b.Context(), srv.Addr(), DialOptions{})
				if err != nil {
					b.Fatal(err)
				}
				defer cl.Close()
				var next atomic.Int64
				var wg sync.WaitGroup
				cpu := selfCPU()
				b.ResetTimer()
				for range callers {
					wg.Go(func() {
						for next.Add(1) <= int64(b.N) {
							if _, err := cl.Call(b.Context(), 1, 2); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(selfCPU()-cpu)/float64(b.N), "cpu-ns/call")
			})
		}
	}
}
