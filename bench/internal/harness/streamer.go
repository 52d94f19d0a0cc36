package harness

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// The streams mode: every contender serves one server-streaming method.
// The caller opens a stream asking for messages of a size; the server
// sends stamped messages of that size as fast as the contender's flow
// control lets it, until the caller ends the stream; the caller receives
// and counts. A stream asking for size 0 is idle: the server takes the
// request and waits for the end without sending, so that the idle mode
// can measure what an open stream costs each side.

// RoleStream is the role of a server process that serves streams.
const RoleStream = "stream"

// StreamClient opens server streams over one connection to a contender's
// server.
type StreamClient interface {
	// Start opens n streams, each asking for messages of size bytes (0:
	// idle streams), and passes every message stream i receives to
	// got(i, payload), from one goroutine per stream (or one for all);
	// the payload is only valid during the call. It returns once every
	// stream is open.
	Start(ctx context.Context, n, size int, got func(i int, p []byte) error) (StreamRun, error)
	Close() error
}

// StreamRun is the streams of one [StreamClient.Start].
type StreamRun interface {
	// Stop ends the streams and returns once they are over, with the
	// first error a stream met before Stop: an error of got, or a stream
	// that ended early. A contender without flow control (NATS core) may
	// still pass a message to got meanwhile; the run's counts are read
	// before Stop.
	Stop() error
}

// streamer is a contender of the streams mode.
type streamer struct {
	name, title string
	// note says what carries the messages.
	note string
	// lossy says the contender may drop messages (no flow control): a
	// gap in a stream's stamps counts as lost, not as an error.
	lossy bool
	// idle says the contender takes part in the idle mode.
	idle  bool
	serve func(listen string, src *streamSource) (Server, error)
	dial  func(ctx context.Context, addr string) (StreamClient, error)
}

// streamers is the streams mode's table of contenders, in table order.
var streamers = []streamer{
	wizardStreamer("wizard-tcp", "wizard TCP", "runtime + runtime/tcp: runtime.NewStreamHandler of a typed ServerStream (google.protobuf.UInt64Value request, "+
		"google.protobuf.BytesValue messages, a new one per Send), opened through the typed client's Stream (runtime.NewClient) over one node, "+
		"the mux's default stream window", newTCP),
	grpcStreamer,
	connectStreamer,
	natsStreamer,
	floorStreamer,
}

// streamerOf returns the streams-mode contender called name.
func streamerOf(name string) (streamer, error) {
	for _, s := range streamers {
		if s.name == name {
			return s, nil
		}
	}
	return streamer{}, fmt.Errorf("contender %q has no streams (have %s)", name, streamerNames())
}

func streamerNames() string {
	var b []byte
	for i, s := range streamers {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, s.name...)
	}
	return string(b)
}

// streamSource is what every contender's server does with a stream: it
// sends stamped messages until a send fails, and counts the streams in
// flight for the idle mode.
type streamSource struct {
	open atomic.Int64
}

// serveMessages runs one stream asking for size bytes on src: messages
// stamped 0, 1, 2… through send(s, p) until send fails (the caller ended
// the stream), or for an idle stream (size 0) nothing until ctx ends.
// The payload p is reused once send returns. send is a function of s
// rather than a closure over it, so that an idle stream costs its server
// nothing here beyond the wait.
func serveMessages[S any](src *streamSource, ctx context.Context, size int, s S, send func(s S, p []byte) error) error {
	src.open.Add(1)
	defer src.open.Add(-1)
	if size == 0 {
		<-ctx.Done()
		return nil
	}
	if size < minPayload || size > maxStreamMessage {
		return fmt.Errorf("harness: stream of %d-byte messages: want %d to %d", size, minPayload, maxStreamMessage)
	}
	p := make([]byte, size)
	for seq := uint64(0); ; seq++ {
		stampMessage(p, seq)
		if err := send(s, p); err != nil {
			return err
		}
	}
}

// maxStreamMessage is the largest message of the streams mode: under
// gRPC-go's default 4 MiB limit on a received message.
const maxStreamMessage = 1 << 20

// stampMessage writes seq at the start of p and its complement at the
// end: the receiver checks both, so a message cut short or out of order
// shows.
func stampMessage(p []byte, seq uint64) {
	binary.BigEndian.PutUint64(p, seq)
	binary.BigEndian.PutUint64(p[len(p)-8:], ^seq)
}

var errStreamEnded = errors.New("the stream ended before the run did")

// streamCounts counts each stream's messages and checks their stamps:
// stream i's messages come from one goroutine at a time, stamped 0, 1,
// 2… by its server.
type streamCounts struct {
	size   int
	lossy  bool
	stream []streamCount
}

// streamCount is one stream's count, padded to its own cache line so
// that the streams' receivers do not share one.
type streamCount struct {
	n    atomic.Int64 // messages received
	lost atomic.Int64 // messages skipped (lossy contenders only)
	next uint64       // the stamp expected next
	_    [40]byte
}

func newStreamCounts(n, size int, lossy bool) *streamCounts {
	return &streamCounts{size: size, lossy: lossy, stream: make([]streamCount, n)}
}

// got checks and counts message p of stream i.
func (c *streamCounts) got(i int, p []byte) error {
	if i < 0 || i >= len(c.stream) {
		return fmt.Errorf("a message on stream %d of %d", i, len(c.stream))
	}
	if len(p) != c.size {
		return fmt.Errorf("stream %d: a message of %d bytes, want %d", i, len(p), c.size)
	}
	s := &c.stream[i]
	seq := binary.BigEndian.Uint64(p)
	if ^binary.BigEndian.Uint64(p[len(p)-8:]) != seq {
		return fmt.Errorf("stream %d: message %d: its stamps differ", i, s.next)
	}
	if seq != s.next {
		if !c.lossy || seq < s.next {
			return fmt.Errorf("stream %d: message %d where %d was due", i, seq, s.next)
		}
		s.lost.Add(int64(seq - s.next))
	}
	s.next = seq + 1
	s.n.Add(1)
	return nil
}

// total returns the messages received and lost so far, all streams
// together.
func (c *streamCounts) total() (n, lost int64) {
	for i := range c.stream {
		n += c.stream[i].n.Load()
		lost += c.stream[i].lost.Load()
	}
	return n, lost
}

// recvStream is one open stream of a contender that receives each
// stream's messages through its own call.
type recvStream interface {
	// Recv returns the next message's payload, valid until the next
	// Recv.
	Recv() ([]byte, error)
	// Close ends the stream (cancels it if it is still open).
	Close()
}

// eachRun is a [StreamRun] of streams that each have a receiving
// goroutine (none for idle streams).
type eachRun struct {
	streams []recvStream
	stopped atomic.Bool
	wg      sync.WaitGroup
	mu      sync.Mutex
	err     error
}

// startEach opens n streams with open and receives each in its own
// goroutine, passing its messages to got; idle streams (size 0) are
// opened and left alone.
func startEach(ctx context.Context, n, size int, got func(int, []byte) error,
	open func(ctx context.Context, size int) (recvStream, error)) (StreamRun, error) {
	r := &eachRun{streams: make([]recvStream, 0, n)}
	for i := range n {
		s, err := open(ctx, size)
		if err != nil {
			r.Stop()
			return nil, fmt.Errorf("opening stream %d of %d: %w", i+1, n, err)
		}
		r.streams = append(r.streams, s)
		if size == 0 {
			continue
		}
		r.wg.Add(1)
		go r.receive(i, s, got)
	}
	return r, nil
}

func (r *eachRun) receive(i int, s recvStream, got func(int, []byte) error) {
	defer r.wg.Done()
	for {
		p, err := s.Recv()
		if err == nil {
			err = got(i, p)
		} else if err == io.EOF {
			err = errStreamEnded
		}
		if err != nil {
			if !r.stopped.Load() {
				r.fail(fmt.Errorf("stream %d: %w", i, err))
			}
			return
		}
	}
}

func (r *eachRun) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
	}
}

func (r *eachRun) Stop() error {
	r.stopped.Store(true)
	for _, s := range r.streams {
		s.Close()
	}
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
