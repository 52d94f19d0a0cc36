package harness

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"runtime"
	"sync"
)

// The floor is the least a multiplexed call over one TCP connection can
// cost, written here so that nothing else hides in it: frames are a 4-byte
// length, an 8-byte request id and the payload (two float64s in, one out);
// the client's callers write their own frames, combining them when they
// meet (see [floorClient]), one reader goroutine hands each answer to its
// caller through a pending map; the server answers inline in its reader
// goroutine and flushes when its input is drained. No codec, no routing,
// no deadlines, no cancellation. floorwriter.go keeps the client it
// replaced, whose callers hand their frames to a writer goroutine, as an
// extra row that shows what that hand-off costs.
const (
	floorHeader   = 4 + 8
	floorRequest  = floorHeader + 16
	floorResponse = floorHeader + 8
)

var floorContender = Contender{
	Name:  floorName,
	Title: "raw TCP floor",
	Note: "written in the harness: length + request id + two float64s; on the client, callers write their own frames under a write lock " +
		"(a caller that finds no write in progress yields once, then writes what every caller appended meanwhile in one write; one that finds a write " +
		"in progress appends its frame for the writer to send next) " +
		"and one reader goroutine hands each answer to its caller; " +
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

// floorCall is one call waiting for its answer.
type floorCall struct{ r chan float64 }

// floorClient is the floor's client: the least work a simple client can
// do to multiplex calls over one connection. A caller appends its frame
// to the next write under a lock; if no write is in progress it becomes
// the writer: it yields once (runtime.Gosched), then writes everything
// appended so far in one write, then what others appended meanwhile,
// until nothing is left; otherwise it just waits for its answer. One
// reader goroutine reads the answers and hands each to its caller's
// channel.
//
// The yield is what makes the writes combine on few cores: the callers
// the reader wakes from one batch of answers are queued on the reader's
// core and run one after another, so without it each would find no write
// in progress and make a write system call of its own. Yielding lets them
// append their frames first; a lone caller's yield finds nothing else to
// run and costs little.
//
// Nothing simpler does less. A lock held across each caller's own write
// costs one write system call per call where this one combines the frames
// of every caller that arrives before the writer's yield ends or during a
// write; a writer
// goroutine fed through a channel (floorWriterClient) adds a goroutine
// hand-off and a wake-up per batch to the same writes. On the answer side
// a reader goroutine and one channel send per answer are the least that
// lets many callers wait on one connection: answers come in any order, so
// something must read them and wake the caller each belongs to. (Callers
// that take turns reading the connection themselves could skip that
// wake-up for a lone caller, at the price of a hand-over protocol between
// readers; that is no longer simple.)
type floorClient struct {
	floorConn

	// Guarded by mu, with floorConn's wait.
	next    uint64 // the last request id
	out     []byte // frames for the next write
	spare   []byte // the last write's buffer, reused for the one after
	writing bool   // a caller is writing: appended frames are its to send
}

func newFloorClient(nc net.Conn) *floorClient {
	c := &floorClient{out: make([]byte, 0, 64<<10)}
	c.floorConn.init(nc)
	go c.read()
	return c
}

func (c *floorClient) Call(ctx context.Context, a, b float64) (float64, error) {
	fc := c.pool.Get().(*floorCall)
	c.mu.Lock()
	c.next++
	id := c.next
	c.wait[id] = fc
	c.out = appendRequest(c.out, id, a, b)
	if !c.writing {
		c.writing = true
		c.mu.Unlock()
		runtime.Gosched() // let the callers already woken append their frames to this write
		c.mu.Lock()
		for len(c.out) > 0 {
			buf := c.out
			c.out = c.spare[:0]
			c.mu.Unlock()
			_, err := c.nc.Write(buf)
			c.mu.Lock()
			c.spare = buf
			if err != nil {
				c.writing = false
				c.mu.Unlock()
				c.Close()
				return 0, errClosed
			}
		}
		c.writing = false
	}
	c.mu.Unlock()
	return c.await(ctx, id, fc)
}

// appendRequest appends the request frame of call id to b.
func appendRequest(b []byte, id uint64, a, x float64) []byte {
	b = binary.BigEndian.AppendUint32(b, floorRequest-4)
	b = binary.BigEndian.AppendUint64(b, id)
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(a))
	return binary.BigEndian.AppendUint64(b, math.Float64bits(x))
}

// floorConn is what both floor clients share: the connection, the calls
// awaiting their answers, and the reader that hands each answer to its
// caller.
type floorConn struct {
	nc   net.Conn
	pool sync.Pool // of *floorCall

	mu   sync.Mutex
	wait map[uint64]*floorCall // calls awaiting their answer, by id

	done chan struct{}
	once sync.Once
}

func (c *floorConn) init(nc net.Conn) {
	c.nc, c.wait, c.done = nc, make(map[uint64]*floorCall, 1024), make(chan struct{})
	c.pool.New = func() any { return &floorCall{r: make(chan float64, 1)} }
}

// await waits for the answer to call id, whose floorCall is fc.
func (c *floorConn) await(ctx context.Context, id uint64, fc *floorCall) (float64, error) {
	select {
	case r := <-fc.r:
		c.pool.Put(fc)
		return r, nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.wait, id)
		c.mu.Unlock()
		return 0, ctx.Err()
	case <-c.done:
		return 0, errClosed
	}
}

// read hands each answer to the call awaiting it, until the connection
// ends or a frame is not an answer.
func (c *floorConn) read() {
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

func (c *floorConn) Close() error {
	c.once.Do(func() {
		close(c.done)
		c.nc.Close()
	})
	return nil
}
