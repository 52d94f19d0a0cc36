package harness

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"
)

// The streams floor: the least a server stream multiplexed over one TCP
// connection can do. Each message is one frame, its length and its
// stream's id ahead of the payload (the echo floor's framing): a stream
// of messages needs their boundaries and, with many streams on one
// connection, the stream each belongs to, and nothing else. The server's
// one writer goroutine goes round the streams and writes each frame into
// a 64 KiB buffered writer, flushing when it is full (a payload larger
// than the buffer goes out with its header in one writev, uncopied), so
// small frames share a system call by the thousand; there is no flow
// control, so no frame ever travels back and nothing ever waits but the
// socket; the client's one reader parses frames in place in a 64 KiB
// buffered reader and hands each payload to the counter without an
// allocation. Per-stream goroutines, locks, credit or allocation
// per message would each add work; dropping the id would no longer carry
// streams.
//
// The control frames, caller to server: id n with an 8-byte payload
// size starts n streams of size-byte messages; id floorStreamStop stops
// them. The server answers a stop with an empty frame of id
// floorStreamStop once its last message is written.
const floorStreamStop = math.MaxUint64

var floorStreamer = streamer{
	name:  floorName,
	title: "raw TCP floor",
	note: "written in the harness: a frame per message (4-byte length, 8-byte stream id, payload) over one net.Conn, the server's one writer " +
		"goroutine going round the streams through a 64 KiB bufio.Writer, no flow control (TCP's alone), the client's one reader " +
		"counting each payload in place",
	serve: func(listen string, src *streamSource) (Server, error) {
		l, err := net.Listen("tcp", listen)
		if err != nil {
			return nil, err
		}
		return serveConns(l, func(nc net.Conn) { serveFloorStreams(nc, src) }), nil
	},
	dial: func(ctx context.Context, addr string) (StreamClient, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return newFloorStreamClient(nc), nil
	},
}

// serveFloorStreams reads control frames and runs each start's streams
// until the stop.
func serveFloorStreams(nc net.Conn, src *streamSource) {
	br := bufio.NewReaderSize(nc, 4<<10)
	var h [floorEchoHeader]byte
	var p [8]byte
	for {
		n, size, err := readFloorControl(br, &h, &p)
		if err != nil || n == floorStreamStop {
			return
		}
		var stop atomic.Bool
		done := make(chan error, 1)
		go func() { done <- writeFloorStreams(nc, src, int(n), size, &stop) }()
		// The next control frame is the stop.
		m, _, err := readFloorControl(br, &h, &p)
		stop.Store(true)
		if werr := <-done; err != nil || werr != nil || m != floorStreamStop {
			return
		}
	}
}

// readFloorControl reads a control frame: its id and, for a start, the
// message size.
func readFloorControl(br *bufio.Reader, h *[floorEchoHeader]byte, p *[8]byte) (id uint64, size int, err error) {
	id, n, err := readEchoHeader(br, h)
	switch {
	case err != nil:
		return 0, 0, err
	case id == floorStreamStop && n == 0:
		return id, 0, nil
	case n != len(p) || id == 0 || id > 1<<16:
		return 0, 0, fmt.Errorf("harness: floor stream control frame: id %d, %d bytes", id, n)
	}
	if _, err := io.ReadFull(br, p[:]); err != nil {
		return 0, 0, err
	}
	return id, int(binary.BigEndian.Uint64(p[:])), nil
}

// writeFloorStreams writes n streams' messages, one of each in turn,
// until stop, then the stop frame.
func writeFloorStreams(nc net.Conn, src *streamSource, n, size int, stop *atomic.Bool) error {
	bw := bufio.NewWriterSize(nc, 64<<10)
	var h [floorEchoHeader]byte
	seq := make([]uint64, n)
	// serveMessages stamps p with its own count; each stream's message
	// is stamped again with that stream's.
	err := serveMessages(src, context.Background(), size, seq, func(seq []uint64, p []byte) error {
		if stop.Load() {
			return errClosed
		}
		for i := range seq {
			stampMessage(p, seq[i])
			seq[i]++
			putEchoHeader(&h, uint64(i), len(p))
			if err := writeEcho(bw, nc, &h, p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != errClosed {
		return err
	}
	putEchoHeader(&h, floorStreamStop, 0)
	bw.Write(h[:])
	return bw.Flush()
}

type floorStreamClient struct {
	nc net.Conn
	mu sync.Mutex // one run at a time
	// run is the current run's: the reader passes messages to got and
	// closes stopped at the stop frame.
	got     atomic.Pointer[func(int, []byte) error]
	stopped chan error
	// dead is closed when the reader has met readErr and returned.
	dead    chan struct{}
	readErr error
}

func newFloorStreamClient(nc net.Conn) *floorStreamClient {
	c := &floorStreamClient{nc: nc, stopped: make(chan error, 1), dead: make(chan struct{})}
	go c.read()
	return c
}

func (c *floorStreamClient) read() {
	defer close(c.dead)
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var h [floorEchoHeader]byte
	var buf []byte
	var failed error // the run's first error; the reader keeps reading
	for {
		id, n, err := readEchoHeader(br, &h)
		if err != nil {
			c.readErr = err
			return
		}
		if id == floorStreamStop {
			c.stopped <- failed
			failed = nil
			continue
		}
		// A payload within the reader's buffer is read in place; a larger
		// one into buf.
		var p []byte
		if n <= br.Size() {
			p, err = br.Peek(n)
		} else {
			if cap(buf) < n {
				buf = make([]byte, n)
			}
			p = buf[:n]
			_, err = io.ReadFull(br, p)
		}
		if err != nil {
			c.readErr = err
			return
		}
		if got := c.got.Load(); got != nil && failed == nil {
			failed = (*got)(int(id), p)
		}
		if n <= br.Size() {
			br.Discard(n)
		}
	}
}

func (c *floorStreamClient) Start(_ context.Context, n, size int, got func(int, []byte) error) (StreamRun, error) {
	if size == 0 {
		return nil, fmt.Errorf("harness: the floor has no idle streams")
	}
	c.mu.Lock()
	c.got.Store(&got)
	var f [floorEchoHeader + 8]byte
	putEchoHeader((*[floorEchoHeader]byte)(f[:]), uint64(n), 8)
	binary.BigEndian.PutUint64(f[floorEchoHeader:], uint64(size))
	if _, err := c.nc.Write(f[:]); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	return floorStreamRun{c}, nil
}

type floorStreamRun struct{ c *floorStreamClient }

func (r floorStreamRun) Stop() error {
	c := r.c
	defer c.mu.Unlock()
	var h [floorEchoHeader]byte
	putEchoHeader(&h, floorStreamStop, 0)
	if _, err := c.nc.Write(h[:]); err != nil {
		return err
	}
	defer c.got.Store(nil)
	select {
	case err := <-c.stopped:
		return err
	case <-c.dead:
		return fmt.Errorf("harness: floor stream connection: %w", c.readErr)
	}
}

func (c *floorStreamClient) Close() error { return c.nc.Close() }
