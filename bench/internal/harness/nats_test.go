package harness

import (
	"context"
	"testing"
)

// TestNATSMicroAnswersAtOnce checks that the NATS micro server answers
// the first request of a client dialled the moment Serve returns: its
// subscription is at the broker by then (before, a first call could find
// no responders, as one smoke run did).
func TestNATSMicroAnswersAtOnce(t *testing.T) {
	add := func(_ context.Context, a, b float64) (float64, error) { return a + b, nil }
	for range 20 {
		srv, err := natsMicroContender.Serve("127.0.0.1:0", add, ServeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cl, err := natsMicroContender.Dial(t.Context(), srv.Addr(), DialOptions{})
		if err != nil {
			srv.Close()
			t.Fatal(err)
		}
		r, err := cl.Call(t.Context(), 1, 2)
		cl.Close()
		srv.Close()
		if err != nil || r != 3 {
			t.Fatalf("first call: %v, %v", r, err)
		}
	}
}
