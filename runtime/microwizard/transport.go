package microwizard

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/discovery"
	"github.com/wizardmesh/wizard/runtime/internal/bridge"
)

// The defaults.
const (
	defaultMaxLine      = 16 << 20 // see WithMaxLine
	defaultMaxPending   = 1024
	defaultServeTimeout = 5555 * time.Millisecond // MicroWizard's client timeout
	defaultKeepAlive    = 120 * time.Second       // MicroWizard's ping interval
	defaultKeepAliveTO  = 5 * time.Second         // and how long it waits for the answer
	dialTimeout         = 5 * time.Second
	readChunk           = 64 << 10
	keptLineBuffer      = 1 << 20 // a connection's line buffer, kept between lines up to this
)

// Transport speaks MicroWizard 1.5.0's TCP protocol: newline-delimited
// JSON, one request or answer a line. Create it with [New].
type Transport struct {
	peers            map[string][]string // pins by address (WithPeer)
	order            []string            // the addresses in the order given
	log              *slog.Logger
	maxLine          int
	maxPending       int
	serveTimeout     time.Duration
	keepAlive        time.Duration
	keepAliveTimeout time.Duration
	seneca           bool   // speak Seneca's wire (WithSeneca)
	senecaID         string // this node's instance id on Seneca's wire
	http             bool   // Seneca over HTTP (WithSenecaHTTP)
}

var _ runtime.Transport = (*Transport)(nil)

// New returns a MicroWizard transport. It fails on a nil option and on an
// option's invalid argument, with an error that names the option.
func New(opts ...Option) (*Transport, error) {
	t := &Transport{peers: map[string][]string{}}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("wizard: microwizard: option %d of %d is nil", i+1, len(opts))
		}
		if err := o.apply(t); err != nil {
			return nil, fmt.Errorf("wizard: microwizard: %w", err)
		}
	}
	t.maxLine = cmp.Or(t.maxLine, defaultMaxLine)
	t.maxPending = cmp.Or(t.maxPending, defaultMaxPending)
	t.serveTimeout = cmp.Or(t.serveTimeout, defaultServeTimeout)
	t.keepAlive = cmp.Or(t.keepAlive, defaultKeepAlive)
	t.keepAliveTimeout = cmp.Or(t.keepAliveTimeout, defaultKeepAliveTO)
	if t.seneca && t.senecaID == "" {
		var b [8]byte
		rand.Read(b[:])
		t.senecaID = "wizard/" + hex.EncodeToString(b[:])
	}
	if t.log == nil {
		t.log = slog.Default()
	}
	return t, nil
}

// Name returns "microwizard", or "seneca" ([WithSeneca]).
func (t *Transport) Name() string {
	switch {
	case t.http:
		return "seneca-http"
	case t.seneca:
		return "seneca"
	}
	return "microwizard"
}

// Discovery returns static discovery of the peers given with [WithPeer],
// for runtime.WithDiscovery.
func (t *Transport) Discovery() discovery.Discovery { return runtime.StaticPeers(t.order...) }

// Listen accepts MicroWizard clients on addr and serves their act and
// actE calls with s.
func (t *Transport) Listen(addr string, s runtime.Server) (runtime.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("wizard: microwizard: listen %s: %w", addr, err)
	}
	if t.http {
		return newHTTPListener(t, ln, s), nil
	}
	return newListener(t, ln, s), nil
}

// Dial connects to the MicroWizard node listening at addr. Every error
// matches [runtime.ErrNotSent].
func (t *Transport) Dial(ctx context.Context, addr string) (runtime.Conn, error) {
	if t.http {
		return newHTTPConn(t, addr), nil
	}
	d := net.Dialer{Timeout: dialTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, bridge.NotSent("wizard: microwizard: dial "+addr, err)
	}
	return newConn(t, addr, c), nil
}

// readLine reads one line (without its newline) from r, at most max
// bytes; buf is reused for lines longer than r's buffer. The line is
// valid until the next call. A longer line is read to its end and
// dropped, and its head returned with a [*lineTooLongError]: the
// connection goes on, and the call whose line it was can be answered.
func readLine(r *bufio.Reader, max int, buf []byte) ([]byte, []byte, error) {
	if cap(buf) > keptLineBuffer {
		buf = nil // a long line's buffer is not kept for the next
	}
	b, err := r.ReadSlice('\n')
	if err == nil {
		if len(b)-1 > max {
			buf = append(buf[:0], b[:min(len(b)-1, lineHead)]...)
			return buf, buf, &lineTooLongError{size: len(b) - 1, max: max}
		}
		return b[:len(b)-1], buf, nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		if err == io.EOF && len(b) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, buf, err
	}
	buf = append(buf[:0], b...)
	for {
		if len(buf) > max {
			return skipLine(r, max, buf)
		}
		b, err = r.ReadSlice('\n')
		buf = append(buf, b...)
		switch {
		case err == nil:
			if len(buf)-1 > max {
				return buf[:min(len(buf)-1, lineHead)], buf, &lineTooLongError{size: len(buf) - 1, max: max}
			}
			return buf[:len(buf)-1], buf, nil
		case !errors.Is(err, bufio.ErrBufferFull):
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, buf, err
		}
	}
}

// skipLine reads the rest of a line over the bound max, whose first
// bytes are in buf, and drops it; it returns the line's head.
func skipLine(r *bufio.Reader, max int, buf []byte) ([]byte, []byte, error) {
	size := len(buf)
	for {
		b, err := r.ReadSlice('\n')
		size += len(b)
		switch {
		case err == nil:
			return buf[:min(len(buf), lineHead)], buf, &lineTooLongError{size: size - 1, max: max}
		case !errors.Is(err, bufio.ErrBufferFull):
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, buf, err
		}
	}
}

// lineWriter writes lines to a connection, one writer at a time,
// coalescing: a writer leaves its line in the buffer when another is
// waiting to write, and the last one flushes.
type lineWriter struct {
	waiting atomic.Int32
	mu      sync.Mutex
	w       *bufio.Writer
}

func newLineWriter(c net.Conn) *lineWriter {
	return &lineWriter{w: bufio.NewWriterSize(c, readChunk)}
}

// write writes b and a newline; it flushes unless another write waits
// (which will). An error of a write or flush ends the connection, which
// is how its other writers learn of it.
func (w *lineWriter) write(b []byte) error {
	w.waiting.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.w.Write(b)
	w.w.WriteByte('\n')
	if w.waiting.Add(-1) > 0 {
		return nil
	}
	return w.w.Flush()
}
