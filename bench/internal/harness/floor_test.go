package harness

import (
	"context"
	"errors"
	"sync"
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
