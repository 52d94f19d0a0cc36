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
	Note: "written in the harness: length + request id + two float64s, one coalescing writer and one reader goroutine on the client, " +
		"the server answers inline in its reader (in the two-hop and cluster scenarios, where handlers wait, it runs each call in its own goroutine " +
		"and answers through one coalescing writer); no codec, routing, deadlines or cancellation",
	Hops:  true,
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
	l        net.Listener
	h        Handler
	blocking bool
	mu       sync.Mutex
	cs       map[net.Conn]struct{}
}

func serveFloor(listen string, h Handler, o ServeOptions) (Server, error) {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	s := &floorServer{l: l, h: h, blocking: o.Blocking, cs: map[net.Conn]struct{}{}}
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
			if s.blocking {
				s.serveConcurrent(nc)
			} else {
				s.serve(nc)
			}
			nc.Close()
			s.mu.Lock()
			delete(s.cs, nc)
			s.mu.Unlock()
		}()
	}
}

// readRequest reads one request frame into in and returns its id, a and b.
func readRequest(br *bufio.Reader, in *[floorRequest]byte) (id uint64, a, b float64, err error) {
	if _, err := io.ReadFull(br, in[:]); err != nil {
		return 0, 0, 0, err
	}
	if binary.BigEndian.Uint32(in[:4]) != floorRequest-4 {
		return 0, 0, 0, errors.New("harness: bad floor frame")
	}
	id = binary.BigEndian.Uint64(in[4:])
	a = math.Float64frombits(binary.BigEndian.Uint64(in[12:]))
	b = math.Float64frombits(binary.BigEndian.Uint64(in[20:]))
	return id, a, b, nil
}

func putResponse(out *[floorResponse]byte, id uint64, r float64) {
	binary.BigEndian.PutUint32(out[:4], floorResponse-4)
	binary.BigEndian.PutUint64(out[4:], id)
	binary.BigEndian.PutUint64(out[12:], math.Float64bits(r))
}

// serve answers each request inline in the reader and flushes when the
// input is drained: the least work there is, for handlers that never wait.
func (s *floorServer) serve(nc net.Conn) {
	br := bufio.NewReaderSize(nc, 64<<10)
	bw := bufio.NewWriterSize(nc, 64<<10)
	ctx := context.Background()
	var in [floorRequest]byte
	var out [floorResponse]byte
	for {
		id, a, b, err := readRequest(br, &in)
		if err != nil {
			return
		}
		r, err := s.h(ctx, a, b)
		if err != nil {
			return
		}
		putResponse(&out, id, r)
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

// serveConcurrent runs each request in its own goroutine and answers
// through one coalescing writer: the least a server whose handlers may
// wait (the two-hop roles) can do.
func (s *floorServer) serveConcurrent(nc net.Conn) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	queue := make(chan [floorResponse]byte, 4096)
	go writeQueue(nc, queue, func(f *[floorResponse]byte) []byte { return f[:] }, ctx.Done(), cancel)
	br := bufio.NewReaderSize(nc, 64<<10)
	var in [floorRequest]byte
	for {
		id, a, b, err := readRequest(br, &in)
		if err != nil {
			return
		}
		go func() {
			r, err := s.h(ctx, a, b)
			if err != nil {
				cancel()
				return
			}
			var out [floorResponse]byte
			putResponse(&out, id, r)
			select {
			case queue <- out:
			case <-ctx.Done():
			}
		}()
	}
}

// writeQueue writes the frames queued on q to nc, flushing when q is empty,
// until done is closed or a write fails (then it calls fail).
func writeQueue[F any](nc net.Conn, q chan F, bytes func(*F) []byte, done <-chan struct{}, fail func()) {
	bw := bufio.NewWriterSize(nc, 64<<10)
	for {
		select {
		case f := <-q:
			bw.Write(bytes(&f))
		case <-done:
			return
		}
	drain:
		for {
			select {
			case f := <-q:
				bw.Write(bytes(&f))
			default:
				break drain
			}
		}
		if err := bw.Flush(); err != nil {
			fail()
			return
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
	go writeQueue(nc, c.queue, func(f *[floorRequest]byte) []byte { return f[:] }, c.done, func() { c.Close() })
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
