package wizotel_test

import (
	"context"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// TestCallsInFlight: a call whose handler is running counts as one in
// flight on the calling and the serving side, and none once it is over;
// the calls in flight are observed while any node instrumented with
// them is open (two nodes share one Instrument here: closing one leaves
// the other's counted), and no longer once the last has closed.
func TestCallsInFlight(t *testing.T) {
	tm := newTelemetry(t)
	opt := tm.option()
	n := newNode(t, opt)
	other := newNode(t, opt)
	entered, release := make(chan struct{}), make(chan struct{})
	if err := n.Add("role:slow", func(ctx context.Context, r runtime.Request) (any, error) {
		entered <- struct{}{}
		<-release
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	clientKey := semconv.RPCMethodKey.String("_OTHER") // an untyped call's, before it is matched
	serverKey := semconv.RPCMethodKey.String("role:slow")
	inFlight := func(t *testing.T) (cl, srv int64, ok bool) {
		t.Helper()
		rm := tm.collect(t)
		cl, okc := sum(rm, "wizard.client.calls.active", clientKey)
		srv, oks := sum(rm, "wizard.server.calls.active", serverKey)
		return cl, srv, okc && oks
	}
	call := func(t *testing.T) {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			_, err := n.ActE(callCtx(t), "role:slow", nil)
			done <- err
		}()
		<-entered
		if cl, srv, ok := inFlight(t); !ok || cl != 1 || srv != 1 {
			t.Errorf("in flight during the call: client %d, server %d (observed %v); want 1 and 1", cl, srv, ok)
		}
		release <- struct{}{}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if cl, srv, ok := inFlight(t); !ok || cl != 0 || srv != 0 {
			t.Errorf("in flight after the call: client %d, server %d (observed %v); want 0 and 0", cl, srv, ok)
		}
	}
	t.Run("two nodes", call)
	other.Close()
	t.Run("one closed", call)
	n.Close()
	if cl, srv, ok := inFlight(t); ok {
		t.Errorf("in flight observed after both nodes closed: client %d, server %d", cl, srv)
	}
}
