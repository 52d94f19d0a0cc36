package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	goruntime "runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	"github.com/wizardmesh/wizard/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The echo call of the payload mode: the request carries a payload and the
// answer carries the same bytes back, so a call moves the payload once
// each way. Every contender of the main table has one, over the same
// connection setup as its add call.

// RoleEcho is the role of a server process that echoes payloads.
const RoleEcho = "echo"

// EchoClient echoes payloads over one connection; it is safe for
// concurrent use. The answer is a new slice: p may be reused once Echo
// returns.
type EchoClient interface {
	Echo(ctx context.Context, p []byte) ([]byte, error)
	Close() error
}

// echoer is a contender's echo service.
type echoer struct {
	// note says what carries the payload.
	note  string
	serve func(listen string) (Server, error)
	dial  func(ctx context.Context, addr string) (EchoClient, error)
}

// echoers are the echo services, by contender name.
var echoers = map[string]echoer{
	"wizard-tcp":   wizardEchoer(newTCP),
	"wizard-quic":  wizardEchoer(newQUIC),
	gRPCName:       grpcEchoer,
	"http":         httpEchoer,
	"http-1conn":   http1ConnEchoer,
	floorName:      floorEchoer,
	"floor-writer": floorWriterEchoer,
}

// echoerOf returns the echo service of contender name.
func echoerOf(name string) (echoer, error) {
	e, ok := echoers[name]
	if !ok {
		return echoer{}, fmt.Errorf("contender %q has no echo service for the payload mode", name)
	}
	return e, nil
}

// serveEcho is [serve] for [RoleEcho]: it writes the address, then
// answers the control queries (see [answerControl]) until in reaches EOF.
func serveEcho(s ServerSpec, in io.Reader, out io.Writer) error {
	e, err := echoerOf(s.Contender)
	if err != nil {
		return err
	}
	if s.CPUProfile != "" {
		f, err := os.Create(s.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	srv, err := e.serve(s.Listen)
	if err != nil {
		return err
	}
	defer srv.Close()
	if _, err := fmt.Fprintln(out, srv.Addr()); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if _, err := fmt.Fprintln(out, answerControl(sc.Text())); err != nil {
			return err
		}
	}
	return sc.Err()
}

// wizardEchoPattern is the echo pattern the wizard contenders serve,
// beside wizardPattern (whose route [dialWizard] waits for).
const wizardEchoPattern = "cmd:echo,role:bench"

func wizardEchoer(newTransport func() (runtime.Transport, error)) echoer {
	return echoer{
		note: "protobuf google.protobuf.BytesValue both ways, runtime.NewClient over one node per client",
		serve: func(listen string) (Server, error) {
			t, err := newTransport()
			if err != nil {
				return nil, err
			}
			node, err := runtime.New(runtime.WithTransport(t), runtime.WithListen(listen))
			if err != nil {
				return nil, err
			}
			echo := func(_ context.Context, req *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error) {
				return &wrapperspb.BytesValue{Value: req.GetValue()}, nil
			}
			add := func(_ context.Context, req *mathv1.AddRequest) (*mathv1.AddResponse, error) {
				return &mathv1.AddResponse{Sum: req.GetA() + req.GetB()}, nil
			}
			if err := node.Add(wizardEchoPattern, runtime.NewUnaryHandler(echo)); err != nil {
				node.Close()
				return nil, err
			}
			if err := node.Add(wizardPattern, runtime.NewUnaryHandler(add)); err != nil {
				node.Close()
				return nil, err
			}
			return wizardServer{node}, nil
		},
		dial: func(ctx context.Context, addr string) (EchoClient, error) {
			c, err := dialWizard(ctx, "wizard echo", newTransport, []string{addr})
			if err != nil {
				return nil, err
			}
			node := c.(*wizardClient).node
			echo, err := runtime.NewClient[wrapperspb.BytesValue, wrapperspb.BytesValue](node, wizardEchoPattern)
			if err != nil {
				node.Close()
				return nil, err
			}
			return wizardEchoClient{node: node, echo: echo}, nil
		},
	}
}

type wizardEchoClient struct {
	node *runtime.Node
	echo *runtime.Client[wrapperspb.BytesValue, wrapperspb.BytesValue]
}

func (c wizardEchoClient) Echo(ctx context.Context, p []byte) ([]byte, error) {
	res, err := c.echo.Call(ctx, &wrapperspb.BytesValue{Value: p})
	if err != nil {
		return nil, err
	}
	return res.GetValue(), nil
}

func (c wizardEchoClient) Close() error { return c.node.Close() }

// grpcEchoMethod is the gRPC contender's echo method, declared by hand
// like its add.
const grpcEchoMethod = "/wizard.bench.v1.Echo/Echo"

var grpcEchoDesc = grpc.ServiceDesc{
	ServiceName: "wizard.bench.v1.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.BytesValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return &wrapperspb.BytesValue{Value: in.GetValue()}, nil
		},
	}},
	Metadata: "bench",
}

var grpcEchoer = echoer{
	note: "protobuf google.protobuf.BytesValue both ways, one grpc.ClientConn, default window sizes and message limits (4 MiB)",
	serve: func(listen string) (Server, error) {
		l, err := net.Listen("tcp", listen)
		if err != nil {
			return nil, err
		}
		s := grpc.NewServer()
		s.RegisterService(&grpcEchoDesc, struct{}{})
		go s.Serve(l)
		return &grpcServer{s: s, addr: l.Addr().String()}, nil
	},
	dial: func(ctx context.Context, addr string) (EchoClient, error) {
		cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		return grpcEchoClient{cc}, nil
	},
}

type grpcEchoClient struct{ cc *grpc.ClientConn }

func (c grpcEchoClient) Echo(ctx context.Context, p []byte) ([]byte, error) {
	res := new(wrapperspb.BytesValue)
	if err := c.cc.Invoke(ctx, grpcEchoMethod, &wrapperspb.BytesValue{Value: p}, res); err != nil {
		return nil, err
	}
	return res.GetValue(), nil
}

func (c grpcEchoClient) Close() error { return c.cc.Close() }

var httpEchoer = echoer{
	note:  "POST /echo, application/octet-stream body echoed with its Content-Length; the keep-alive pool of the add call (a connection per concurrent caller)",
	serve: serveHTTPEcho,
	dial: func(_ context.Context, addr string) (EchoClient, error) {
		return &httpEchoClient{c: &http.Client{Transport: pooledTransport()}, url: "http://" + addr + "/echo"}, nil
	},
}

var http1ConnEchoer = echoer{
	note:  "extra row: the same server; one connection (MaxConnsPerHost 1), callers queue for it",
	serve: serveHTTPEcho,
	dial: func(_ context.Context, addr string) (EchoClient, error) {
		t := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1, DisableCompression: true}
		return &httpEchoClient{c: &http.Client{Transport: t}, url: "http://" + addr + "/echo"}, nil
	},
}

// serveHTTPEcho serves POST /echo, answering the body with its length.
func serveHTTPEcho(listen string) (Server, error) {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		body, err := readBody(r.Body, r.ContentLength)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})
	s := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go s.Serve(l)
	return &httpServer{s: s, addr: l.Addr().String()}, nil
}

// readBody reads a body of n bytes (n < 0: unknown) into one slice.
func readBody(r io.Reader, n int64) ([]byte, error) {
	if n < 0 {
		return io.ReadAll(r)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

type httpEchoClient struct {
	c   *http.Client
	url string
}

func (c *httpEchoClient) Echo(ctx context.Context, p []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(p))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := c.c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := readBody(resp.Body, resp.ContentLength)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("http: %s: %s", resp.Status, bytes.TrimSpace(data))
	}
	return data, nil
}

func (c *httpEchoClient) Close() error {
	c.c.CloseIdleConnections()
	return nil
}

// The floor's echo frames: a 4-byte length of what follows, an 8-byte
// request id, the payload. The server answers inline in its reader with
// the same frame, and flushes when its input is drained.
const (
	floorEchoHeader = 4 + 8
	floorEchoMax    = 64 << 20
)

// floorEchoServe is the floor's echo server, shared by both floor echo
// contenders.
func floorEchoServe(listen string) (Server, error) {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	return serveConns(l, serveFloorEcho), nil
}

// floorEchoDial dials the floor's echo server with the client newClient
// makes.
func floorEchoDial[C EchoClient](newClient func(net.Conn) C) func(context.Context, string) (EchoClient, error) {
	return func(ctx context.Context, addr string) (EchoClient, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return newClient(nc), nil
	}
}

var floorEchoer = echoer{
	note: "written in the harness: length + request id + payload both ways, the server echoing inline in its reader through 64 KiB bufio buffers " +
		"(a payload larger than the buffer goes straight to the socket); on the client, callers write their own frames as the floor's add does " +
		"(one writev per batch, payloads up to 16 KiB copied after their header, larger ones written from the caller's slice)",
	serve: floorEchoServe,
	dial:  floorEchoDial(newFloorEchoClient),
}

var floorWriterEchoer = echoer{
	note: "extra row: the floor's echo server; the client hands each frame to one writer goroutine through a channel, which writes small frames " +
		"coalesced in a 64 KiB buffer and a large one as header and payload in one writev",
	serve: floorEchoServe,
	dial:  floorEchoDial(newFloorWriterEchoClient),
}

// readEchoHeader reads a frame's header and returns its id and payload
// length.
func readEchoHeader(br *bufio.Reader, h *[floorEchoHeader]byte) (id uint64, n int, err error) {
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return 0, 0, err
	}
	l := binary.BigEndian.Uint32(h[:4])
	if l < 8 || l-8 > floorEchoMax {
		return 0, 0, fmt.Errorf("harness: floor echo frame of %d bytes", l)
	}
	return binary.BigEndian.Uint64(h[4:]), int(l - 8), nil
}

func putEchoHeader(h *[floorEchoHeader]byte, id uint64, n int) {
	binary.BigEndian.PutUint32(h[:4], uint32(8+n))
	binary.BigEndian.PutUint64(h[4:], id)
}

// serveFloorEcho echoes each frame inline, reusing one payload buffer.
func serveFloorEcho(nc net.Conn) {
	br := bufio.NewReaderSize(nc, 64<<10)
	bw := bufio.NewWriterSize(nc, 64<<10)
	var h [floorEchoHeader]byte
	var p []byte
	for {
		id, n, err := readEchoHeader(br, &h)
		if err != nil {
			return
		}
		if cap(p) < n {
			p = make([]byte, n)
		}
		p = p[:n]
		if _, err := io.ReadFull(br, p); err != nil {
			return
		}
		putEchoHeader(&h, id, n)
		if err := writeEcho(bw, nc, &h, p); err != nil {
			return
		}
		if br.Buffered() < floorEchoHeader {
			if err := bw.Flush(); err != nil {
				return
			}
		}
	}
}

// writeEcho writes a frame: into bw when it fits, else as header and
// payload in one writev after flushing bw, so that a large payload is
// never copied.
func writeEcho(bw *bufio.Writer, nc net.Conn, h *[floorEchoHeader]byte, p []byte) error {
	if len(p)+floorEchoHeader <= bw.Available() {
		bw.Write(h[:])
		_, err := bw.Write(p)
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	bufs := net.Buffers{h[:], p}
	_, err := bufs.WriteTo(nc)
	return err
}

// connServer accepts connections on l and serves each with serve in its
// own goroutine until Close.
type connServer struct {
	l     net.Listener
	serve func(net.Conn)
	mu    sync.Mutex
	cs    map[net.Conn]struct{}
}

func serveConns(l net.Listener, serve func(net.Conn)) *connServer {
	s := &connServer{l: l, serve: serve, cs: map[net.Conn]struct{}{}}
	go s.accept()
	return s
}

func (s *connServer) accept() {
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

func (s *connServer) Addr() string { return s.l.Addr().String() }

func (s *connServer) Close() error {
	err := s.l.Close()
	s.mu.Lock()
	for c := range s.cs {
		c.Close()
	}
	s.mu.Unlock()
	return err
}

// echoConn is what both floor echo clients share: the connection, the
// calls awaiting their answers, and the reader that hands each answer to
// its caller.
type echoConn struct {
	nc   net.Conn
	next uint64 // the last request id; guarded by mu

	mu   sync.Mutex
	wait map[uint64]chan []byte

	done chan struct{}
	once sync.Once
}

func (c *echoConn) init(nc net.Conn) {
	c.nc, c.wait, c.done = nc, map[uint64]chan []byte{}, make(chan struct{})
}

// await waits for the answer to call id on r. A call that gives up closes
// the connection: its payload may still be in a write, and the caller may
// reuse it once Echo returns.
func (c *echoConn) await(ctx context.Context, id uint64, r chan []byte) ([]byte, error) {
	select {
	case b := <-r:
		return b, nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.wait, id)
		c.mu.Unlock()
		c.Close()
		return nil, ctx.Err()
	case <-c.done:
		return nil, errClosed
	}
}

func (c *echoConn) read() {
	defer c.Close()
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var h [floorEchoHeader]byte
	for {
		id, n, err := readEchoHeader(br, &h)
		if err != nil {
			return
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return
		}
		c.mu.Lock()
		r := c.wait[id]
		delete(c.wait, id)
		c.mu.Unlock()
		if r != nil {
			r <- b
		}
	}
}

func (c *echoConn) Close() error {
	c.once.Do(func() {
		close(c.done)
		c.nc.Close()
	})
	return nil
}

// floorEchoCopyMax is the largest payload the floor's echo client copies
// into its write buffer; a larger one goes to the socket from the
// caller's own slice, in the same writev.
const floorEchoCopyMax = 16 << 10

// floorEchoClient is the floor's echo client, the floor's add client
// ([floorClient]) with payloads: a caller appends its frame to the next
// write under a lock and, if no write is in progress, becomes the writer
// (one yield, then everything appended so far in one writev, then what
// others appended meanwhile). A small payload is copied after its header;
// a large one is not copied: the writev takes it from the caller's slice,
// which stays untouched until its answer arrives (the server cannot
// answer before it has read it).
type floorEchoClient struct {
	echoConn

	// Guarded by mu.
	out, spare floorEchoBatch
	writing    bool
}

// floorEchoBatch is the frames of one write: headers and small payloads
// copied into small, in order with the large payloads in bufs.
type floorEchoBatch struct {
	small []byte
	mark  int // the start of small's bytes not yet in bufs
	bufs  net.Buffers
}

func (b *floorEchoBatch) add(id uint64, p []byte) {
	var h [floorEchoHeader]byte
	putEchoHeader(&h, id, len(p))
	b.small = append(b.small, h[:]...)
	if len(p) <= floorEchoCopyMax {
		b.small = append(b.small, p...)
		return
	}
	// Earlier slices of small stay valid if the append below moves it:
	// they keep the old array, whose bytes are already final.
	b.bufs = append(b.bufs, b.small[b.mark:], p)
	b.mark = len(b.small)
}

func (b *floorEchoBatch) empty() bool { return len(b.small) == 0 }

// writeTo writes the batch in one writev and empties it.
func (b *floorEchoBatch) writeTo(nc net.Conn) error {
	if b.mark < len(b.small) {
		b.bufs = append(b.bufs, b.small[b.mark:])
	}
	w := b.bufs // WriteTo consumes its receiver
	_, err := w.WriteTo(nc)
	clear(b.bufs)
	b.small, b.mark, b.bufs = b.small[:0], 0, b.bufs[:0]
	return err
}

func newFloorEchoClient(nc net.Conn) *floorEchoClient {
	c := &floorEchoClient{}
	c.out.small = make([]byte, 0, 64<<10)
	c.echoConn.init(nc)
	go c.read()
	return c
}

func (c *floorEchoClient) Echo(ctx context.Context, p []byte) ([]byte, error) {
	r := make(chan []byte, 1)
	c.mu.Lock()
	c.next++
	id := c.next
	c.wait[id] = r
	c.out.add(id, p)
	if !c.writing {
		c.writing = true
		c.mu.Unlock()
		goruntime.Gosched() // let the callers already woken append their frames to this write
		c.mu.Lock()
		for !c.out.empty() {
			c.out, c.spare = c.spare, c.out
			c.mu.Unlock()
			err := c.spare.writeTo(c.nc)
			c.mu.Lock()
			if err != nil {
				c.writing = false
				c.mu.Unlock()
				c.Close()
				return nil, errClosed
			}
		}
		c.writing = false
	}
	c.mu.Unlock()
	return c.await(ctx, id, r)
}

// floorWriterEchoClient is the floor-writer contender's echo client (the
// floor's former one): callers hand their frames to one writer goroutine
// through a channel; it writes small frames coalesced in a buffer and
// large ones as header and payload in one writev, flushing when the queue
// is empty.
type floorWriterEchoClient struct {
	echoConn
	queue chan floorEchoFrame
}

type floorEchoFrame struct {
	id uint64
	p  []byte
}

func newFloorWriterEchoClient(nc net.Conn) *floorWriterEchoClient {
	c := &floorWriterEchoClient{queue: make(chan floorEchoFrame, 4096)}
	c.echoConn.init(nc)
	go c.write()
	go c.read()
	return c
}

func (c *floorWriterEchoClient) Echo(ctx context.Context, p []byte) ([]byte, error) {
	r := make(chan []byte, 1)
	c.mu.Lock()
	c.next++
	id := c.next
	c.wait[id] = r
	c.mu.Unlock()
	select {
	case c.queue <- floorEchoFrame{id, p}:
	case <-c.done:
		return nil, errClosed
	}
	return c.await(ctx, id, r)
}

func (c *floorWriterEchoClient) write() {
	defer c.Close()
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	var h [floorEchoHeader]byte
	put := func(f floorEchoFrame) error {
		putEchoHeader(&h, f.id, len(f.p))
		return writeEcho(bw, c.nc, &h, f.p)
	}
	for {
		select {
		case f := <-c.queue:
			if put(f) != nil {
				return
			}
		case <-c.done:
			return
		}
	drain:
		for {
			select {
			case f := <-c.queue:
				if put(f) != nil {
					return
				}
			default:
				break drain
			}
		}
		if bw.Flush() != nil {
			return
		}
	}
}

// echoCaller adapts an EchoClient to the Client that [drive] drives:
// caller a sends its own payload of size bytes, stamped with b at both
// ends, and the answer must come back with the same length and stamps.
// drive numbers its callers 0 to n-1 in a, so each has one payload.
type echoCaller struct {
	c        EchoClient
	size     int
	payloads [][]byte
}

// minPayload is the smallest payload: room for the two stamps.
const minPayload = 16

func newEchoCaller(c EchoClient, size, callers int) (*echoCaller, error) {
	if size < minPayload {
		return nil, fmt.Errorf("a payload of %d bytes is below %d (each carries two 8-byte stamps)", size, minPayload)
	}
	e := &echoCaller{c: c, size: size, payloads: make([][]byte, callers)}
	for i := range e.payloads {
		p := make([]byte, size)
		for j := range p {
			p[j] = byte(i + j)
		}
		e.payloads[i] = p
	}
	return e, nil
}

var errEchoMismatch = errors.New("the echo differs from the payload")

func (e *echoCaller) Call(ctx context.Context, a, b float64) (float64, error) {
	i := int(a)
	if i < 0 || i >= len(e.payloads) {
		return 0, fmt.Errorf("caller %v of %d", a, len(e.payloads))
	}
	p := e.payloads[i]
	stamp := uint64(b)
	binary.BigEndian.PutUint64(p, stamp)
	binary.BigEndian.PutUint64(p[len(p)-8:], ^stamp)
	r, err := e.c.Echo(ctx, p)
	if err != nil {
		return 0, err
	}
	if len(r) != len(p) || binary.BigEndian.Uint64(r) != stamp || binary.BigEndian.Uint64(r[len(r)-8:]) != ^stamp {
		return 0, fmt.Errorf("%w: %d bytes for %d", errEchoMismatch, len(r), len(p))
	}
	return a + b, nil
}

func (e *echoCaller) Close() error { return nil }
