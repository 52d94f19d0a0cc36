package quic_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testpki"
)

// BenchmarkRemoteCall is a typed call (wrapperspb in and out) through a
// generic client over loopback QUIC: one connection with the default
// streams, client and server nodes in this process.
func BenchmarkRemoteCall(b *testing.B) {
	tr := transport(testpki.New(b))
	srv := newServer(b, tr, "")
	mustAdd(b, srv, "role:math,cmd:neg", neg)
	cl := newClient(b, tr, "role:math,cmd:neg", srv.Addr())
	c := runtime.NewClient[wrapperspb.Int64Value, wrapperspb.Int64Value](cl, "role:math,cmd:neg")
	req := wrapperspb.Int64(7)
	call := func(ctx context.Context) {
		res, err := c.Call(ctx, req)
		if err != nil || res.GetValue() != -7 {
			b.Fatal(res, err)
		}
	}

	// The caller's ctx has no deadline: the default timeout applies.
	b.Run("serial", func(b *testing.B) {
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			call(ctx)
		}
	})
	// The caller's ctx has a deadline: it travels as is.
	b.Run("serial_deadline", func(b *testing.B) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		b.ReportAllocs()
		for b.Loop() {
			call(ctx)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				call(ctx)
			}
		})
	})
	// Many callers per CPU, as a busy service sees them.
	b.Run("parallel_x64", func(b *testing.B) {
		b.SetParallelism(64)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				call(ctx)
			}
		})
	})
}
