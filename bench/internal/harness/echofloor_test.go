package harness

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// TestFloorEchoBatch checks the bytes one write of mixed frames sends:
// headers and small payloads copied, large payloads in place, in order.
func TestFloorEchoBatch(t *testing.T) {
	small := bytes.Repeat([]byte{1}, 100)
	large := bytes.Repeat([]byte{2}, floorEchoCopyMax+1)
	edge := bytes.Repeat([]byte{3}, floorEchoCopyMax)
	var want bytes.Buffer
	var b floorEchoBatch
	for i, p := range [][]byte{small, large, large, edge, small} {
		var h [floorEchoHeader]byte
		putEchoHeader(&h, uint64(i+1), len(p))
		want.Write(h[:])
		want.Write(p)
		b.add(uint64(i+1), p)
	}
	for round := range 2 { // the second round reuses the emptied batch
		a, c := net.Pipe()
		got := make(chan []byte)
		go func() {
			var buf bytes.Buffer
			buf.ReadFrom(c)
			got <- buf.Bytes()
		}()
		if err := b.writeTo(a); err != nil {
			t.Fatal(err)
		}
		a.Close()
		if g := <-got; !bytes.Equal(g, want.Bytes()) {
			t.Fatalf("round %d: wrote %d bytes, want %d (the same frames)", round, len(g), want.Len())
		}
		if !b.empty() || len(b.bufs) != 0 || b.mark != 0 {
			t.Fatalf("round %d: the batch is not empty after its write", round)
		}
		if round == 0 {
			for i, p := range [][]byte{small, large, large, edge, small} {
				b.add(uint64(i+1), p)
			}
		}
	}
}

// TestFloorEchoConcurrent echoes payloads of sizes on both sides of the
// copy bound from many callers at once through the floor's echo server.
func TestFloorEchoConcurrent(t *testing.T) {
	srv, err := floorEchoServe("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, name := range []string{floorName, "floor-writer"} {
		t.Run(name, func(t *testing.T) {
			c, err := echoers[name].dial(ctx, srv.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			sizes := []int{16, 1 << 10, floorEchoCopyMax, floorEchoCopyMax + 1, 256 << 10}
			var wg sync.WaitGroup
			errs := make(chan error, 32)
			for i := range 32 {
				wg.Go(func() {
					p := make([]byte, sizes[i%len(sizes)])
					for n := range 20 {
						for j := range p {
							p[j] = byte(i*31 + n + j)
						}
						r, err := c.Echo(ctx, p)
						if err != nil {
							errs <- err
							return
						}
						if !bytes.Equal(r, p) {
							errs <- fmt.Errorf("caller %d, call %d: the echo of %d bytes differs", i, n, len(p))
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
