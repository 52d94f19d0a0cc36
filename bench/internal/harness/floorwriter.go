package harness

import (
	"context"
	"net"
	"sync/atomic"
)

// floorWriterContender is the floor's first client, kept as an extra row:
// the same wire and server as the floor, but callers hand their frames to
// one writer goroutine through a channel, which coalesces what is queued
// into one write. Beside the floor it shows what that hand-off costs; it
// is no floor, and no ratio is taken against it.
var floorWriterContender = Contender{
	Name:  "floor-writer",
	Title: "raw TCP floor, writer goroutine (extra)",
	Extra: true,
	Note: "extra row, the floor's former client: the same wire and server as the raw TCP floor, but callers hand their frames to one " +
		"coalescing writer goroutine through a channel; beside the floor it shows what that hand-off costs",
	Serve: serveFloor,
	Dial: func(ctx context.Context, addr string, _ DialOptions) (Client, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return newFloorWriterClient(nc), nil
	},
}

// floorWriterClient is the floor's former client: one writer goroutine
// fed through a channel, one reader goroutine, a pending map.
type floorWriterClient struct {
	floorConn
	queue chan [floorRequest]byte
	next  atomic.Uint64
}

func newFloorWriterClient(nc net.Conn) *floorWriterClient {
	c := &floorWriterClient{queue: make(chan [floorRequest]byte, 4096)}
	c.floorConn.init(nc)
	go writeQueue(nc, c.queue, func(f *[floorRequest]byte) []byte { return f[:] }, c.done, func() { c.Close() })
	go c.read()
	return c
}

func (c *floorWriterClient) Call(ctx context.Context, a, b float64) (float64, error) {
	fc := c.pool.Get().(*floorCall)
	id := c.next.Add(1)
	var f [floorRequest]byte
	appendRequest(f[:0], id, a, b)
	c.mu.Lock()
	c.wait[id] = fc
	c.mu.Unlock()
	select {
	case c.queue <- f:
	case <-c.done:
		return 0, errClosed
	}
	return c.await(ctx, id, fc)
}
