package harness

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"
)

// The floor is the least a multiplexed call over one TCP connection can
// cost, written here so that nothing else hides in it: frames are a 4-byte
// length, an 8-byte request id and the payload (two float64s in, one out);
// the client runs one writer goroutine that coalesces queued frames into
// one write, one reader goroutine and a mutex-guarded pending map; the
// server answers inline in its reader goroutine and flushes when its input
// is drained. No codec, no routing, no deadlines, no cancellation.
const (
	floorHeader   = 4 + 8
	floorRequest  = floorHeader + 16
	floorResponse = floorHeader + 8
)

var floorContender = Contender{
	Name:  floorName,
	Title: "raw TCP floor",
	Note:  "written in the harness: length + request id + two float64s, one coalescing writer and one reader goroutine on the client, the server answers inline in its reader; no codec, routing, deadlines or cancellation",
	Serve: serveFloor,
	Dial: func(ctx context.Context, addr string, _ DialOptions) (Client, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return newFloorClient(nc), nil
	},
}

var errClosed = errors.New("harness: connection closed")

type floorServer struct {
	l  net.Listener
	h  Handler
	mu sync.Mutex
	cs map[net.Conn]struct{}
}

func serveFloor(listen string, h Handler) (Server, error) {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	s := &floorServer{l: l, h: h, cs: map[net.Conn]struct{}{}}
	go s.accept()
	return s, nil
}

func (s *floorServer) Addr() string { return s.l.Addr().String() }

func (s *floorServer) Close() error {
	err := s.l.Close()
	s.mu.Lock()
	for c := range s.cs {
		c.Close()
	}
	s.mu.Unlock()
	return err
}

func (s *floorServer) accept() {
	for {
		nc, err := s.l.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.cs[nc] = struct{}{}
		s.mu.Unlock()
		go func() {
			s.serve(nc)
			nc.Close()
			s.mu.Lock()
			delete(s.cs, nc)
			s.mu.Unlock()
		}()
	}
}

func (s *floorServer) serve(nc net.Conn) {
	br := bufio.NewReaderSize(nc, 64<<10)
	bw := bufio.NewWriterSize(nc, 64<<10)
	ctx := context.Background()
	var in [floorRequest]byte
	var out [floorResponse]byte
	for {
		if _, err := io.ReadFull(br, in[:]); err != nil {
			return
		}
		if binary.BigEndian.Uint32(in[:4]) != floorRequest-4 {
			return
		}
		a := math.Float64frombits(binary.BigEndian.Uint64(in[12:]))
		b := math.Float64frombits(binary.BigEndian.Uint64(in[20:]))
		r, err := s.h(ctx, a, b)
		if err != nil {
			return
		}
		binary.BigEndian.PutUint32(out[:4], floorResponse-4)
		copy(out[4:12], in[4:12])
		binary.BigEndian.PutUint64(out[12:], math.Float64bits(r))
		if _, err := bw.Write(out[:]); err != nil {
			return
		}
		if br.Buffered() < floorRequest {
			if err := bw.Flush(); err != nil {
				return
			}
		}
	}
}

type floorCall struct{ r chan float64 }

type floorClient struct {
	nc    net.Conn
	queue chan [floorRequest]byte
	next  atomic.Uint64
	mu    sync.Mutex
	wait  map[uint64]*floorCall
	pool  sync.Pool
	done  chan struct{}
	once  sync.Once
}

func newFloorClient(nc net.Conn) *floorClient {
	c := &floorClient{
		nc:    nc,
		queue: make(chan [floorRequest]byte, 4096),
		wait:  make(map[uint64]*floorCall, 1024),
		done:  make(chan struct{}),
	}
	c.pool.New = func() any { return &floorCall{r: make(chan float64, 1)} }
	go c.write()
	go c.read()
	return c
}

func (c *floorClient) Call(ctx context.Context, a, b float64) (float64, error) {
	fc := c.pool.Get().(*floorCall)
	id := c.next.Add(1)
	var f [floorRequest]byte
	binary.BigEndian.PutUint32(f[:4], floorRequest-4)
	binary.BigEndian.PutUint64(f[4:], id)
	binary.BigEndian.PutUint64(f[12:], math.Float64bits(a))
	binary.BigEndian.PutUint64(f[20:], math.Float64bits(b))
	c.mu.Lock()
	c.wait[id] = fc
	c.mu.Unlock()
	select {
	case c.queue <- f:
	case <-c.done:
		return 0, errClosed
	}
	select {
	case r := <-fc.r:
		c.pool.Put(fc)
		return r, nil
	case <-ctx.Done():
		c.forget(id)
		return 0, ctx.Err()
	case <-c.done:
		return 0, errClosed
	}
}

func (c *floorClient) forget(id uint64) {
	c.mu.Lock()
	delete(c.wait, id)
	c.mu.Unlock()
}

func (c *floorClient) write() {
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	for {
		select {
		case f := <-c.queue:
			bw.Write(f[:])
		case <-c.done:
			return
		}
	drain:
		for {
			select {
			case f := <-c.queue:
				bw.Write(f[:])
			default:
				break drain
			}
		}
		if err := bw.Flush(); err != nil {
			c.Close()
			return
		}
	}
}

func (c *floorClient) read() {
	defer c.Close()
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var in [floorResponse]byte
	for {
		if _, err := io.ReadFull(br, in[:]); err != nil {
			return
		}
		if binary.BigEndian.Uint32(in[:4]) != floorResponse-4 {
			return
		}
		id := binary.BigEndian.Uint64(in[4:])
		c.mu.Lock()
		fc := c.wait[id]
		delete(c.wait, id)
		c.mu.Unlock()
		if fc != nil {
			fc.r <- math.Float64frombits(binary.BigEndian.Uint64(in[12:]))
		}
	}
}

func (c *floorClient) Close() error {
	c.once.Do(func() {
		close(c.done)
		c.nc.Close()
	})
	return nil
}
