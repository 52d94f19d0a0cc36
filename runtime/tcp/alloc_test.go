//go:build !race

package tcp_test

import (
	"context"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpb"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
)

// TestRemoteCallAllocs bounds the allocations of a typed remote call,
// client and server in this process (as BenchmarkRemoteCall's
// serial_deadline): the server's message, buffer and answer frame are a
// pooled room beside the mux's record of the request (bridge.WithRoom),
// and the client's answer record is pooled (Conn.ReleaseReply): 5
// allocations a call in serial_deadline (6 before those pools).
func TestRemoteCallAllocs(t *testing.T) {
	srv := newServer(t)
	if err := testpb.RegisterMathServiceHandler(srv, transporttest.MathService{}); err != nil {
		t.Fatal(err)
	}
	c := transporttest.MathClient(t, newClient(t, testpb.MathServiceSumPattern, srv.Addr()))
	req := &testpb.SumRequest{Values: []float64{1, 2}}
	ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
	defer cancel()
	const most = 5 // AllocsPerRun averages: a pool emptied by a collection now and then does not show
	if a := testing.AllocsPerRun(1000, func() {
		if res, err := c.Sum(ctx, req); err != nil || res.GetSum() != 3 {
			t.Fatal(res, err)
		}
	}); a > most {
		t.Errorf("a remote call allocates %v times, want at most %d", a, most)
	}
}
