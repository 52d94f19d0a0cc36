package mux

import (
	"bufio"
	"context"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// The benchmarks run over loopback TCP. BenchmarkCall measures whole
// calls, client and server in one process; BenchmarkClient and
// BenchmarkServer put a hand-written peer that does not allocate at the
// other end, so that their allocs/op are one side's alone.

var (
	benchPayload  = []byte(`{"a":1,"b":2}`)
	benchResponse = []byte(`{"r":3}`)
)

func benchRequest() *wire.Frame {
	return &wire.Frame{Pattern: "cmd:sum,role:math", Codec: wire.CodecJSON, Payload: benchPayload}
}

func benchHandler(ctx context.Context, req *wire.Frame) *wire.Frame {
	return &wire.Frame{Type: wire.TypeResponse, Codec: wire.CodecJSON, Payload: benchResponse}
}

// runCalls runs the serial and parallel sub-benchmarks of calls through cl.
func runCalls(b *testing.B, cl *Client) {
	req := benchRequest()
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := cl.Call(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(64) // 64 callers per CPU share the connection
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := cl.Call(ctx, req); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkCall is a whole call over loopback TCP: client and server
// allocations together.
func BenchmarkCall(b *testing.B) {
	s := listen(b, benchHandler, Options{})
	runCalls(b, s.dial(b, Options{}))
}

// BenchmarkConns is calls over many connections to one server, one
// caller each (the shape of bench/'s -conns mode), with the server's
// connections sharing one watch over their inline serving ("shared", as
// a tcp listener's do) or each with its own ("own").
func BenchmarkConns(b *testing.B) {
	const conns = 64 // listen keeps the results of 100 connections
	for _, shared := range []bool{false, true} {
		name := "own"
		if shared {
			name = "shared"
		}
		b.Run(name, func(b *testing.B) {
			opts := Options{}
			if shared {
				opts.Watch = NewWatcher()
			}
			s := listen(b, benchHandler, opts)
			clients := make([]*Client, conns)
			for i := range clients {
				clients[i] = s.dial(b, Options{})
			}
			req := benchRequest()
			ctx := context.Background()
			var next atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(conns / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				cl := clients[(next.Add(1)-1)%conns]
				for pb.Next() {
					if _, err := cl.Call(ctx, req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkClient is the client side alone, against a server that does
// not allocate.
func BenchmarkClient(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		rawEchoServer(conn)
	}()
	b.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	cl, err := NewClient(conn, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cl.Close() })
	runCalls(b, cl)
}

// rawEchoServer answers every request with benchResponse, reusing its
// buffers, and flushes when it has read everything that came.
func rawEchoServer(conn net.Conn) {
	br := bufio.NewReaderSize(conn, 32<<10)
	bw := bufio.NewWriterSize(conn, 32<<10)
	if wire.ReadHandshake(br) != nil || wire.WriteHandshake(conn) != nil {
		return
	}
	var f wire.Frame
	var in, out []byte
	resp := wire.Frame{Type: wire.TypeResponse, Codec: wire.CodecJSON, Payload: benchResponse}
	for {
		var err error
		if in, err = wire.ReadFrame(br, 0, &f, in); err != nil {
			return
		}
		switch f.Type {
		case wire.TypeRequest:
			resp.ID = f.ID
			out = wire.AppendFrame(out[:0], &resp)
		case wire.TypePing:
			out = wire.AppendFrame(out[:0], &wire.Frame{Type: wire.TypePong, ID: f.ID})
		default:
			continue
		}
		bw.Write(out)
		if br.Buffered() == 0 && bw.Flush() != nil {
			return
		}
	}
}

// BenchmarkServer is the server side alone, driven by a client that does
// not allocate: serially, and pipelined with 128 requests in flight; then
// the same as the runtime's calls over a TCP listener come (suffix
// _deadline_share): each request with a deadline, the connection with its
// caller's share of the node's in-flight budget.
func BenchmarkServer(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchServer(b, Options{}, 0) })
	b.Run("deadline_share", func(b *testing.B) {
		benchServer(b, Options{Share: NewBudget(1024).Share()}, time.Hour)
	})
}

// benchServer is BenchmarkServer over a server with opts, its requests
// carrying deadline (0: none).
func benchServer(b *testing.B, opts Options, deadline time.Duration) {
	s := listen(b, benchHandler, opts)
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	br := bufio.NewReaderSize(conn, 32<<10)
	bw := bufio.NewWriterSize(conn, 32<<10)
	if err := wire.WriteHandshake(conn); err != nil {
		b.Fatal(err)
	}
	if err := wire.ReadHandshake(br); err != nil {
		b.Fatal(err)
	}
	req := benchRequest()
	req.Type = wire.TypeRequest
	req.Deadline = deadline
	var id uint64
	var out, in []byte
	var f wire.Frame
	send := func(flush bool) {
		id++
		req.ID = id
		out = wire.AppendFrame(out[:0], req)
		bw.Write(out)
		if flush {
			bw.Flush()
		}
	}
	// read reads up to the next response, answering pings.
	read := func() error {
		for {
			var err error
			if in, err = wire.ReadFrame(br, 0, &f, in); err != nil {
				return err
			}
			if f.Type == wire.TypeResponse {
				return nil
			}
		}
	}

	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			send(true)
			if err := read(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pipelined", func(b *testing.B) {
		const window = 128
		b.ReportAllocs()
		slots := make(chan struct{}, window) // a token per request in flight
		readErr := make(chan error, 1)
		go func() {
			// Read responses until the pong that ends the run.
			for {
				var err error
				if in, err = wire.ReadFrame(br, 0, &f, in); err != nil {
					readErr <- err
					return
				}
				switch f.Type {
				case wire.TypeResponse:
					<-slots
				case wire.TypePong:
					readErr <- nil
					return
				}
			}
		}()
		for b.Loop() {
			select {
			case slots <- struct{}{}:
			default: // the window is full: send what we have and wait
				bw.Flush()
				slots <- struct{}{}
			}
			send(false)
		}
		bw.Flush()
		for range window { // every response is in
			slots <- struct{}{}
		}
		bw.Write(wire.AppendFrame(nil, &wire.Frame{Type: wire.TypePing, ID: 1}))
		bw.Flush()
		if err := <-readErr; err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkFloor is the floor under the others: a hand-written client and
// server that do not allocate, one request at a time.
func BenchmarkFloor(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		rawEchoServer(conn)
	}()
	defer ln.Close()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	if wire.WriteHandshake(conn) != nil || wire.ReadHandshake(br) != nil {
		b.Fatal("handshake")
	}
	req := benchRequest()
	req.Type = wire.TypeRequest
	out := wire.AppendFrame(nil, req)
	var in []byte
	var f wire.Frame
	b.ReportAllocs()
	for b.Loop() {
		if _, err := conn.Write(out); err != nil {
			b.Fatal(err)
		}
		if in, err = wire.ReadFrame(br, 0, &f, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStream measures a server stream's messages over loopback TCP:
// the server sends as fast as flow control lets it, the client receives;
// one op is one message received.
func BenchmarkStream(b *testing.B) {
	for _, size := range []int{16, 64 << 10} {
		b.Run(strconv.Itoa(size)+"B", func(b *testing.B) {
			msg := make([]byte, size)
			sh := func(ctx context.Context, ss *ServerStream) error {
				for {
					if err := ss.Send(ctx, wire.CodecNone, msg); err != nil {
						return err
					}
				}
			}
			s := listen(b, benchHandler, Options{ServeStream: sh})
			cl := s.dial(b, Options{})
			ctx := context.Background()
			cs, err := cl.OpenStream(ctx, &wire.Frame{Pattern: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Cancel()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := cs.Recv(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
