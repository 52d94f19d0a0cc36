package transporttest

import (
	"context"
	"fmt"
	"io"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wizardmesh/wizard/runtime"
)

// BenchmarkStreams measures streams between two nodes of the transports
// newTransport makes, one connection between them: a server stream of
// 16-byte and 64 KiB messages (the handler sends as fast as the caller
// takes them; b.N messages per run), and a stream opened, one message
// each way, ended.
func BenchmarkStreams(b *testing.B, newTransport NewTransport) {
	srv := NewServer(b, newTransport(b, discard))
	for _, size := range []int{16, 64 << 10} {
		msg := wrapperspb.Bytes(make([]byte, size))
		MustAdd(b, srv, "role:bench,cmd:flood,size:"+itoa(size), runtime.NewStreamHandler(func(ctx context.Context, s *runtime.ServerStream[*i64, *wrapperspb.BytesValue]) error {
			n, err := s.Recv()
			if err != nil {
				return err
			}
			for range n.GetValue() {
				if err := s.Send(msg); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	MustAdd(b, srv, "role:bench,cmd:echo", runtime.NewStreamHandler(func(ctx context.Context, s *runtime.ServerStream[*i64, *i64]) error {
		v, err := s.Recv()
		if err != nil {
			return err
		}
		return s.Send(v)
	}))
	cl := NewClient(b, newTransport(b, discard), "role:bench,cmd:echo", nil, srv.Addr())
	for _, size := range []int{16, 64 << 10} {
		b.Run("server_"+sizeName(size), func(b *testing.B) {
			c := TypedClient[i64, wrapperspb.BytesValue](b, cl, "role:bench,cmd:flood,size:"+itoa(size))
			st, err := c.Stream(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			if err := st.Send(wrapperspb.Int64(int64(b.N))); err != nil {
				b.Fatal(err)
			}
			st.CloseSend()
			for range b.N {
				if _, err := st.Recv(); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := st.Recv(); err != io.EOF {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
	b.Run("open_echo_end", func(b *testing.B) {
		c := TypedClient[i64, i64](b, cl, "role:bench,cmd:echo")
		b.ReportAllocs()
		for b.Loop() {
			st, err := c.Stream(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			if err := st.Send(wrapperspb.Int64(1)); err != nil {
				b.Fatal(err)
			}
			if _, err := st.Recv(); err != nil {
				b.Fatal(err)
			}
			if _, err := st.Recv(); err != io.EOF {
				b.Fatal(err)
			}
			st.Close()
		}
	})
}

func itoa(n int) string { return fmt.Sprint(n) }

func sizeName(n int) string {
	if n >= 1<<10 {
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
